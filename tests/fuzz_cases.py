"""Fuzz inputs for every reader, and the contract each one is checked against.

A *corpus* holds the seed traces of each reader: small real traces from
``../shared/data`` when present, and always traces di's own writers build (the
demo Kineto job, and it saved as ``.pftrace``, ``.otf2`` and ``.di``). One
input is ``(reader, case seed)``: :func:`write_case` picks a seed trace and
mutations with ``random.Random(case seed)`` and writes the damaged copy, so a
case seed reproduces an input exactly (``python bench/fuzz.py --reader R
--replay SEED``).

The contract (:func:`check`): ``di.load`` returns a trace that validates, or
raises a :class:`di.errors.DIError` (or FileNotFoundError) whose one-line
message names the input; anything else is a failure, reported with the
exception type and the innermost frame inside the ``di`` package.
"""

from __future__ import annotations

import gzip
import json
import random
import os
import shutil
import subprocess
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests import fuzz_mutators as M

READERS = ("kineto", "chrome", "perfetto", "otf2", "di", "nsys", "log", "slurm_json")
SHARED_KINETO = (
    "hta_cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz",
    "hta_critical_path/cuda_event_sync/event_sync_trace.json.gz",
    "hta_triton_example/triton_example.json.gz",
    "hta_amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz",
    "hta_large_integer_trace/rank-70.Mar_25_20_48_12.2861.pt.trace.json.gz",
    "hta_call_stack/backward_thread.json",
)
SHARED_OTF2 = (
    "casita_4_mpi_ls_barr",
    "pipit_ping-pong-otf2",
    "pipit_ping-pong-otf2-papi",
    "casita_1_ocl_deps",
    "casita_1_scorep-ompt-host-nested",
)


@dataclass
class Seed:
    """A seed trace: its files by path relative to the case directory, and the path di.load opens."""

    name: str
    files: dict[str, bytes]
    entry: str
    gz: bool = False  # chrome: the JSON text is kept plain and gzipped when written
    cache: dict[str, Any] = field(default_factory=dict)


# ---------------------------------------------------------------- corpus


def _plain_chrome() -> dict[str, Any]:
    """A Chrome Trace Event document (not Kineto) using every phase di reads."""
    ev: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "browser"}},
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 2, "args": {"name": "main"}},
        {"ph": "M", "name": "thread_sort_index", "pid": 1, "tid": 2, "args": {"sort_index": 1}},
        {"ph": "B", "name": "outer", "cat": "app", "pid": 1, "tid": 2, "ts": 10, "args": {"k": "v"}},
        {"ph": "X", "name": "inner", "cat": "app", "pid": 1, "tid": 2, "ts": 12, "dur": 3.5, "tts": 4},
        {"ph": "i", "name": "mark", "s": "t", "pid": 1, "tid": 2, "ts": 13},
        {"ph": "I", "name": "gmark", "s": "g", "pid": 1, "tid": 2, "ts": 14},
        {"ph": "E", "pid": 1, "tid": 2, "ts": 20, "args": {"ret": 1}},
        {"ph": "C", "name": "memory", "pid": 1, "ts": 11, "args": {"used": 100, "free": 5.5}},
        {"ph": "C", "name": "memory", "pid": 1, "ts": 19, "id": 3, "args": {"used": 80}},
        {"ph": "s", "name": "flow", "cat": "f", "id": 7, "pid": 1, "tid": 2, "ts": 12},
        {"ph": "t", "name": "flow", "cat": "f", "id": 7, "pid": 1, "tid": 3, "ts": 31},
        {"ph": "f", "bp": "e", "name": "flow", "cat": "f", "id": 7, "pid": 1, "tid": 3, "ts": 32},
        {"ph": "X", "name": "worker", "pid": 1, "tid": 3, "ts": 30, "dur": 10},
        {"ph": "b", "name": "request", "cat": "net", "id": "0x10", "pid": 1, "ts": 15},
        {"ph": "n", "name": "progress", "cat": "net", "id": "0x10", "pid": 1, "ts": 16},
        {"ph": "e", "name": "request", "cat": "net", "id": "0x10", "pid": 1, "ts": 25},
        {"ph": "b", "name": "load", "cat": "io", "id2": {"local": "0x1"}, "pid": 1, "tid": 2, "ts": 15},
        {"ph": "e", "name": "load", "cat": "io", "id2": {"local": "0x1"}, "pid": 1, "tid": 2, "ts": 18},
        {"ph": "X", "name": "gpu", "pid": "GPU 0", "tid": "stream 7", "ts": 21, "dur": 2},
        {"ph": "X", "name": "bound", "pid": 2, "tid": 2, "ts": 40, "dur": 2, "bind_id": 5, "flow_out": True},
        {"ph": "X", "name": "bound2", "pid": 2, "tid": 2, "ts": 43, "dur": 2, "bind_id": 5, "flow_in": True},
        {"ph": "O", "name": "obj", "id": "0x1", "pid": 1, "ts": 17, "args": {"snapshot": {}}},
    ]
    return {"traceEvents": ev, "displayTimeUnit": "ns", "otherData": {"version": "x"}}


