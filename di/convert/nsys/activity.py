"""Nsight Systems tables -> event rows (one polars frame per table, common columns).

| table | cat | timeline |
| --- | --- | --- |
| CUPTI_ACTIVITY_KIND_KERNEL | kernel (NCCL kernels: nccl) | GPU stream |
| CUPTI_ACTIVITY_KIND_MEMCPY | memcpy, bytes, copy kind in the name and args | GPU stream |
| CUPTI_ACTIVITY_KIND_MEMSET | memset, bytes | GPU stream |
| CUPTI_ACTIVITY_KIND_SYNCHRONIZATION | sync (Kineto's names: Event Sync, Stream Sync, ...) | GPU stream (-1: device-wide) |
| CUPTI_ACTIVITY_KIND_RUNTIME / _DRIVER | cuda_api (synchronising calls: sync) | CPU thread |
| NVTX_EVENTS push/pop, start/end, marks | user, step (ProfilerStep#N, "step N", ...), nccl (domain NCCL) | CPU thread; start/end ranges an async track per process and domain |
| OSRT_API | io (file and socket calls), else other | CPU thread |

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

from di.convert.chrome.kineto import COMM_KERNEL, SYNC_API
from di.convert.nsys.report import Report, pid_of, tid_of

__all__ = ["TABLES", "KERNEL", "frames"]

KERNEL, MEMCPY, MEMSET, SYNC = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
                               "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION")
RUNTIME, DRIVER, NVTX, OSRT = "CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_DRIVER", "NVTX_EVENTS", "OSRT_API"

# CUPTI enums (cupti_activity.h; the export's ENUM_CUDA_MEMCPY_OPER, ENUM_CUDA_MEM_KIND, ENUM_CUPTI_SYNC_TYPE hold the same)
COPY_KINDS = {0: "Unknown", 1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA", 6: "AtoD", 7: "DtoA", 8: "DtoD", 9: "HtoH",
              10: "PtoP", 11: "UVM HtoD", 12: "UVM DtoH", 13: "UVM DtoD"}
MEM_KINDS = {0: "Pageable", 1: "Pinned", 2: "Device", 3: "Array", 4: "Managed", 5: "Device Static", 6: "Managed Static",
             7: "Unknown"}
SYNC_TYPES = {0: "Unknown Sync", 1: "Event Sync", 2: "Stream Wait Event", 3: "Stream Sync", 4: "Context Sync"}
EVENT_CLASS_DRIVER = 1
"""ENUM_NSYS_EVENT_CLASS: TRACE_PROCESS_EVENT_CUDA_DRIVER (0 is the runtime)."""
NVTX_MARK, NVTX_PUSHPOP, NVTX_STARTEND, NVTX_DOMAIN = 34, 59, 60, 75
"""ENUM_NSYS_EVENT_TYPE: NvtxMark, NvtxPushPopRange, NvtxStartEndRange, NvtxDomainCreate."""
NO_STREAM = 0xFFFFFFFF
"""streamId of a device-wide record (CUPTI's CUPTI_SYNCHRONIZATION_INVALID_VALUE); stored as stream -1, as Kineto does."""

IO_CALLS = (r"^(open|open64|openat|openat64|creat|close|read|pread|pread64|readv|preadv|write|pwrite|pwrite64|writev|pwritev|"
            r"lseek|lseek64|fsync|fdatasync|sync_file_range|fopen|fopen64|fdopen|freopen|fclose|fread|fwrite|fflush|fgets|fputs|"
            r"fseek|ftell|getc|putc|fgetc|fputc|unlink|rename|stat|fstat|lstat|mkdir|rmdir|socket|bind|connect|accept|accept4|"
            r"listen|send|sendto|sendmsg|recv|recvfrom|recvmsg|shutdown|aio_read|aio_write)$")
STEP_TEXT = r"(?i)^(ProfilerStep#\d+|(train[ _-]?)?(step|iteration|iter)[ #_:-]*\d+)$"
API_VERSION = r"_v\d+$"

TABLES = (KERNEL, MEMCPY, MEMSET, SYNC, RUNTIME, DRIVER, NVTX, OSRT)


def _json_args(fields: dict[str, pl.Series | np.ndarray]) -> pl.Series:
    """One JSON object text per row from named columns (a null value is written as null)."""
    df = pl.DataFrame([pl.Series(k, v) for k, v in fields.items()])
    return df.select(pl.struct(pl.all()).struct.json_encode().alias("args")).to_series()


def _base(n: int, **cols: object) -> dict[str, object]:
    out: dict[str, object] = {"pid": None, "tid": None, "device": None, "stream": None, "corr": None, "bytes": None,
                              "instant": np.zeros(n, np.bool_), "domain": None}
    out.update(cols)
    return out


def _frame(n: int, cols: dict[str, object]) -> pl.DataFrame:
    schema = {"kind": pl.String, "pid": pl.Int64, "tid": pl.Int64, "device": pl.Int32, "stream": pl.Int64, "start_ns": pl.Int64,
              "end_ns": pl.Int64, "name": pl.String, "src_cat": pl.String, "cat": pl.String, "corr": pl.Int64, "bytes": pl.Int64,
              "instant": pl.Boolean, "args": pl.String, "domain": pl.String}
    series = []
    for k, dtype in schema.items():
        v = cols.get(k)
        if v is None:
            series.append(pl.Series(k, [None] * n, dtype=dtype))
        elif isinstance(v, str):
            series.append(pl.Series(k, [v], dtype=dtype).extend_constant(v, n - 1) if n else pl.Series(k, [], dtype=dtype))
        else:
            series.append(pl.Series(k, v).cast(dtype))
    return pl.DataFrame(series)


def _nullable(c: dict[str, np.ndarray], key: str) -> pl.Series:
    return pl.Series(c[key]).set(pl.Series(c[key + "_null"]), None) if c[key + "_null"].any() else pl.Series(c[key])


def _gpu(report: Report, table: str, extra: dict[str, str | None]) -> dict[str, np.ndarray]:
    return report.ints(table, {"start": "start", "end": "end", "device": "deviceId", "stream": "streamId",
                               "corr": "correlationId", "gpid": "globalPid", **extra})


def _gpu_cols(c: dict[str, np.ndarray]) -> dict[str, object]:
    stream = np.where(c["stream"] == NO_STREAM, -1, c["stream"])
    return {"kind": "gpu_stream", "pid": pid_of(c["gpid"]), "tid": None, "device": c["device"], "stream": stream,
            "start_ns": c["start"], "end_ns": c["end"], "corr": _nullable(c, "corr")}


def kernels(report: Report, dropped: Counter[str]) -> pl.DataFrame:
    c = _gpu(report, KERNEL, {"demangled": "demangledName", "short": "shortName", "gx": "gridX", "gy": "gridY", "gz": "gridZ",
                              "bx": "blockX", "by": "blockY", "bz": "blockZ", "regs": "registersPerThread",
                              "smem": "staticSharedMemory", "dmem": "dynamicSharedMemory", "graph_node": "graphNodeId",
                              "graph": "graphId"})
    n = c["start"].size
    name = report.text(c["demangled"], c["demangled_null"])
    short = report.text(c["short"], c["short_null"])
    name = name.fill_null(short).fill_null("")
    args = _json_args({
        "short_name": short, "grid": _triple(c, "gx", "gy", "gz"),
        "block": _triple(c, "bx", "by", "bz"), "registers per thread": _nullable(c, "regs"),
        "shared memory": pl.Series(c["smem"] + c["dmem"]).set(pl.Series(c["smem_null"] & c["dmem_null"]), None),
        "graph node": _nullable(c, "graph_node"), "graph": _nullable(c, "graph"),
    })
    cat = pl.Series(name).str.contains(COMM_KERNEL).replace_strict({True: "nccl", False: "kernel"}, return_dtype=pl.String)
    return _frame(n, _base(n, **_gpu_cols(c), name=name, src_cat="kernel", cat=cat, args=args))


def _triple(c: dict[str, np.ndarray], a: str, b: str, z: str) -> pl.Series:
    """[x, y, z] lists, null where x is."""
    s = pl.DataFrame({"a": c[a], "b": c[b], "z": c[z]}).select(pl.concat_list("a", "b", "z")).to_series()
    return s.set(pl.Series(c[a + "_null"]), None) if c[a + "_null"].any() else s


def memcpys(report: Report, dropped: Counter[str]) -> pl.DataFrame:
    c = _gpu(report, MEMCPY, {"bytes": "bytes", "kind": "copyKind", "src": "srcKind", "dst": "dstKind"})
    n = c["start"].size
    kind = pl.Series(c["kind"]).replace_strict(COPY_KINDS, default="Unknown", return_dtype=pl.String)
    src = pl.Series(c["src"]).replace_strict(MEM_KINDS, default="Unknown", return_dtype=pl.String).set(pl.Series(c["src_null"]), None)
    dst = pl.Series(c["dst"]).replace_strict(MEM_KINDS, default="Unknown", return_dtype=pl.String).set(pl.Series(c["dst_null"]), None)
    df = pl.DataFrame({"k": kind, "s": src, "d": dst})
    name = df.select(pl.when(pl.col("s").is_not_null() & pl.col("d").is_not_null())
                     .then(pl.format("Memcpy {} ({} -> {})", "k", "s", "d")).otherwise(pl.format("Memcpy {}", "k"))).to_series()
    args = _json_args({"copy kind": kind, "src kind": src, "dst kind": dst})
    return _frame(n, _base(n, **_gpu_cols(c), name=name, src_cat="gpu_memcpy", cat="memcpy", bytes=c["bytes"], args=args))


def memsets(report: Report, dropped: Counter[str]) -> pl.DataFrame:
    c = _gpu(report, MEMSET, {"bytes": "bytes", "value": "value", "mem": "memKind"})
    n = c["start"].size
    mem = pl.Series(c["mem"]).replace_strict(MEM_KINDS, default="Unknown", return_dtype=pl.String).set(pl.Series(c["mem_null"]), None)
    name = pl.DataFrame({"m": mem}).select(pl.when(pl.col("m").is_not_null()).then(pl.format("Memset ({})", "m"))
                                           .otherwise(pl.lit("Memset"))).to_series()
    args = _json_args({"value": _nullable(c, "value"), "mem kind": mem})
    return _frame(n, _base(n, **_gpu_cols(c), name=name, src_cat="gpu_memset", cat="memset", bytes=c["bytes"], args=args))


def syncs(report: Report, dropped: Counter[str]) -> pl.DataFrame:
    c = _gpu(report, SYNC, {"type": "syncType", "event": "eventId"})
    n = c["start"].size
    name = pl.Series(c["type"]).replace_strict(SYNC_TYPES, default="Unknown Sync", return_dtype=pl.String)
    event = pl.Series(c["event"]).set(pl.Series(c["event_null"] | (c["event"] == NO_STREAM)), None)
    args = _json_args({"cuda_sync_kind": name, "event": event})
    return _frame(n, _base(n, **_gpu_cols(c), name=name, src_cat="cuda_sync", cat="sync", args=args))


def _thread(c: dict[str, np.ndarray]) -> dict[str, object]:
    return {"kind": "cpu_thread", "pid": pid_of(c["gtid"]), "tid": tid_of(c["gtid"]), "start_ns": c["start"], "end_ns": c["end"]}


def _api(report: Report, table: str, dropped: Counter[str]) -> pl.DataFrame:
    c = report.ints(table, {"start": "start", "end": "end", "gtid": "globalTid", "corr": "correlationId", "name": "nameId",
                            "ret": "returnValue", "cls": "eventClass"})
    n = c["start"].size
    raw = report.text(c["name"], c["name_null"]).fill_null("")
    name = raw.str.replace(API_VERSION, "")
    driver = (c["cls"] == EVENT_CLASS_DRIVER) & ~c["cls_null"] if table == RUNTIME else np.ones(n, np.bool_)
    src_cat = pl.Series(driver).replace_strict({True: "cuda_driver", False: "cuda_runtime"}, return_dtype=pl.String)
    cat = name.str.contains(SYNC_API).replace_strict({True: "sync", False: "cuda_api"}, return_dtype=pl.String)
    args = _json_args({"function": raw, "return value": _nullable(c, "ret")})
    return _frame(n, _base(n, **_thread(c), name=name, src_cat=src_cat, cat=cat, corr=_nullable(c, "corr"), args=args))


def runtime(report: Report, dropped: Counter[str]) -> pl.DataFrame:
    return _api(report, RUNTIME, dropped)


def driver(report: Report, dropped: Counter[str]) -> pl.DataFrame:
    return _api(report, DRIVER, dropped)


def osrt(report: Report, dropped: Counter[str]) -> pl.DataFrame:
    c = report.ints(OSRT, {"start": "start", "end": "end", "gtid": "globalTid", "name": "nameId", "ret": "returnValue",
                           "nest": "nestingLevel"})
    n = c["start"].size
    name = report.text(c["name"], c["name_null"]).fill_null("")
    cat = name.str.contains(IO_CALLS).replace_strict({True: "io", False: "other"}, return_dtype=pl.String)
    args = _json_args({"return value": _nullable(c, "ret")})
    return _frame(n, _base(n, **_thread(c), name=name, src_cat="osrt", cat=cat, args=args))


def nvtx(report: Report, dropped: Counter[str]) -> pl.DataFrame:
    """Push/pop ranges on their thread, start/end ranges on an async track per (process, domain), marks as instants."""
    c = report.ints(NVTX, {"start": "start", "end": "end", "type": "eventType", "gtid": "globalTid", "text_id": "textId",
                           "domain": "domainId", "range": "rangeId", "category": "category"})
    has_text = "text" in report.columns(NVTX)
    inline = pl.Series([r[0] for r in report.con.execute(f'SELECT text FROM "{NVTX}"')], dtype=pl.String) if has_text \
        else pl.Series([None] * c["start"].size, dtype=pl.String)
    text = inline.fill_null(report.text(c["text_id"], c["text_id_null"]))
    dom = c["domain"]
    is_domain = c["type"] == NVTX_DOMAIN
    names = pl.DataFrame({"id": dom[is_domain], "d": text.filter(pl.Series(is_domain))}).unique("id", keep="last")
    domain = pl.DataFrame({"id": dom}).join(names, on="id", how="left", maintain_order="left").get_column("d")
    domain = domain.set(pl.Series(c["domain_null"] | (dom == 0)), None)
    t = c["type"]
    mark, pushpop, startend = t == NVTX_MARK, t == NVTX_PUSHPOP, t == NVTX_STARTEND
    ranges = pushpop | startend
    open_end = ranges & c["end_null"]
    if open_end.any():
        dropped["NVTX ranges without an end"] += int(open_end.sum())
    other = ~(mark | ranges | is_domain)
    if other.any():
        dropped["NVTX records that are not ranges or marks (categories, names)"] += int(other.sum())
    keep = (mark | ranges) & ~open_end
    end = np.where(mark, c["start"], c["end"])
    cat = pl.DataFrame({"t": text.fill_null(""), "d": domain}).select(
        pl.when(pl.col("d") == "NCCL").then(pl.lit("nccl")).when(pl.col("t").str.contains(STEP_TEXT)).then(pl.lit("step"))
        .otherwise(pl.lit("user"))).to_series()
    args = _json_args({"domain": domain, "category": _nullable(c, "category"), "range id": _nullable(c, "range")})
    kind = np.where(startend, "async", "cpu_thread")
    frame = _frame(c["start"].size, _base(
        c["start"].size, kind=kind, pid=pid_of(c["gtid"]), tid=np.where(startend, -1, tid_of(c["gtid"])), start_ns=c["start"],
        end_ns=end, name=text.fill_null(""), src_cat="nvtx", cat=cat, instant=mark, args=args, domain=domain))
    return frame.filter(pl.Series(keep))


READERS: dict[str, Callable[[Report, Counter[str]], pl.DataFrame]] = {
    KERNEL: kernels, MEMCPY: memcpys, MEMSET: memsets, SYNC: syncs, RUNTIME: runtime, DRIVER: driver, NVTX: nvtx, OSRT: osrt,
}
REQUIRED = {KERNEL: ("start", "end", "streamId"), MEMCPY: ("start", "end", "streamId"), MEMSET: ("start", "end", "streamId"),
            SYNC: ("start", "end", "streamId"), RUNTIME: ("start", "end", "globalTid"), DRIVER: ("start", "end", "globalTid"),
            NVTX: ("start", "eventType"), OSRT: ("start", "end", "globalTid")}
"""Columns without which a table cannot be placed on a timeline."""


def frames(report: Report, dropped: Counter[str], warnings: list[str]) -> tuple[list[pl.DataFrame], list[str]]:
    """One frame per table present; and the tables read."""
    out, read = [], []
    for table in TABLES:
        if table not in report.tables:
            continue
        lacking = [col for col in REQUIRED[table] if col not in report.columns(table)]
        if lacking:
            warnings.append(f"{report.path}: table {table} lacks {', '.join(lacking)} (an nsys version di has not seen): skipped")
            continue
        out.append(READERS[table](report, dropped))
        read.append(table)
    return out, read
