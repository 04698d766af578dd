"""Slurm's JSON: ``sacct --json``, ``squeue --json``, ``scontrol show job --json`` and slurmrestd's job answers.

One document, ``{"jobs": [...], "meta": {...}, "errors": [...], "warnings": [...]}``, in the shape of Slurm's
data_parser plugin from v0.0.37 (Slurm 21.08) to v0.0.42 (24.11 and later). The versions differ in how a value is
written, which :func:`_number` and :func:`_words` read alike:

- a number is a plain integer, or ``{"set": bool, "infinite": bool, "number": n}`` (0.0.40 on);
- a state or an exit status is a string, or a list of strings (0.0.40 on);
- accounting (``sacct``, slurmdbd) nests a job's times under ``time`` (``start``, ``end``, ``elapsed``...) and its
  steps under ``steps``; the controller (``squeue``, ``scontrol``, slurmctld) writes ``start_time``, ``end_time``,
  ``job_state``, ``user_name`` on the job and has no steps.

Each job and each step is one row of the trace's ``jobs`` table, with the fields named and written as ``sacct -P``
prints them (``jobid`` as ``9682``, ``9682.batch``, an array task ``29471683_9``; ``state``; ``exitcode``
``return:signal``; ``start``/``end``/``submit`` ISO times in UTC; ``elapsed`` ``[D-]HH:MM:SS``; ``alloctres``
``cpu=2,mem=1024M,node=2,gres/gpu:h100=4``...), so a job reads the same from either output. The rows become the same
``step`` events and failure instants as the text tables' (:func:`di.convert.logs.slurm.job_events`); unlike those,
the times are the epoch seconds Slurm stored, with no time zone to guess.

A cut or damaged document keeps the jobs whole before the damage; the rest is counted in the source's ``dropped``.
Slurm's own ``errors`` (a job id it does not know) are the load's error when there is no job, else warnings.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import polars as pl

from di.convert.logs.build import Parts
from di.convert.logs.slurm import job_events, jobs_table
from di.errors import FormatError

__all__ = ["is_slurm_json", "parse_slurm_json"]

SNIFF_RE = re.compile(rb'^\s*[\{\[][\s\S]*"jobs"\s*:\s*\[')
"""A JSON document with a ``jobs`` array in its head; :func:`is_slurm_json` also wants a Slurm field."""
SLURM_KEYS = (b'"job_id"', b'"data_parser"', b'"Slurm OpenAPI', b'"job_state"')
"""Words of which a Slurm document's head holds at least one (a job's id, its ``meta.plugin``)."""
ROW_FIELDS = (
    "jobid",
    "jobidraw",
    "jobname",
    "user",
    "account",
    "partition",
    "qos",
    "cluster",
    "state",
    "reason",
    "exitcode",
    "derivedexitcode",
    "submit",
    "eligible",
    "start",
    "end",
    "elapsed",
    "elapsedraw",
    "timelimit",
    "nnodes",
    "nodelist",
    "ntasks",
    "alloccpus",
    "alloctres",
    "workdir",
)
"""The ``jobs`` columns a JSON row can give, in ``sacct``'s names and order (a column no row has is left out)."""


def is_slurm_json(head: bytes) -> bool:
    """True when a file's first bytes (gunzipped) are a Slurm JSON document (see the module docstring)."""
    return SNIFF_RE.match(head) is not None and b'"traceEvents"' not in head and any(k in head for k in SLURM_KEYS)