def build_corpus(root: Path, shared: Path | None) -> Path:
    """Write every reader's seed traces under ``root/<reader>/<seed>/`` and return ``root``.

    ``shared`` is ``../shared/data`` (None or absent: only di-built seeds).
    """
    import di
    from di.demo import write_kineto_job

    root.mkdir(parents=True, exist_ok=True)
    work = root / "_build"
    paths = write_kineto_job(work / "demo", ranks=2, steps=2, ops_per_step=4)
    demo = di.load(paths[0])
    _put(root / "kineto" / "demo", {paths[0].name: paths[0].read_bytes()})
    _put(root / "chrome" / "plain", {"plain.json": json.dumps(_plain_chrome()).encode()})
    _put(root / "chrome" / "array", {"array.json": json.dumps(_plain_chrome()["traceEvents"]).encode()})
    di.save(demo, work / "di_written.json")
    _put(root / "chrome" / "di_written", {"di_written.json": (work / "di_written.json").read_bytes()})
    job = di.load(work / "demo")
    for name, trace in (("demo", demo), ("job", job)):
        di.save(trace, work / f"{name}.pftrace")
        _put(root / "perfetto" / name, {f"{name}.pftrace": (work / f"{name}.pftrace").read_bytes()})
        di.save(trace, work / f"{name}.di")
        _put(root / "di" / name, _tree(work / f"{name}.di", f"{name}.di"))
    di.save(demo, work / "otf2" / "demo.otf2")
    _put(root / "otf2" / "demo", _tree(work / "otf2", ""))
    from tests import nsys_fuzz

    nsys_fuzz.write_seeds(root / "nsys", shared)
    from tests import log_fuzz

    log_fuzz.write_seeds(root / "log", shared)
    from tests.test_logs_slurm_json import sacct41, squeue

    _put(root / "slurm_json" / "sacct", {"sacct.json": json.dumps(sacct41(), indent=2).encode()})
    _put(root / "slurm_json" / "squeue", {"squeue.json": json.dumps(squeue(), indent=2).encode()})
    foreign = _foreign_perfetto()
    if foreign:
        _put(root / "perfetto" / "foreign", {"sdk.pftrace": foreign})
    if shared is not None and shared.is_dir():
        for rel in SHARED_KINETO:
            src = shared / "kineto" / rel
            if src.exists():
                _put(root / "kineto" / src.parent.name, {src.name: src.read_bytes()})
        for name in SHARED_OTF2:
            src = shared / "otf2" / name
            if (src / "traces.otf2").exists():
                archive = {
                    k: v for k, v in _tree(src, "").items() if k == "traces.otf2" or k.endswith((".def", ".evt"))
                }
                _put(root / "otf2" / name, archive)
                if name == "casita_4_mpi_ls_barr":
                    otf2_trace = di.load(src / "traces.otf2")
                    di.save(otf2_trace, work / "otf2.di")
                    _put(root / "di" / "otf2", _tree(work / "otf2.di", "otf2.di"))
    shutil.rmtree(work)
    return root


def _foreign_perfetto() -> bytes | None:
    """The Perfetto-SDK-shaped trace of the Perfetto reader tests, when the perfetto package is installed."""
    try:
        from tests.test_perfetto_reader import _foreign_trace

        return _foreign_trace()
    except BaseException:  # pytest.importorskip raises Skipped (a BaseException) without the package
        return None


