"""Nsight Systems tables -> event rows (one polars frame per table, common columns).

| table | cat | timeline |
| --- | --- | --- |
| CUPTI_ACTIVITY_KIND_KERNEL | kernel (NCCL kernels: nccl); a graph's kernels keep graph and node ids in args | GPU stream |
| CUPTI_ACTIVITY_KIND_MEMCPY | memcpy, bytes, copy kind in the name and args (graph node too) | GPU stream |
| CUPTI_ACTIVITY_KIND_MEMSET | memset, bytes (graph node too) | GPU stream |
| CUPTI_ACTIVITY_KIND_SYNCHRONIZATION | sync (Kineto's names: Event Sync, Stream Sync, ...) | GPU stream (-1: device-wide) |
| CUPTI_ACTIVITY_KIND_RUNTIME / _DRIVER | cuda_api (synchronising calls: sync) | CPU thread |
| NVTX_EVENTS push/pop, start/end, marks | user, step (ProfilerStep#N, "step N", ...), nccl (domain NCCL) | CPU thread; start/end ranges an async track per process and domain |
| OSRT_API | io (file and socket calls), else other | CPU thread |
| CUPTI_ACTIVITY_KIND_GRAPH_TRACE | kernel: a whole CUDA graph launch, graph and exec ids in args | GPU stream |
| CUDA_GRAPH_EVENTS / CUDA_GRAPH_NODE_EVENTS | cuda_api: graph and node definitions, their ids in args | CPU thread |
| MPI_* (:mod:`.mpi`) | mpi_p2p, mpi_coll, other | CPU thread |

Every frame has: ``kind``, ``pid``, ``tid``, ``device``, ``stream``, ``start_ns``,
``end_ns`` (on the report's clock, ns), ``name``, ``src_cat``, ``cat``, ``corr``,
``bytes``, ``instant``, ``args`` (JSON text), ``domain``. API names lose the
``_vNNNN`` version suffix, as ``nsys stats`` shows them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import numpy as np
import polars as pl

from di.convert.categories import COMM_KERNEL, SYNC_API
from di.convert.cupti_enums import MEMCPY_KINDS
from di.convert.jsonstrings import json_strings
from di.convert.nsys.report import Report, pid_of, tid_of
from di.trace import CATS

__all__ = ["KERNEL", "TABLES", "base", "frame", "frames", "json_object", "num", "thread"]

KERNEL, MEMCPY, MEMSET, SYNC = (
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_MEMSET",
    "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
)
RUNTIME, DRIVER, NVTX, OSRT = "CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_DRIVER", "NVTX_EVENTS", "OSRT_API"
GRAPH_TRACE, GRAPHS, GRAPH_NODES = "CUPTI_ACTIVITY_KIND_GRAPH_TRACE", "CUDA_GRAPH_EVENTS", "CUDA_GRAPH_NODE_EVENTS"

# CUPTI enums (cupti_activity.h; the export's ENUM_CUDA_MEMCPY_OPER, ENUM_CUDA_MEM_KIND, ENUM_CUPTI_SYNC_TYPE hold the same)
COPY_KINDS = {0: "Unknown", **MEMCPY_KINDS}
MEM_KINDS = {
    0: "Pageable",
    1: "Pinned",
    2: "Device",
    3: "Array",
    4: "Managed",
    5: "Device Static",
    6: "Managed Static",
    7: "Unknown",
}
SYNC_TYPES = {0: "Unknown Sync", 1: "Event Sync", 2: "Stream Wait Event", 3: "Stream Sync", 4: "Context Sync"}
EVENT_CLASS_DRIVER = 1
"""ENUM_NSYS_EVENT_CLASS: TRACE_PROCESS_EVENT_CUDA_DRIVER (0 is the runtime)."""
NVTX_MARK, NVTX_PUSHPOP, NVTX_STARTEND, NVTX_DOMAIN = 34, 59, 60, 75
"""ENUM_NSYS_EVENT_TYPE: NvtxMark, NvtxPushPopRange, NvtxStartEndRange, NvtxDomainCreate."""
NVTX_MARKS, NVTX_PUSHPOPS, NVTX_STARTENDS = (34, 65), (59, 70), (60, 71)
"""With the NVTXT (text-file NVTX) variants: NvtxtMark 65, NvtxtPushPopRange 70, NvtxtStartEndRange 71."""
NO_STREAM = 0xFFFFFFFF
"""streamId of a device-wide record (CUPTI's CUPTI_SYNCHRONIZATION_INVALID_VALUE); stored as stream -1, as Kineto does."""

IO_CALLS = (
    r"^(open|open64|openat|openat64|creat|close|read|pread|pread64|readv|preadv|write|pwrite|pwrite64|writev|pwritev|"
    r"lseek|lseek64|fsync|fdatasync|sync_file_range|fopen|fopen64|fdopen|freopen|fclose|fread|fwrite|fflush|fgets|fputs|"
    r"fseek|ftell|getc|putc|fgetc|fputc|unlink|rename|stat|fstat|lstat|mkdir|rmdir|socket|bind|connect|accept|accept4|"
    r"listen|send|sendto|sendmsg|recv|recvfrom|recvmsg|shutdown|aio_read|aio_write)$"
)
STEP_TEXT = r"(?i)^(ProfilerStep#\d+|(train[ _-]?)?(step|iteration|iter)[ #_:-]*\d+)$"
API_VERSION = r"_v\d+$"

KIND = pl.Enum(["cpu_thread", "async", "gpu_stream"])
"""Timeline kinds of event rows, in the order their locations are numbered."""

TABLES = (KERNEL, MEMCPY, MEMSET, SYNC, RUNTIME, DRIVER, NVTX, OSRT, GRAPH_TRACE, GRAPHS, GRAPH_NODES)


def num(values: np.ndarray, null: np.ndarray | None = None) -> pl.Series:
    """Integers as JSON number texts ("null" where ``null``)."""
    s = pl.Series(values).cast(pl.String)
    return (s.set(pl.Series(null), None) if null is not None and null.any() else s).fill_null("null")


def json_object(fields: dict[str, pl.Series]) -> pl.Series:
    """One JSON object text per row from JSON value texts (:func:`_num`, :func:`json_strings`)."""
    parts: list[pl.Expr] = []
    for i, (key, value) in enumerate(fields.items()):
        parts += [pl.lit(("{" if i == 0 else ",") + '"' + key + '":'), pl.lit(value)]
    return pl.select(pl.concat_str(*parts, pl.lit("}")).alias("args")).to_series()


def _enum_text(values: np.ndarray, null: np.ndarray, names: dict[int, str], default: str = "Unknown") -> pl.Series:
    s = pl.Series(values).replace_strict(names, default=default, return_dtype=pl.String)
    return s.set(pl.Series(null), None) if null.any() else s


def base(n: int, **cols: object) -> dict[str, object]:
    out: dict[str, object] = {
        "pid": None,
        "tid": None,
        "device": None,
        "stream": None,
        "corr": None,
        "bytes": None,
        "instant": np.zeros(n, np.bool_),
        "domain": None,
    }
    out.update(cols)
    return out


def frame(n: int, cols: dict[str, object]) -> pl.DataFrame:
    schema = {
        "kind": KIND,
        "pid": pl.Int64,
        "tid": pl.Int64,
        "device": pl.Int32,
        "stream": pl.Int64,
        "start_ns": pl.Int64,
        "end_ns": pl.Int64,
        "name": pl.Categorical,
        "src_cat": pl.Categorical,
        "cat": pl.Enum(list(CATS)),
        "corr": pl.Int64,
        "bytes": pl.Int64,
        "instant": pl.Boolean,
        "args": pl.String,
        "domain": pl.String,
    }
    series = []
    for k, dtype in schema.items():
        v = cols.get(k)
        if v is None:
            series.append(pl.Series(k, [], dtype=dtype).extend_constant(None, n))
        elif isinstance(v, str):
            series.append(
                pl.select(pl.repeat(v, n, dtype=pl.String).cast(dtype).alias(k)).to_series()
                if n
                else pl.Series(k, [], dtype=dtype)
            )
        else:  # a value beyond the column's type (a damaged device id) becomes null
            series.append(pl.Series(k, v).cast(dtype, strict=False))
    return pl.DataFrame(series)


def _nullable(c: dict[str, np.ndarray], key: str) -> pl.Series:
    return pl.Series(c[key]).set(pl.Series(c[key + "_null"]), None) if c[key + "_null"].any() else pl.Series(c[key])


def _gpu(report: Report, table: str, extra: dict[str, str | None]) -> dict[str, np.ndarray]:
    return report.ints(
        table,
        {
            "start": "start",
            "end": "end",
            "device": "deviceId",
            "stream": "streamId",
            "corr": "correlationId",
            "gpid": "globalPid",
            **extra,
        },
    )


def _gpu_cols(c: dict[str, np.ndarray]) -> dict[str, object]:
    stream = np.where(c["stream"] == NO_STREAM, -1, c["stream"])
    pid = pl.Series(pid_of(c["gpid"]))
    return {
        "kind": "gpu_stream",
        "pid": pid.set(pl.Series(c["gpid_null"]), None) if c["gpid_null"].any() else pid,
        "tid": None,
        "device": c["device"],
        "stream": stream,
        "start_ns": c["start"],
        "end_ns": c["end"],
        "corr": _nullable(c, "corr"),
    }


def _names(values: pl.Series) -> pl.Series:
    return values.cast(pl.Categorical)


def _flag(report: Report, key: str, pattern: str, pos: pl.Series, yes: str, no: str) -> pl.Series:
    """``yes`` where the string at ``pos`` matches ``pattern`` (tested once per distinct string), else ``no``."""
    matches = report.derived(key, lambda v: v.fill_null("").str.contains(pattern))
    return matches.gather(pos).fill_null(False).replace_strict({True: yes, False: no}, return_dtype=pl.Enum(list(CATS)))


def kernels(report: Report, dropped: Counter[str]) -> pl.DataFrame:
    have = set(report.columns(KERNEL))
    smem = " + ".join(f'coalesce("{c}", 0)' for c in ("staticSharedMemory", "dynamicSharedMemory") if c in have) or None
    c = _gpu(
        report,
        KERNEL,
        {
            "demangled": "demangledName",
            "short": "shortName",
            "gx": "gridX",
            "gy": "gridY",
            "gz": "gridZ",
            "bx": "blockX",
            "by": "blockY",
            "bz": "blockZ",
            "regs": "registersPerThread",
            "smem": smem,
            "graph_node": "graphNodeId",
            "graph": "graphId",
        },
    )
    n = c["start"].size
    pos_short = report.positions(c["short"], c["short_null"])
    pos = report.positions(c["demangled"], c["demangled_null"]).fill_null(pos_short)
    name = report.derived("name", _names).gather(pos).fill_null("")
    short = report.derived("json", json_strings).gather(pos_short).fill_null("null")
    grid = pl.concat_str(
        pl.lit("["),
        pl.lit(num(c["gx"])),
        pl.lit(","),
        pl.lit(num(c["gy"])),
        pl.lit(","),
        pl.lit(num(c["gz"])),
        pl.lit("]"),
    )
    block = pl.concat_str(
        pl.lit("["),
        pl.lit(num(c["bx"])),
        pl.lit(","),
        pl.lit(num(c["by"])),
        pl.lit(","),
        pl.lit(num(c["bz"])),
        pl.lit("]"),
    )
    fields = {
        "short_name": short,
        "grid": pl.select(grid).to_series(),
        "block": pl.select(block).to_series(),
        "registers per thread": num(c["regs"], c["regs_null"]),
        "shared memory": num(c["smem"], c["smem_null"]),
    }
    fields.update(_graph_node(c))
    if not c["graph_null"].all():
        fields["graph"] = num(c["graph"], c["graph_null"])
    cat = _flag(report, "nccl_kernel", COMM_KERNEL, pos, "nccl", "kernel")
    return frame(n, base(n, **_gpu_cols(c), name=name, src_cat="kernel", cat=cat, args=json_object(fields)))


def _graph_node(c: dict[str, np.ndarray]) -> dict[str, pl.Series]:
    """``graph node`` (graphNodeId) of the GPU records a CUDA graph launched, when the table has any."""
    return {} if c["graph_node_null"].all() else {"graph node": num(c["graph_node"], c["graph_node_null"])}


def memcpys(report: Report, dropped: Counter[str]) -> pl.DataFrame:
    c = _gpu(
        report,
        MEMCPY,
        {"bytes": "bytes", "kind": "copyKind", "src": "srcKind", "dst": "dstKind", "graph_node": "graphNodeId"},
    )
    n = c["start"].size
    kind = _enum_text(c["kind"], c["kind_null"], COPY_KINDS)
    src, dst = _enum_text(c["src"], c["src_null"], MEM_KINDS), _enum_text(c["dst"], c["dst_null"], MEM_KINDS)
    df = pl.DataFrame({"k": kind.fill_null("Unknown"), "s": src, "d": dst})
    name = df.select(
        pl.when(pl.col("s").is_not_null() & pl.col("d").is_not_null())
        .then(pl.format("Memcpy {} ({} -> {})", "k", "s", "d"))
        .otherwise(pl.format("Memcpy {}", "k"))
    ).to_series()
    args = json_object(
        {
            "copy kind": json_strings(kind),
            "src kind": json_strings(src),
            "dst kind": json_strings(dst),
            **_graph_node(c),
        }
    )
    return frame(
        n,
        base(n, **_gpu_cols(c), name=name, src_cat="gpu_memcpy", cat="memcpy", bytes=_nullable(c, "bytes"), args=args),
    )


def memsets(report: Report, dropped: Counter[str]) -> pl.DataFrame:
    c = _gpu(report, MEMSET, {"bytes": "bytes", "value": "value", "mem": "memKind", "graph_node": "graphNodeId"})
    n = c["start"].size
    mem = _enum_text(c["mem"], c["mem_null"], MEM_KINDS)
    name = (
        pl.DataFrame({"m": mem})
        .select(pl.when(pl.col("m").is_not_null()).then(pl.format("Memset ({})", "m")).otherwise(pl.lit("Memset")))
        .to_series()
    )
    args = json_object({"value": num(c["value"], c["value_null"]), "mem kind": json_strings(mem), **_graph_node(c)})
    return frame(
        n,
        base(n, **_gpu_cols(c), name=name, src_cat="gpu_memset", cat="memset", bytes=_nullable(c, "bytes"), args=args),
    )


def syncs(report: Report, dropped: Counter[str]) -> pl.DataFrame:
    c = _gpu(report, SYNC, {"type": "syncType", "event": "eventId"})
    n = c["start"].size
    name = _enum_text(c["type"], c["type_null"], SYNC_TYPES, "Unknown Sync").fill_null("Unknown Sync")
    args = json_object(
        {"cuda_sync_kind": json_strings(name), "event": num(c["event"], c["event_null"] | (c["event"] == NO_STREAM))}
    )
    return frame(n, base(n, **_gpu_cols(c), name=name, src_cat="cuda_sync", cat="sync", args=args))


def thread(c: dict[str, np.ndarray]) -> dict[str, object]:
    return {
        "kind": "cpu_thread",
        "pid": pid_of(c["gtid"]),
        "tid": tid_of(c["gtid"]),
        "start_ns": c["start"],
        "end_ns": c["end"],
    }


def _api(report: Report, table: str, dropped: Counter[str]) -> pl.DataFrame:
    c = report.ints(
        table,
        {
            "start": "start",
            "end": "end",
            "gtid": "globalTid",
            "corr": "correlationId",
            "name": "nameId",
            "ret": "returnValue",
            "cls": "eventClass",
        },
    )
    n = c["start"].size
    pos = report.positions(c["name"], c["name_null"])
    name = _api_names(report, pos)
    driver = (c["cls"] == EVENT_CLASS_DRIVER) & ~c["cls_null"] if table == RUNTIME else np.ones(n, np.bool_)
    src_cat = pl.Series(driver).replace_strict({True: "cuda_driver", False: "cuda_runtime"}, return_dtype=pl.String)
    cat = _flag(report, "sync_api", SYNC_API, pos, "sync", "cuda_api")
    args = json_object(
        {
            "function": report.derived("json", json_strings).gather(pos).fill_null("null"),
            "return value": num(c["ret"], c["ret_null"]),
        }
    )
    return frame(n, base(n, **thread(c), name=name, src_cat=src_cat, cat=cat, corr=_nullable(c, "corr"), args=args))


def runtime(report: Report, dropped: Counter[str]) -> pl.DataFrame:
    return _api(report, RUNTIME, dropped)


def driver(report: Report, dropped: Counter[str]) -> pl.DataFrame:
    return _api(report, DRIVER, dropped)


def osrt(report: Report, dropped: Counter[str]) -> pl.DataFrame:
    c = report.ints(OSRT, {"start": "start", "end": "end", "gtid": "globalTid", "name": "nameId", "ret": "returnValue"})
    n = c["start"].size
    pos = report.positions(c["name"], c["name_null"])
    name = report.derived("name", _names).gather(pos).fill_null("")
    cat = _flag(report, "io_call", IO_CALLS, pos, "io", "other")
    args = json_object({"return value": num(c["ret"], c["ret_null"])})
    return frame(n, base(n, **thread(c), name=name, src_cat="osrt", cat=cat, args=args))


UNIT_SEPARATOR = "\x1f"


def _inline_text(report: Report, n: int, null: np.ndarray) -> pl.Series:
    """NVTX_EVENTS.text (registered strings are in textId instead; null where ``null``), in table order: one
    ``group_concat`` text split by polars, not a Python string per row (per row only when a text holds the
    separator, U+001F)."""
    if null.all():
        return pl.Series([], dtype=pl.String).extend_constant(None, n)
    query = f"SELECT group_concat(coalesce(CAST(text AS TEXT), ''), char(31)) FROM \"{NVTX}\""
    joined = report.con.execute(query).fetchone()[0] or ""
    parts = pl.Series([joined], dtype=pl.String).str.split(UNIT_SEPARATOR).explode()
    if parts.len() != n:
        parts = pl.Series(
            [r[0] for r in report.con.execute(f'SELECT CAST(text AS TEXT) FROM "{NVTX}"')], dtype=pl.String
        )
    return parts.set(pl.Series(null), None) if null.any() else parts


def nvtx(report: Report, dropped: Counter[str]) -> pl.DataFrame:
    """Push/pop ranges on their thread, start/end ranges on an async track per (process, domain), marks as instants."""
    c = report.ints(
        NVTX,
        {
            "start": "start",
            "end": "end",
            "type": "eventType",
            "gtid": "globalTid",
            "text_id": "textId",
            "domain": "domainId",
            "range": "rangeId",
            "category": "category",
            "no_text": '"text" IS NULL' if "text" in report.columns(NVTX) else None,
        },
    )
    inline = _inline_text(report, c["start"].size, (c["no_text"] != 0) | c["no_text_null"])
    text = inline.fill_null(report.text(c["text_id"], c["text_id_null"]))
    t = (
        c["type"] if not c["type_null"].all() else np.where(c["end_null"], NVTX_MARK, NVTX_PUSHPOP)
    )  # no eventType: by the end
    pid = pid_of(c["gtid"])
    dom = c["domain"]
    is_domain = t == NVTX_DOMAIN
    # domain ids are per process: the NvtxDomainCreate record of (process, id) names it
    names = pl.DataFrame({"pid": pid[is_domain], "id": dom[is_domain], "d": text.filter(pl.Series(is_domain))}).unique(
        ["pid", "id"], keep="last"
    )
    domain = (
        pl.DataFrame({"pid": pid, "id": dom})
        .join(names, on=["pid", "id"], how="left", maintain_order="left")
        .get_column("d")
    )
    domain = domain.set(pl.Series(c["domain_null"] | (dom == 0)), None)
    mark = np.isin(t, NVTX_MARKS)
    pushpop, startend = np.isin(t, NVTX_PUSHPOPS), np.isin(t, NVTX_STARTENDS)
    ranges = pushpop | startend
    open_end = ranges & c["end_null"]
    if open_end.any():
        dropped["NVTX ranges without an end"] += int(open_end.sum())
    other = ~(mark | ranges | is_domain)
    if other.any():
        dropped["NVTX records that are not ranges or marks (categories, names)"] += int(other.sum())
    keep = (mark | ranges) & ~open_end
    end = np.where(mark, c["start"], c["end"])
    cat = (
        pl.DataFrame({"t": text.fill_null(""), "d": domain})
        .select(
            pl.when(pl.col("d") == "NCCL")
            .then(pl.lit("nccl"))
            .when(pl.col("t").str.contains(STEP_TEXT))
            .then(pl.lit("step"))
            .otherwise(pl.lit("user"))
        )
        .to_series()
    )
    args = json_object(
        {
            "domain": json_strings(domain),
            "category": num(c["category"], c["category_null"]),
            "range id": num(c["range"], c["range_null"]),
        }
    )
    kind = pl.select(
        pl.when(pl.lit(pl.Series(startend))).then(pl.lit("async")).otherwise(pl.lit("cpu_thread"))
    ).to_series()
    rows = frame(
        c["start"].size,
        base(
            c["start"].size,
            kind=kind,
            pid=pid,
            tid=np.where(startend, -1, tid_of(c["gtid"])),
            start_ns=c["start"],
            end_ns=end,
            name=text.fill_null(""),
            src_cat="nvtx",
            cat=cat,
            instant=mark,
            args=args,
            domain=domain,
        ),
    )
    return rows.filter(pl.Series(keep))


def graph_launches(report: Report, dropped: Counter[str]) -> pl.DataFrame:
    """Whole CUDA graph launches on their stream (``--cuda-graph-trace=graph``): cat kernel, linked to
    their cudaGraphLaunch by correlation id."""
    c = _gpu(report, GRAPH_TRACE, {"graph": "graphId", "exec": "graphExecId"})
    n = c["start"].size
    name = ("CUDA graph " + pl.Series(c["graph"]).cast(pl.String)).set(pl.Series(c["graph_null"]), "CUDA graph")
    args = json_object({"graph": num(c["graph"], c["graph_null"]), "graph exec": num(c["exec"], c["exec_null"])})
    return frame(n, base(n, **_gpu_cols(c), name=name, src_cat="cuda_graph", cat="kernel", args=args))


def _api_names(report: Report, pos: pl.Series) -> pl.Series:
    """The API name at each string position (``nameId`` through ``StringIds``), version suffix removed."""
    return (
        report.derived("api_name", lambda v: v.str.replace(API_VERSION, "").cast(pl.Categorical))
        .gather(pos)
        .fill_null("")
    )


def _graph_definitions(report: Report, table: str, ids: dict[str, str]) -> pl.DataFrame:
    """CUDA graph and graph node definitions (creation, cloning, instantiation) on the thread that made them:
    cat cuda_api, the ids in args."""
    c = report.ints(table, {"start": "start", "end": "end", "gtid": "globalTid", "name": "nameId", **ids})
    n = c["start"].size
    pos = report.positions(c["name"], c["name_null"])
    name = _api_names(report, pos)
    args = json_object({key.replace("_", " "): num(c[key], c[key + "_null"]) for key in ids})
    src_cat = "cuda_graph" if table == GRAPHS else "cuda_graph_node"
    return frame(n, base(n, **thread(c), name=name, src_cat=src_cat, cat="cuda_api", args=args))


def graphs(report: Report, dropped: Counter[str]) -> pl.DataFrame:
    return _graph_definitions(
        report, GRAPHS, {"graph": "graphId", "original_graph": "originalGraphId", "graph_exec": "graphExecId"}
    )


def graph_nodes(report: Report, dropped: Counter[str]) -> pl.DataFrame:
    return _graph_definitions(
        report, GRAPH_NODES, {"graph_node": "graphNodeId", "original_graph_node": "originalGraphNodeId"}
    )


READERS: dict[str, Callable[[Report, Counter[str]], pl.DataFrame]] = {
    KERNEL: kernels,
    MEMCPY: memcpys,
    MEMSET: memsets,
    SYNC: syncs,
    RUNTIME: runtime,
    DRIVER: driver,
    NVTX: nvtx,
    OSRT: osrt,
    GRAPH_TRACE: graph_launches,
    GRAPHS: graphs,
    GRAPH_NODES: graph_nodes,
}
REQUIRED = {
    KERNEL: ("start", "end", "streamId"),
    MEMCPY: ("start", "end", "streamId"),
    MEMSET: ("start", "end", "streamId"),
    SYNC: ("start", "end", "streamId"),
    RUNTIME: ("start", "end", "globalTid"),
    DRIVER: ("start", "end", "globalTid"),
    NVTX: ("start",),
    OSRT: ("start", "end", "globalTid"),
    GRAPH_TRACE: ("start", "end", "streamId"),
    GRAPHS: ("start", "end", "globalTid"),
    GRAPH_NODES: ("start", "end", "globalTid"),
}
"""Columns without which a table cannot be placed on a timeline."""


def frames(report: Report, dropped: Counter[str], warnings: list[str]) -> tuple[list[pl.DataFrame], list[str]]:
    """One frame per table present; and the tables read."""
    out, read = [], []
    for table in TABLES:
        if table not in report.tables:
            continue
        lacking = [col for col in REQUIRED[table] if col not in report.columns(table)]
        if lacking:
            warnings.append(
                f"{report.path}: table {table} lacks {', '.join(lacking)} (an nsys version di has not seen): skipped"
            )
            continue
        out.append(READERS[table](report, dropped))
        read.append(table)
    return out, read