def parse_slurm_json(path: Path, data: bytes) -> Parts:
    """A Slurm JSON document's jobs and steps as :class:`Parts` (family ``slurm``).

    Raises:
        FormatError: the document holds no job and Slurm reported errors, or no ``jobs`` array was found.
    """
    doc, dropped = _document(path, data)
    jobs = doc.get("jobs") if isinstance(doc, dict) else None
    if not isinstance(jobs, list):
        raise FormatError(path, "Slurm JSON without a 'jobs' array")
    errors = [_error_text(e) for e in _list(doc.get("errors")) if e]
    if not jobs and errors:
        raise FormatError(path, f"Slurm reported {len(errors)} error(s) and no job: {'; '.join(errors[:3])}")
    rows: list[dict[str, str | None]] = []
    bad = 0
    for job in jobs:
        if not isinstance(job, dict) or _number(job.get("job_id")) is None:
            bad += 1
            continue
        rows.append(_job_row(job))
        rows.extend(_step_row(job, step) for step in _list(job.get("steps")) if isinstance(step, dict))
    if bad:
        dropped["jobs without a job id"] = bad
    meta = _dict(doc.get("meta"))
    info: dict[str, Any] = {"rows": len(rows), "truncated": 0, "format": "json"}
    release = _dict(meta.get("slurm") or meta.get("Slurm")).get("release")
    parser = _dict(meta.get("plugin")).get("data_parser")
    info |= {k: v for k, v in (("release", release), ("data_parser", parser)) if isinstance(v, str) and v}
    if errors:
        info["errors"] = errors
    warnings = [_error_text(w) for w in _list(doc.get("warnings")) if w]
    if warnings:
        info["warnings"] = warnings
    if not rows:
        return Parts("slurm", info={"slurm": info}, dropped=dropped)
    frame = pl.DataFrame(rows, schema={f: pl.String for f in ROW_FIELDS})
    frame = frame.select(c for c in ROW_FIELDS if frame.get_column(c).null_count() < frame.height or c == "jobid")
    events = job_events(frame, "jobid")
    kw: dict[str, Any] = {"events": events} if events.height else {}
    return Parts("slurm", info={"slurm": info}, dropped=dropped, epoch=True, tables={"jobs": jobs_table(frame)}, **kw)


def _document(path: Path, data: bytes) -> tuple[Any, dict[str, int]]:
    """The parsed document, and what was dropped: for a cut or damaged one, the jobs whole before the damage."""
    import orjson

    try:
        return orjson.loads(data), {}
    except orjson.JSONDecodeError as exc:
        damage = str(exc)
    text = data.decode("utf-8", errors="replace")
    found = re.search(r'"jobs"\s*:\s*\[', text)
    if found is None:
        raise FormatError(path, f"Slurm JSON that does not parse and has no 'jobs' array ({damage})")
    at = found.end()
    decoder = json.JSONDecoder()
    jobs: list[Any] = []
    while True:
        while at < len(text) and text[at] in " \t\r\n,":
            at += 1
        if at >= len(text) or text[at] == "]":
            break
        try:
            job, at = decoder.raw_decode(text, at)
        except (ValueError, RecursionError):
            break
        jobs.append(job)
    lost = len(text) - at
    head = text[: found.start()]
    meta = re.search(r'"meta"\s*:\s*', head)
    doc: dict[str, Any] = {"jobs": jobs}
    if meta is not None:  # a meta before the jobs (sacct prints it first) is kept when it parses
        try:
            doc["meta"] = decoder.raw_decode(head, meta.end())[0]
        except ValueError:
            pass
    return doc, {f"bytes after the last whole job (cut or damaged: {damage})": lost} if lost else {}


def _list(value: Any) -> list[Any]:
    """``value`` where it is a list, else no items (a field of another type in a damaged document)."""
    return value if isinstance(value, list) else []


def _dict(value: Any) -> dict[str, Any]:
    """``value`` where it is an object, else an empty one."""
    return value if isinstance(value, dict) else {}


def _number(value: Any) -> int | float | None:
    """A plain number, or data_parser's ``{"set", "infinite", "number"}`` (None when not set or infinite)."""
    if isinstance(value, dict):
        if not value.get("set", True) or value.get("infinite"):
            return None
        value = value.get("number")
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _words(value: Any) -> str | None:
    """A state or status: a string, or a list of strings joined by spaces (``RUNNING COMPLETING``)."""
    if isinstance(value, list):
        value = " ".join(str(v) for v in value if v)
    return str(value) if value not in (None, "") else None


