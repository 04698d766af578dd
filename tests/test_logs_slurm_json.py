"""Slurm's JSON (sacct/squeue/scontrol --json, slurmrestd): the jobs and steps as sacct -P prints them.

The documents are built here in the shapes Slurm's data_parser writes (v0.0.37 of Slurm 21.08 with plain numbers and
string states; v0.0.41 of 24.11 with ``{"set", "infinite", "number"}`` numbers and state lists; the controller's
``squeue --json`` shape), as no such file is among the shared data.
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import di
from di.errors import FormatError

T0 = 1780298556  # 2026-06-01T07:22:36 UTC


def num(n: int, *, set_: bool = True, infinite: bool = False) -> dict[str, Any]:
    return {"set": set_, "infinite": infinite, "number": n}


def exit41(code: int, signal: int | None = None) -> dict[str, Any]:
    return {
        "status": ["SUCCESS" if code == 0 and signal is None else "ERROR"],
        "return_code": num(code),
        "signal": {"id": num(signal or 0, set_=signal is not None), "name": ""},
    }


def tres(*items: tuple[str, str, int]) -> list[dict[str, Any]]:
    return [{"type": t, "name": n, "id": i, "count": c} for i, (t, n, c) in enumerate(items, 1)]


def step41(sid: str, name: str, start: int, end: int, state: str, nodes: str, count: int) -> dict[str, Any]:
    return {
        "time": {"elapsed": end - start, "end": num(end), "start": num(start), "suspended": 0},
        "exit_code": exit41(0 if state == "COMPLETED" else 1),
        "nodes": {"count": count, "range": nodes, "list": []},
        "tasks": {"count": count * 4},
        "state": [state],
        "step": {"id": sid, "name": name},
        "tres": {"allocated": tres(("cpu", "", 8 * count), ("gres", "gpu:h100", 4 * count))},
    }


def sacct41() -> dict[str, Any]:
    """Slurm 24.11 ``sacct --json``: meta first (as sacct prints it), an array task that failed, a completed job."""
    failed = {
        "account": "llm",
        "allocation_nodes": 2,
        "array": {"job_id": 9600, "task_id": num(3), "task": ""},
        "het": {"job_id": 0, "job_offset": num(0, set_=False)},
        "cluster": "hpc",
        "job_id": 9603,
        "name": "pretrain",
        "nodes": "gpu[01-02]",
        "partition": "gpu",
        "qos": "normal",
        "state": {"current": ["FAILED"], "reason": "NonZeroExitCode"},
        "exit_code": exit41(1),
        "derived_exit_code": exit41(0),
        "time": {
            "elapsed": 3600,
            "eligible": T0 - 60,
            "end": T0 + 3600,
            "limit": num(1440),
            "start": T0,
            "submission": T0 - 120,
        },
        "steps": [
            step41("9603.batch", "batch", T0, T0 + 3600, "FAILED", "gpu01", 1),
            step41("9603.0", "python", T0 + 5, T0 + 3599, "CANCELLED", "gpu[01-02]", 2),
        ],
        "tres": {"allocated": tres(("cpu", "", 16), ("mem", "", 1024), ("node", "", 2), ("gres", "gpu:h100", 8))},
        "user": "ada",
        "working_directory": "/home/ada",
    }
    done = {
        "account": "llm",
        "allocation_nodes": 1,
        "array": {"job_id": 0, "task_id": num(0, set_=False)},
        "job_id": 9700,
        "name": "eval",
        "nodes": "gpu03",
        "state": {"current": ["COMPLETED"], "reason": "None"},
        "exit_code": exit41(0),
        "time": {"elapsed": 90061, "end": T0 + 90061, "limit": num(0, infinite=True), "start": T0, "submission": T0},
        "steps": [],
        "user": "ada",
    }
    meta = {
        "plugin": {"type": "", "name": "", "data_parser": "data_parser/v0.0.41"},
        "slurm": {"version": {"major": "24", "micro": "7", "minor": "11"}, "release": "24.11.7", "cluster": "hpc"},
    }
    return {"meta": meta, "jobs": [failed, done], "warnings": [], "errors": []}


def squeue() -> dict[str, Any]:
    """``squeue --json`` of a running job and a pending one (the controller's shape)."""
    jobs = [
        {
            "job_id": 77,
            "name": "train",
            "job_state": ["RUNNING"],
            "state_reason": "None",
            "user_name": "ada",
            "partition": "gpu",
            "nodes": "gpu[01-04]",
            "node_count": num(4),
            "start_time": num(T0),
            "end_time": num(T0 + 7200),
            "submit_time": num(T0 - 5),
            "time_limit": num(120),
            "array_job_id": num(0),
            "array_task_id": num(0, set_=False),
            "tres_alloc_str": "cpu=64,mem=512G,node=4,billing=64,gres/gpu=32",
            "exit_code": exit41(0),
        },
        {"job_id": 78, "name": "next", "job_state": ["PENDING"], "start_time": num(0), "end_time": num(0)},
    ]
    return {"jobs": jobs, "meta": {}, "errors": [], "warnings": []}


def write(path: Path, doc: Any) -> Path:
    path.write_text(json.dumps(doc, indent=2))
    return path


def test_sacct_json_rows_are_sacct_rows_and_steps_are_events(tmp_path: Path) -> None:
    trace = di.load(write(tmp_path / "sacct.json", sacct41()))
    trace.validate()
    rows = {r["jobid"]: r for r in trace.jobs.to_dicts()}
    assert list(rows) == ["9600_3", "9603.batch", "9603.0", "9700"]
    job = rows["9600_3"]
    assert job["jobidraw"] == "9603" and job["jobname"] == "pretrain" and job["state"] == "FAILED"
    assert job["reason"] == "NonZeroExitCode" and job["exitcode"] == "1:0" and job["derivedexitcode"] == "0:0"
    assert (job["submit"], job["start"], job["end"]) == (
        "2026-06-01T07:20:36",
        "2026-06-01T07:22:36",
        "2026-06-01T08:22:36",
    )
    assert job["elapsed"] == "01:00:00" and job["elapsedraw"] == "3600" and job["timelimit"] == "1-00:00:00"
    assert job["alloctres"] == "cpu=16,mem=1024M,node=2,gres/gpu:h100=8" and job["alloccpus"] == "16"
    assert job["nnodes"] == "2" and job["nodelist"] == "gpu[01-02]" and job["user"] == "ada"
    step = rows["9603.0"]
    assert step["jobname"] == "python" and step["state"] == "CANCELLED" and step["ntasks"] == "8"
    assert step["nodelist"] == "gpu[01-02]" and step["alloctres"] == "cpu=16,gres/gpu:h100=8" and step["user"] is None
    assert rows["9700"]["elapsed"] == "1-01:01:01" and rows["9700"]["timelimit"] == "UNLIMITED"
    info = trace.meta["sources"][0]["info"]["slurm"]
    assert info == {
        "rows": 4,
        "truncated": 0,
        "format": "json",
        "release": "24.11.7",
        "data_parser": "data_parser/v0.0.41",
    }
    steps = trace.events.filter(pl.col("cat") == "step").sort("start_ns", "name")
    assert steps.get_column("name").to_list() == ["slurm 9600_3", "slurm 9603.batch", "slurm 9700", "slurm 9603.0"]
    first = steps.row(0, named=True)
    assert first["start_ns"] == T0 * 10**9 and first["end_ns"] == (T0 + 3600) * 10**9
    assert json.loads(first["args"])["alloctres"] == job["alloctres"]
    instants = trace.events.filter(pl.col("instant")).sort("start_ns", "name")
    assert instants.get_column("name").to_list() == ["slurm CANCELLED", "slurm FAILED", "slurm FAILED"]
    assert trace.meta["clock"]["domain"] == "unix_epoch"


def test_json_and_parsable_text_of_one_job_give_one_table(tmp_path: Path) -> None:
    """The fields both outputs print read the same: ``sacct -P`` of the job (times in UTC) and its JSON."""
    text = tmp_path / "sacct.txt"
    text.write_text(
        "JobID|JobName|State|ExitCode|Start|End|Elapsed|NNodes|NodeList\n"
        "9600_3|pretrain|FAILED|1:0|2026-06-01T07:22:36|2026-06-01T08:22:36|01:00:00|2|gpu[01-02]\n"
        "9603.batch|batch|FAILED|1:0|2026-06-01T07:22:36|2026-06-01T08:22:36|01:00:00|1|gpu01\n"
        "9603.0|python|CANCELLED|1:0|2026-06-01T07:22:41|2026-06-01T08:22:35|00:59:54|2|gpu[01-02]\n"
        "9700|eval|COMPLETED|0:0|2026-06-01T07:22:36|2026-06-02T08:23:37|1-01:01:01|1|gpu03\n"
    )
    from_text = di.load(text)
    from_json = di.load(write(tmp_path / "sacct.json", sacct41()))
    columns = from_text.jobs.columns
    assert from_json.jobs.select(columns).equals(from_text.jobs)
    keys = ["start_ns", "end_ns", "name", "instant"]
    assert from_json.events.select(keys).sort(keys).equals(from_text.events.select(keys).sort(keys))


def test_slurm_21_08_plain_numbers_and_string_states(tmp_path: Path) -> None:
    """data_parser v0.0.37: numbers plain, a state a string, a step id without its job's."""
    doc = {
        "meta": {
            "plugin": {"type": "openapi/dbv0.0.37", "name": "Slurm OpenAPI DB v0.0.37"},
            "Slurm": {"release": "21.08.8-2"},
        },
        "errors": [],
        "jobs": [
            {
                "job_id": 1234,
                "name": "bert",
                "state": {"current": "CANCELLED", "reason": "None"},
                "exit_code": {"status": "SIGNALED", "return_code": 0, "signal": {"signal_id": 9, "name": "KILL"}},
                "time": {"elapsed": 61, "start": T0, "end": T0 + 61, "submission": T0, "limit": 60},
                "nodes": "n1",
                "allocation_nodes": 1,
                "steps": [
                    {
                        "time": {"elapsed": 60, "start": T0 + 1, "end": T0 + 61},
                        "state": "CANCELLED",
                        "step": {"job_id": 1234, "het": {"component": None}, "id": "batch", "name": "batch"},
                        "nodes": {"count": 1, "range": "n1"},
                        "exit_code": {"status": "SIGNALED", "return_code": 0, "signal": {"signal_id": 9}},
                    }
                ],
            }
        ],
    }
    trace = di.load(write(tmp_path / "old.json", doc))
    rows = trace.jobs.to_dicts()
    assert [r["jobid"] for r in rows] == ["1234", "1234.batch"]
    assert rows[0]["state"] == "CANCELLED" and rows[0]["timelimit"] == "01:00:00" and rows[1]["nodelist"] == "n1"
    assert trace.meta["sources"][0]["info"]["slurm"]["release"] == "21.08.8-2"
    assert trace.events.filter(pl.col("instant")).height == 2


def test_squeue_json_controller_shape(tmp_path: Path) -> None:
    """``squeue --json``: job_state, start_time/end_time as numbers, user_name, tres_alloc_str; a running job's end
    is in the future (its limit), a pending one has no start."""
    trace = di.load(write(tmp_path / "squeue.json", squeue()))
    rows = trace.jobs.to_dicts()
    assert [(r["jobid"], r["state"], r["user"], r["nnodes"]) for r in rows] == [
        ("77", "RUNNING", "ada", "4"),
        ("78", "PENDING", None, None),
    ]
    assert (
        rows[0]["alloctres"] == "cpu=64,mem=512G,node=4,billing=64,gres/gpu=32" and rows[0]["timelimit"] == "02:00:00"
    )
    assert rows[1]["start"] is None and trace.events.get_column("name").to_list() == ["slurm 77"]


def test_cut_document_keeps_the_whole_jobs_and_counts_the_rest(tmp_path: Path) -> None:
    text = json.dumps(sacct41(), indent=2)
    cut = text[: text.index('"job_id": 9700') + 5]  # inside the second job
    path = tmp_path / "cut.json"
    path.write_text(cut)
    trace = di.load(path)
    assert trace.jobs.get_column("jobid").to_list() == ["9600_3", "9603.batch", "9603.0"]
    source = trace.meta["sources"][0]
    ((reason, lost),) = source["dropped"].items()
    second = cut.rindex('{\n      "account"')  # where the cut job starts
    assert reason.startswith("slurm: bytes after the last whole job (cut or damaged") and lost == len(cut) - second
    assert source["info"]["slurm"]["release"] == "24.11.7"  # the meta printed before the jobs


def test_gzip_and_convert_and_info(tmp_path: Path) -> None:
    path = tmp_path / "sacct.json.gz"
    path.write_bytes(gzip.compress(json.dumps(sacct41()).encode()))
    assert di.load(path).jobs.height == 4
    out = subprocess.run(
        [sys.executable, "-m", "di", "convert", str(path), "-o", str(tmp_path / "jobs.di")],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    assert di.load(tmp_path / "jobs.di").jobs.equals(di.load(path).jobs)
    info = subprocess.run([sys.executable, "-m", "di", "info", str(path)], capture_output=True, text=True)
    assert "jobs 4 rows (Slurm): FAILED 2, CANCELLED 1, COMPLETED 1" in " ".join(info.stdout.split())


def test_slurm_errors_without_jobs_are_one_line(tmp_path: Path) -> None:
    doc = {
        "jobs": [],
        "meta": {"plugin": {"data_parser": "data_parser/v0.0.41"}},
        "errors": [
            {
                "description": "Unable to find job",
                "source": "_job_get",
                "error": "Invalid job id specified",
                "error_number": 2017,
            }
        ],
        "warnings": [],
    }
    path = write(tmp_path / "missing.json", doc)
    with pytest.raises(
        FormatError, match="Slurm reported 1 error.*Unable to find job _job_get .Invalid job id specified."
    ):
        di.load(path)
    out = subprocess.run([sys.executable, "-m", "di", "info", str(path)], capture_output=True, text=True)
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1 and "Unable to find job" in out.stderr


def test_jobs_without_an_id_are_counted_and_other_json_is_not_slurm(tmp_path: Path) -> None:
    doc = sacct41()
    doc["jobs"].insert(1, {"name": "no id"})
    doc["jobs"].insert(0, "not a job")
    trace = di.load(write(tmp_path / "odd.json", doc))
    assert trace.jobs.height == 4 and trace.meta["sources"][0]["dropped"] == {"slurm: jobs without a job id": 2}
    other = write(tmp_path / "other.json", {"jobs": [{"id": 1, "title": "a build"}]})
    with pytest.raises(FormatError, match="not a Chrome trace"):
        di.load(other)