def _tree(folder: Path, prefix: str) -> dict[str, bytes]:
    return {
        str(Path(prefix) / p.relative_to(folder)) if prefix else str(p.relative_to(folder)): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def _put(folder: Path, files: dict[str, bytes]) -> None:
    for rel, data in files.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_bytes(data)


def load_corpus(root: Path) -> dict[str, list[Seed]]:
    """The seeds :func:`build_corpus` wrote, by reader."""
    corpus: dict[str, list[Seed]] = {}
    for reader in READERS:
        seeds = []
        folders = (root / reader).iterdir() if (root / reader).is_dir() else ()  # log: none without shared data
        for folder in sorted(p for p in folders if p.is_dir()):
            files = _tree(folder, "")
            entry = _entry(reader, files)
            gz = entry.endswith(".gz")
            if gz:
                files = {entry[:-3]: gzip.decompress(files[entry])}
                entry = entry[:-3]
            seeds.append(Seed(f"{reader}/{folder.name}", files, entry, gz=gz))
        corpus[reader] = seeds
    return corpus


def _entry(reader: str, files: dict[str, bytes]) -> str:
    if reader == "otf2":
        return next(k for k in files if k.endswith(".otf2") and "/" not in k)
    if reader == "di":
        return next(k.split("/")[0] for k in files)
    return next(iter(files))


# ---------------------------------------------------------------- one input


def write_case(corpus: dict[str, list[Seed]], reader: str, case_seed: int, folder: Path) -> Path:
    """Write the input of ``case_seed`` for ``reader`` into the empty ``folder``; returns what di.load opens."""
    rng = random.Random(f"{reader}:{case_seed}")
    seeds = corpus[reader]
    seed = rng.choice(seeds)
    donor = rng.choice(seeds)
    files = dict(seed.files)
    from tests import log_fuzz, nsys_fuzz

    entry = {
        "kineto": _chrome,
        "chrome": _chrome,
        "perfetto": _perfetto,
        "otf2": _otf2,
        "di": _store,
        "nsys": nsys_fuzz.mutate,
        "log": log_fuzz.mutate,
        "slurm_json": _chrome,  # a JSON document: the same structural and byte mutations
    }[reader](rng, seed, donor, files)
    _put(folder, files)
    return folder / entry


def _chrome(rng: random.Random, seed: Seed, donor: Seed, files: dict[str, bytes]) -> str:
    text, other = files[seed.entry], donor.files[donor.entry]
    doc = seed.cache.get("doc") or seed.cache.setdefault("doc", M.JsonDoc.parse(text))
    pick = rng.random()
    if pick < 0.55:
        text = doc.mutated(rng)
    elif pick < 0.85:
        text = M.mutate_bytes(rng, text, other)
    else:
        text = M.mutate_bytes(rng, doc.mutated(rng), other)
    entry = seed.entry
    if seed.gz or rng.random() < 0.1:
        entry = seed.entry + ".gz"
        text = gzip.compress(text, compresslevel=1, mtime=0)
        if rng.random() < 0.15:  # damage the gzip stream itself
            text = M.mutate_bytes(rng, text)
        files.pop(seed.entry)
    files[entry] = text
    return entry


def _perfetto(rng: random.Random, seed: Seed, donor: Seed, files: dict[str, bytes]) -> str:
    data = files[seed.entry]
    packets = seed.cache.get("packets") or seed.cache.setdefault("packets", M.split_packets(data))
    pick = rng.random()
    if pick < 0.6:
        data = M.mutate_protobuf(rng, packets)
    elif pick < 0.85:
        data = M.mutate_bytes(rng, data, donor.files[donor.entry])
    else:
        data = M.mutate_bytes(rng, M.mutate_protobuf(rng, packets))
    if rng.random() < 0.1:
        data = gzip.compress(data, compresslevel=1, mtime=0)
    files[seed.entry] = data
    return seed.entry


def _otf2(rng: random.Random, seed: Seed, donor: Seed, files: dict[str, bytes]) -> str:
    """Corrupt bytes in the anchor, the global or local definitions and the event files; remove or swap files."""
    names = sorted(files)
    kinds = {
        "anchor": [seed.entry],
        "global": [n for n in names if n.endswith(".def") and "/" not in n],
        "local": [n for n in names if n.endswith(".def") and "/" in n],
        "events": [n for n in names if n.endswith(".evt")],
    }
    donors = [v for k, v in sorted(donor.files.items()) if k.endswith((".def", ".evt"))]
    for _ in range(rng.randint(1, 3)):
        kind = rng.choices(("anchor", "global", "local", "events"), (2, 3, 1, 4))[0]
        if not kinds[kind]:
            continue
        name = rng.choice(kinds[kind])
        pick = rng.random()
        if pick < 0.06 and kind != "anchor":
            files.pop(name, None)  # a missing file
        elif pick < 0.1:
            files[name] = b""
        elif pick < 0.14 and len(kinds[kind]) > 1:
            other = rng.choice(kinds[kind])
            files[name], files[other] = files.get(other, b""), files.get(name, b"")
        elif name in files:
            files[name] = M.mutate_bytes(rng, files[name], rng.choice(donors) if donors else None)
    return seed.entry


META_KEYS = (
    "format",
    "schema_version",
    "di_version",
    "clock",
    "sources",
    "warnings",
    "hosts",
    "tables",
    "ranks",
    "time_range",
    "command",
    "capture",
)
VERSIONS = (0, 2, 99, -1, "1", 1.0, None, True, 2**70, [1], {"v": 1})


def _store(rng: random.Random, seed: Seed, donor: Seed, files: dict[str, bytes]) -> str:
    """meta.json edits (wrong types, missing keys, another schema version); Parquet corrupt, truncated,
    missing, or valid Parquet of the wrong shape."""
    store = seed.entry
    tables = sorted(n for n in files if n.endswith(".parquet"))
    for _ in range(rng.randint(1, 2)):
        pick = rng.random()
        if pick < 0.45:
            files[f"{store}/meta.json"] = _meta_edit(rng, files[f"{store}/meta.json"])
        elif pick < 0.55:
            files[f"{store}/meta.json"] = M.mutate_bytes(rng, files[f"{store}/meta.json"])
        elif pick < 0.75:
            name = rng.choice(tables)
            files[name] = M.mutate_bytes(rng, files[name]) if name in files else b""
        elif pick < 0.8:
            files.pop(rng.choice(tables), None)
        else:
            name = rng.choice(tables)
            if name in files:
                files[name] = _parquet_edit(rng, files[name], files, tables)
    return store


def _meta_edit(rng: random.Random, text: bytes) -> bytes:
    try:
        meta = json.loads(text)
    except (ValueError, RecursionError):  # broken, or nested deep by an earlier mutation
        return M.mutate_bytes(rng, text)
    if not isinstance(meta, dict):
        return M.mutate_bytes(rng, text)
    key = rng.choice(META_KEYS)
    pick = rng.random()
    if pick < 0.25:
        meta["schema_version"] = rng.choice(VERSIONS)
    elif pick < 0.45:
        meta.pop(key, None)
    elif pick < 0.75 and isinstance(meta.get(key), (dict, list)) and meta[key]:
        inner = meta[key]
        if isinstance(inner, list):
            i = rng.randrange(len(inner))
            if isinstance(inner[i], dict) and inner[i] and rng.random() < 0.7:
                item = dict(inner[i])
                item[rng.choice(tuple(item))] = M.weird_value(rng)
                inner[i] = item
            else:
                inner[i] = M.weird_value(rng)
        else:
            inner[rng.choice(tuple(inner))] = M.weird_value(rng)
    else:
        meta[key] = M.weird_value(rng)
    return M.dumps(meta).encode()


def _parquet_edit(rng: random.Random, data: bytes, files: dict[str, bytes], tables: list[str]) -> bytes:
    """Valid Parquet that does not fit: another table's file, a column dropped, retyped, nulled or made negative, rows shuffled."""
    import io

    import polars as pl

    pick = rng.random()
    if pick < 0.15:
        other = rng.choice(tables)
        return files.get(other, data)
    try:
        df = pl.read_parquet(io.BytesIO(data))
    except (Exception, pl.exceptions.PanicException):  # noqa: BLE001  corrupted by an earlier mutation
        return data
    if not df.width:
        return data
    col = rng.choice(df.columns)
    if pick < 0.3:
        df = df.drop(col)
    elif pick < 0.45:
        df = df.with_columns(pl.col(col).cast(pl.String))
    elif pick < 0.6:
        df = df.with_columns(pl.lit(None).alias(col))
    elif pick < 0.75 and df.schema[col].is_integer():
        df = df.with_columns((-pl.col(col).cast(pl.Int64) - rng.choice((1, 2**40))).alias(col))
    elif pick < 0.85:
        df = df.sample(fraction=1.0, shuffle=True, seed=rng.randrange(2**32))
    else:
        df = df.with_columns(pl.lit(rng.choice((2**31, -(2**62), 0.5, "x", True))).alias(col))
    out = io.BytesIO()
    df.write_parquet(out)
    return out.getvalue()


# ---------------------------------------------------------------- the contract


OK, WARNED, ERROR, FAILURE = "clean", "warnings", "error", "failure"


@dataclass
class Outcome:
    kind: str  # clean, warnings, error, failure
    key: str = ""  # failures: exception type and innermost di frame (deduplication key)
    message: str = ""


def innermost_di_frame(exc: BaseException) -> str:
    """``di/path.py:LINE in function`` of the innermost traceback frame inside the di package."""
    import di

    root = Path(di.__file__).resolve().parent
    where = "(no di frame)"
    for frame in traceback.extract_tb(exc.__traceback__):
        path = Path(frame.filename).resolve()
        if path.is_relative_to(root):
            where = f"di/{path.relative_to(root).as_posix()}:{frame.lineno} in {frame.name}"
    return where


def check(path: Path, case_dir: Path) -> Outcome:
    """Load ``path`` and check the contract (see the module docstring)."""
    import di
    from di.errors import DIError, SchemaError

    try:
        trace = di.load(path)
    except (DIError, FileNotFoundError) as exc:
        text = str(exc)
        if case_dir.name not in text:
            return Outcome(
                FAILURE, f"{type(exc).__name__} not naming the file at {innermost_di_frame(exc)}", text[:300]
            )
        if "\n" in text.strip():
            return Outcome(FAILURE, f"{type(exc).__name__} of several lines at {innermost_di_frame(exc)}", text[:300])
        return Outcome(ERROR, type(exc).__name__, text[:300])
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # noqa: BLE001  anything else is the bug this looks for (polars panics are BaseExceptions)
        return Outcome(FAILURE, f"{type(exc).__name__} at {innermost_di_frame(exc)}", str(exc)[:300])
    try:
        trace.validate()
    except SchemaError as exc:
        return Outcome(FAILURE, "invalid trace: " + _shape(str(exc)), str(exc)[:300])
    except Exception as exc:  # noqa: BLE001
        return Outcome(FAILURE, f"validate raised {type(exc).__name__} at {innermost_di_frame(exc)}", str(exc)[:300])
    dropped = any(s.get("dropped") for s in trace.meta.get("sources", []) if isinstance(s, dict))
    return Outcome(WARNED if trace.meta.get("warnings") or dropped else OK)


def _shape(message: str) -> str:
    """A message with its numbers replaced, so that failures of one kind deduplicate."""
    import re

    return re.sub(r"\d+", "N", message)[:160]


CLI_TIMEOUT_S = 120


def cli_command(path: Path, repo: Path) -> tuple[list[str], dict[str, str]]:
    """argv and environment of ``python -m di info PATH`` with ``repo`` importable."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(repo), os.environ.get("PYTHONPATH")]))}
    return [sys.executable, "-m", "di", "info", str(path)], env


def cli_verdict(returncode: int, stdout: str, stderr: str) -> str | None:
    """None when ``di info`` behaved (exit 0, or 2 with one ``di info: error:`` line on stderr), else what went wrong."""
    lines = stderr.strip().splitlines()
    if "Traceback" in stdout + stderr:
        return f"exit {returncode} with a traceback: {lines[-1] if lines else ''}"
    if returncode == 0:
        return None
    if returncode != 2:
        return f"exit code {returncode}"
    if len(lines) != 1 or not lines[0].startswith("di info: error:"):
        return f"exit 2 with {len(lines)} stderr lines: {lines[0][:80] if lines else ''}"
    return None


def cli_problem(path: Path, repo: Path) -> str | None:
    """Run ``python -m di info PATH``; :func:`cli_verdict` of it."""
    argv, env = cli_command(path, repo)
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=CLI_TIMEOUT_S, env=env, cwd=repo)
    except subprocess.TimeoutExpired:
        return f"di info ran over {CLI_TIMEOUT_S} s"
    return cli_verdict(proc.returncode, proc.stdout, proc.stderr)