def _text(value: Any) -> str | None:
    return str(value) if isinstance(value, (str, int, float)) and value != "" else None


def _iso(value: Any) -> str | None:
    """Epoch seconds as sacct prints a time (``2026-06-01T10:15:56``, here UTC); 0 (not yet) is None."""
    seconds = _number(value)
    if not seconds or seconds < 0:
        return None
    try:
        return datetime.fromtimestamp(seconds, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    except (OverflowError, OSError, ValueError):
        return None


def _duration(seconds: int | float | None) -> str | None:
    """Seconds as sacct prints a duration: ``[D-]HH:MM:SS``."""
    if seconds is None or seconds < 0:
        return None
    days, rest = divmod(int(seconds), 86400)
    hours, rest = divmod(rest, 3600)
    text = f"{hours:02d}:{rest // 60:02d}:{rest % 60:02d}"
    return f"{days}-{text}" if days else text


def _limit(value: Any) -> str | None:
    """A time limit in minutes as sacct prints it (``UNLIMITED`` when infinite)."""
    if isinstance(value, dict) and value.get("infinite"):
        return "UNLIMITED"
    minutes = _number(value)
    return _duration(minutes * 60) if minutes is not None else None


def _exit(code: Any) -> str | None:
    """``return_code:signal`` as sacct prints an exit code."""
    if not isinstance(code, dict):
        return None
    ret = _number(code.get("return_code"))
    sig = code.get("signal")
    signal = _number(sig.get("id") if isinstance(sig, dict) else sig)
    return None if ret is None and signal is None else f"{ret or 0}:{signal or 0}"


def _tres(items: Any) -> str | None:
    """A TRES list (``[{"type": "cpu", "name": "", "count": 2}, ...]``) as sacct's ``cpu=2,mem=1024M,gres/gpu:h100=4``
    (memory in MB, with sacct's ``M``)."""
    if isinstance(items, str):
        return items or None
    if not isinstance(items, list):
        return None
    parts = []
    for t in items:
        if not isinstance(t, dict) or _number(t.get("count")) is None or not t.get("type"):
            continue
        kind = f"{t['type']}/{t['name']}" if t.get("name") else str(t["type"])
        count = _number(t.get("count"))
        parts.append(f"{kind}={count}M" if kind == "mem" else f"{kind}={count}")
    return ",".join(parts) or None


def _tres_count(items: Any, kind: str) -> str | None:
    for t in items if isinstance(items, list) else []:
        if isinstance(t, dict) and t.get("type") == kind and not t.get("name"):
            return _text(_number(t.get("count")))
    return None


def _job_id(job: dict[str, Any]) -> str:
    """The id sacct prints: ``ARRAYJOB_TASK`` for an array task, ``HETJOB+OFFSET`` for a heterogeneous part."""
    raw = _number(job.get("job_id"))
    array = _dict(job.get("array"))
    master = _number(array.get("job_id")) or _number(job.get("array_job_id"))
    task = _number(array.get("task_id")) if "task_id" in array else _number(job.get("array_task_id"))
    if master and task is not None:
        return f"{master}_{task}"
    het = _dict(job.get("het"))
    leader = _number(het.get("job_id")) or _number(job.get("het_job_id"))
    offset = _number(het.get("job_offset")) if "job_offset" in het else _number(job.get("het_job_offset"))
    if leader and offset is not None:
        return f"{leader}+{offset}"
    return str(raw)


def _job_row(job: dict[str, Any]) -> dict[str, str | None]:
    """One job as sacct's row (accounting's fields, else the controller's)."""
    time = _dict(job.get("time"))
    state = job.get("state")
    tres = _dict(job.get("tres"))
    allocated = tres.get("allocated")
    start = time.get("start", job.get("start_time"))
    end = time.get("end", job.get("end_time"))
    elapsed = _number(time.get("elapsed"))
    if elapsed is None and _number(start) and _number(end):
        elapsed = _number(end) - _number(start)  # type: ignore[operator]
    required = _dict(job.get("required"))
    return {
        "jobid": _job_id(job),
        "jobidraw": _text(_number(job.get("job_id"))),
        "jobname": _text(job.get("name")),
        "user": _text(job.get("user") or job.get("user_name")),
        "account": _text(job.get("account")),
        "partition": _text(job.get("partition")),
        "qos": _text(job.get("qos")),
        "cluster": _text(job.get("cluster")),
        "state": _words(state.get("current") if isinstance(state, dict) else state or job.get("job_state")),
        "reason": _text(state.get("reason") if isinstance(state, dict) else job.get("state_reason")),
        "exitcode": _exit(job.get("exit_code")),
        "derivedexitcode": _exit(job.get("derived_exit_code")),
        "submit": _iso(time.get("submission", job.get("submit_time"))),
        "eligible": _iso(time.get("eligible", job.get("eligible_time"))),
        "start": _iso(start),
        "end": _iso(end),
        "elapsed": _duration(elapsed),
        "elapsedraw": _text(elapsed),
        "timelimit": _limit(time.get("limit", job.get("time_limit"))),
        "nnodes": _text(_number(job.get("allocation_nodes", job.get("node_count")))),
        "nodelist": _text(job.get("nodes")),
        "ntasks": _text(_number(job.get("tasks"))),
        "alloccpus": _tres_count(allocated, "cpu") or _text(_number(job.get("cpus") or required.get("CPUs"))),
        "alloctres": _tres(allocated if allocated is not None else job.get("tres_alloc_str")),
        "workdir": _text(job.get("working_directory") or job.get("current_working_directory")),
    }


def _step_row(job: dict[str, Any], step: dict[str, Any]) -> dict[str, str | None]:
    """One step of a job (accounting only) as sacct's row: the step's own fields; the job's name, user and account
    are not repeated (sacct leaves them empty on a step's row too, except the name)."""
    ident = _dict(step.get("step"))
    sid = ident.get("id")
    if isinstance(sid, dict):  # an older parser: {"job_id": 9682, "step_id": "batch"}
        sid = f"{sid.get('job_id', _job_id(job))}.{sid.get('step_id', '')}"
    elif sid is not None and "." not in str(sid):
        sid = f"{_job_id(job)}.{sid}"
    time = _dict(step.get("time"))
    nodes = _dict(step.get("nodes"))
    tres = _dict(step.get("tres"))
    tasks = _dict(step.get("tasks"))
    elapsed = _number(time.get("elapsed"))
    return dict.fromkeys(ROW_FIELDS) | {
        "jobid": _text(sid) or f"{_job_id(job)}.?",
        "jobname": _text(ident.get("name")),
        "state": _words(step.get("state")),
        "exitcode": _exit(step.get("exit_code")),
        "start": _iso(time.get("start")),
        "end": _iso(time.get("end")),
        "elapsed": _duration(elapsed),
        "elapsedraw": _text(elapsed),
        "nnodes": _text(_number(nodes.get("count"))),
        "nodelist": _text(nodes.get("range")),
        "ntasks": _text(_number(tasks.get("count"))),
        "alloccpus": _tres_count(tres.get("allocated"), "cpu"),
        "alloctres": _tres(tres.get("allocated")),
    }


def _error_text(entry: Any) -> str:
    """One of Slurm's ``errors``/``warnings`` entries as a line (its description, where it came from, its code)."""
    if not isinstance(entry, dict):
        return str(entry)
    words = [str(entry[k]) for k in ("description", "source") if entry.get(k)]
    if entry.get("error"):
        words.append(f"({entry['error']})")
    return " ".join(words) or json.dumps(entry)
