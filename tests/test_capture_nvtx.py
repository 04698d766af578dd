"""The application layer of ``di record``: NVTX ranges through di's injection library (a C
program built against NVTX v3, the ``nvtx`` package), ``di.region`` and ``di record --python``,
single process and MPI, on a machine without CUDA."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from capture_helpers import (
    PROGRAMS,
    di_cmd,
    record_launcher,
    record_per_rank,
    run,
    tool,
)

import di


def nvtx_include() -> Path:
    """A directory holding NVTX v3's ``nvtx3/nvToolsExt.h`` (CUDA's, or $NVTX_INCLUDE); skips without one."""
    roots = [
        os.environ.get("NVTX_INCLUDE", ""),
        os.path.join(os.environ.get("CUDA_HOME", ""), "include"),
        "/usr/local/cuda/include",
        *sorted(glob.glob("/usr/local/cuda-*/include"), reverse=True),
        "/usr/include",
    ]
    for root in filter(None, roots):
        if (Path(root) / "nvtx3" / "nvToolsExt.h").is_file():
            return Path(root)
    pytest.skip("NVTX v3 headers (nvtx3/nvToolsExt.h) not found: set NVTX_INCLUDE or CUDA_HOME")


def build(dest: Path, mpi: bool) -> Path:
    exe = dest / ("nvtx_mpi" if mpi else "nvtx_ranges")
    cc = tool("mpicc") if mpi else os.environ.get("CC", "cc")
    subprocess.run(
        [
            cc,
            "-O1",
            *(["-DWITH_MPI"] if mpi else []),
            f"-I{nvtx_include()}",
            "-o",
            str(exe),
            str(PROGRAMS / "nvtx_ranges.c"),
            "-ldl",
            "-lpthread",
        ],
        check=True,
        timeout=120,
    )
    return exe


def events(run_dir: Path) -> pl.DataFrame:
    trace = di.load(run_dir)
    trace.validate()
    ev = trace.events.with_row_index("row").join(trace.locations.select("loc", "rank", "tid", "pid"), on="loc")
    return ev.with_columns(
        pl.col("name").cast(pl.String), pl.col("cat").cast(pl.String), pl.col("src_cat").cast(pl.String)
    )


def parent_name(ev: pl.DataFrame, row: dict) -> str | None:
    if row["parent"] is None:
        return None
    return ev.filter(pl.col("row") == row["parent"]).get_column("name")[0]


def test_nvtx_ranges_of_a_c_program(tmp_path: Path) -> None:
    exe = build(tmp_path, mpi=False)
    out = tmp_path / "c.di"
    proc = run(di_cmd("record", "--io", "-o", str(out), "--", str(exe)), tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    ev = events(out).filter(pl.col("src_cat") == "nvtx")
    assert (ev.get_column("cat") == "user").all()
    fwd = ev.filter(pl.col("name") == "forward")
    assert fwd.height == 3  # registered string in domain "trainer", category 7 named "model", green
    assert fwd.get_column("args").unique().to_list() == [
        '{"domain":"trainer","category":7,"category_name":"model","color":"#00ff00"}'
    ]
    for row in ev.filter(pl.col("name") == "matmul").iter_rows(named=True):  # default-domain push inside a domain push
        assert parent_name(ev, row) == "forward" and row["depth"] == 2
    for row in fwd.iter_rows(named=True):
        assert parent_name(ev, row) == "job"
    mark = ev.filter(pl.col("name") == "checkpoint saved").row(0, named=True)
    assert mark["instant"] and mark["start_ns"] == mark["end_ns"]
    job = ev.filter(pl.col("name") == "job").row(0, named=True)
    load = ev.filter(pl.col("name") == "async load").row(0, named=True)  # started on main, ended on the worker
    worker = ev.filter(pl.col("name") == "worker").row(0, named=True)
    assert load["loc"] == job["loc"] != worker["loc"] and load["pid"] == worker["pid"]
    assert load["start_ns"] < worker["start_ns"] < worker["end_ns"] <= load["end_ns"] <= job["end_ns"]
    names = dict(di.load(out).locations.select("loc", "name").iter_rows())
    assert names[worker["loc"]] == "loader thread" and names[job["loc"]] == "main thread"
    left = ev.filter(pl.col("name") == "left open").row(0, named=True)  # still pushed at exit: ends there
    assert (
        left["args"] == '{"unclosed":true}' and left["start_ns"] > job["end_ns"] and left["end_ns"] >= left["start_ns"]
    )
    assert ev.filter(pl.col("name") == "never ended").height == 0
    assert "1 NVTX start/end ranges without an end dropped" in di.load(out).meta["warnings"]


@pytest.mark.parametrize("form", ["launcher", "per_rank"])
def test_nvtx_ranges_of_an_mpi_job_nest_with_its_calls(tmp_path: Path, form: str) -> None:
    exe = build(tmp_path, mpi=True)
    out = tmp_path / "mpi.di"
    proc = (record_launcher if form == "launcher" else record_per_rank)(out, [str(exe)], np=2)
    assert proc.returncode == 0, proc.stderr
    ev = events(out)
    for rank in (0, 1):
        mine = ev.filter(pl.col("rank") == rank)
        outer = mine.filter(pl.col("name") == f"rank {rank}").row(0, named=True)
        barrier = mine.filter(pl.col("name") == "MPI_Barrier").row(0, named=True)
        assert barrier["loc"] == outer["loc"] and parent_name(ev, barrier) == f"rank {rank}"
        assert mine.filter(pl.col("name") == "forward").height == 3


def _record_regions(
    tmp_path: Path, *flags: str, arg: str = "", python: str = sys.executable, **env: str
) -> pl.DataFrame:
    out = tmp_path / "py.di"
    proc = run(
        di_cmd(
            "record",
            "--io",
            *flags,
            "-o",
            str(out),
            "--",
            python,
            str(PROGRAMS / "regions_job.py"),
            *([arg] if arg else []),
        ),
        tmp_path,
        timeout=120,
        **env,
    )
    assert proc.returncode == 0, proc.stderr
    return events(out)


def test_di_region_records_user_events_with_nesting_and_threads(tmp_path: Path) -> None:
    ev = _record_regions(tmp_path)
    reg = ev.filter(pl.col("src_cat") == "di_region")
    assert sorted(reg.get_column("name").unique().to_list()) == [
        "backward",
        "checkpoint",
        "forward",
        "loader",
        "step 0",
        "step 1",
    ]
    assert (reg.get_column("cat") == "user").all()
    for row in reg.filter(pl.col("name").is_in(["forward", "backward", "checkpoint"])).iter_rows(named=True):
        assert parent_name(ev, row) in ("step 0", "step 1")
    main_loc = reg.filter(pl.col("name") == "forward").get_column("loc")[0]
    assert reg.filter(pl.col("name") == "loader").get_column("loc")[0] != main_loc
    assert ev.filter(pl.col("cat") == "python").height == 0  # no --python: no calls


def test_di_region_outside_di_record_is_a_no_op() -> None:
    code = (
        "import di, time; r = di.region('x')\n"
        "with r: pass\n"
        "t = time.perf_counter_ns()\n"
        "for _ in range(10000):\n    with r: pass\n"
        "print((time.perf_counter_ns() - t) // 10000)"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("DI_CAPTURE_DIR", "DI_NVTX_LIB")}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1])
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert int(proc.stdout) < 5_000  # ns per enter+exit: nothing but two method calls


def _interpreters() -> list[str]:
    """This Python, and one with sys.monitoring (3.12+) when this one lacks it and one is on PATH
    (the recorded job needs nothing beyond the standard library and di)."""
    found = [sys.executable]
    if sys.version_info < (3, 12):
        found += [p for p in (shutil.which("python3.13"), shutil.which("python3.12")) if p][:1]
    return found


@pytest.mark.parametrize(
    "python", _interpreters(), ids=lambda p: "this python" if p == sys.executable else Path(p).name
)
def test_python_calls_of_the_program_only_above_the_minimum(tmp_path: Path, python: str) -> None:
    probe = subprocess.run(
        [python, "-c", "import sys; print(sys.version_info >= (3, 12))"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if probe.returncode != 0:
        pytest.skip(f"{python} does not run")
    ev = _record_regions(tmp_path, "--python", "1000", python=python)  # 1 ms
    calls = ev.filter(pl.col("cat") == "python")
    names = set(calls.get_column("name").to_list())
    assert {"slow_helper", "failing", "checkpoint", "main", "worker"} <= names
    assert "quick_helper" not in names  # shorter than the minimum
    assert not any(n.startswith(("dumps", "JSONEncoder", "Thread", "sleep")) for n in names)  # stdlib
    slow = calls.filter(pl.col("name") == "slow_helper").row(0, named=True)
    assert (
        slow["end_ns"] - slow["start_ns"] >= 4_000_000
        and '"line":' in slow["args"]
        and "regions_job.py" in slow["args"]
    )
    assert parent_name(ev, slow) == "forward"  # inside the region that called it
    assert calls.filter(pl.col("name") == "failing").height == 1  # a call that raised still ends


def test_nvtx_python_package(tmp_path: Path) -> None:
    pytest.importorskip("nvtx", reason="the nvtx package is not installed")
    ev = _record_regions(tmp_path, arg="nvtx")
    nv = ev.filter(pl.col("src_cat") == "nvtx")
    outer = nv.filter(pl.col("name") == "nvtx outer").row(0, named=True)
    inner = nv.filter(pl.col("name") == "nvtx inner").row(0, named=True)
    assert (
        parent_name(ev, inner) == "nvtx outer" and '"domain":"pkg"' in outer["args"] and '"color":"#' in outer["args"]
    )
    assert nv.filter(pl.col("name") == "nvtx mark").get_column("instant").all()


def test_nvtx_ranges_have_one_source_with_cupti(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """di record puts its library in NVTX's one injection slot; CUPTI's capture (--gpu) leaves it
    there, so CUPTI never sees an NVTX call; a tool already in the slot keeps it, and the trace says so."""
    from di.capture import build, record
    from di.capture.cupti import GpuCapture

    monkeypatch.delenv("NVTX_INJECTION64_PATH", raising=False)
    env, notes = record._application(record.RecordOptions(output=tmp_path / "r.di", gpu=True))
    lib = str(build.nvtx_lib())
    assert env["NVTX_INJECTION64_PATH"] == env["DI_NVTX_LIB"] == lib and not notes
    monkeypatch.setenv("NVTX_INJECTION64_PATH", lib)
    GpuCapture(tmp_path)._inject_nvtx()
    assert os.environ["NVTX_INJECTION64_PATH"] == lib
    monkeypatch.setenv("NVTX_INJECTION64_PATH", "/opt/other-tool/libToolsInjection64.so")
    env, notes = record._application(record.RecordOptions(output=tmp_path / "r.di"))
    assert "NVTX_INJECTION64_PATH" not in env and env["DI_NVTX_LIB"] == lib and "already set" in notes[0]
