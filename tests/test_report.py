"""`di report`: one self-contained HTML page whose numbers are those of `di analyze --json`.

Sources: the Kineto-shaped demo job, shared Kineto traces, shared OTF2 archives
and a 4-rank MPI job recorded here with MPI, I/O and host counters.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import polars as pl
import pytest
from capture_helpers import PROGRAMS, need_mpi4py, record_launcher
from conftest import KINETO, OTF2
from report_tables import read_page

from di.cli import main
from di.demo import write_kineto_job


@pytest.fixture(scope="module")
def demo_job(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("demo")
    write_kineto_job(folder, ranks=4, steps=4)
    return folder


@pytest.fixture(scope="module")
def recorded_job(tmp_path_factory) -> Path:
    need_mpi4py()
    folder = tmp_path_factory.mktemp("recorded")
    run = folder / "run.di"
    proc = record_launcher(
        run, [sys.executable, str(PROGRAMS / "known_calls.py"), str(folder)], "--mpi", "--io", "--host", "--rate", "50"
    )
    assert proc.returncode == 0, proc.stderr
    return run


def shared(path: Path) -> str:
    if not path.exists():
        pytest.skip(f"shared test data absent: {path.name} not found under ../shared/data")
    return str(path)


SOURCES = {
    "kineto_hta_trace_filter": lambda: shared(KINETO / "hta_trace_filter"),
    "kineto_nccl_parser_config": lambda: shared(KINETO / "hta_nccl_parser_config"),
    "otf2_casita_4_mpi_ls_barr": lambda: shared(OTF2 / "casita_4_mpi_ls_barr" / "traces.otf2"),
    "otf2_casita_2_cuda_simple": lambda: shared(OTF2 / "casita_2_cuda_simple" / "traces.otf2"),
}


def check_against_json(tables: dict, keys: dict, doc: dict) -> None:
    """Every number the page shows for breakdown, overlap, waits, imbalance and critical path equals the JSON's."""
    ranks = {r["rank"]: r for r in doc["ranks"]}
    assert keys["ranks"] == len(ranks)
    assert keys["steps"] == len({s["step"] for s in doc["steps"]})
    shown = 0
    for row in tables.get("breakdown", []):
        want = {
            b["state"]: b for b in ranks[row["rank"]]["breakdown"] if b["scope"] == row["scope"] and b["step"] is None
        }
        assert row["span_ns"] == next(iter(want.values()))["span_ns"]
        for col, v in row.items():
            if col.endswith("_ns") and col != "span_ns":
                assert v == want[col[:-3]]["time_ns"], (row, col)
                shown += 1
    for row in tables.get("overlap", []):
        want = next(o for o in ranks[row["rank"]]["overlap"] if o["pair"] == row["pair"] and o["step"] is None)
        assert (row["numerator_ns"], row["denominator_ns"], row["ratio"]) == (
            want["numerator_ns"],
            want["denominator_ns"],
            want["ratio"],
        )
        shown += 1
    for row in tables.get("wait_states", []):
        w = ranks[row["rank"]]["wait_states"]
        assert row["waited_ns"] == w["waited_ns"].get(row["kind"], 0) and row["caused_ns"] == w["caused_ns"].get(
            row["kind"], 0
        )
        shown += 1
    for row in tables.get("imbalance", []):
        want = next(
            i for i in doc["imbalance"] if i["step"] is None and i["side"] == row["side"] and i["state"] == row["state"]
        )
        assert (row["max_ns"], row["max_rank"], row["mean_ns"]) == (want["max_ns"], want["max_rank"], want["mean_ns"])
        shown += 1
    cp = doc["critical_path"]
    if cp["summary"]["length_ns"]:
        assert keys["cp.length_ns"] == cp["summary"]["length_ns"]
        assert {r["category"]: r["contrib_ns"] for r in tables["cp_by_category"]} == {
            c["category"]: c["contrib_ns"] for c in cp["by_category"]
        }
        assert {r["rank"]: r["contrib_ns"] for r in tables["cp_by_rank"]} == {
            r["rank"]: r["critical_path"]["contrib_ns"] for r in doc["ranks"] if r["critical_path"]["contrib_ns"]
        }
    assert shown > 0


def self_contained(page: str) -> None:
    """Nothing the browser would fetch: no src/href to another resource, no url(), no @import."""
    assert not re.search(r"""\b(src|href)\s*=\s*["'](?!#|data:)""", page), "a src/href that loads something"
    assert "url(" not in page.replace("url(#", "") and "@import" not in page
    assert "<svg" in page and page.count("<section") >= 4


def run_and_compare(src: str, tmp_path: Path, capsys) -> str:
    out = tmp_path / "report.html"
    assert main(["report", src, "-o", str(out), "--no-plugins"]) == 0
    capsys.readouterr()
    assert main(["analyze", src, "--json", "-"]) == 0
    doc = json.loads(capsys.readouterr().out)
    page = out.read_text(encoding="utf-8")
    self_contained(page)
    check_against_json(*read_page(page), doc)
    return page


def test_demo_report_matches_analyze_json(demo_job, tmp_path, capsys):
    page = run_and_compare(str(demo_job), tmp_path, capsys)
    tables, _ = read_page(page)
    assert tables["top_kernels"] and tables["top_collectives"], "the demo has kernels and NCCL collectives"
    assert "Rank 1 enters allreduce" in page, "the demo's rank 1 is the straggler and the hint names it"


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_shared_trace_report_matches_analyze_json(name, tmp_path, capsys):
    run_and_compare(SOURCES[name](), tmp_path, capsys)


def test_recorded_job_report_has_io_and_counters(recorded_job, tmp_path, capsys):
    page = run_and_compare(str(recorded_job), tmp_path, capsys)
    tables, _ = read_page(page)
    # the I/O table against a plain count over the trace's io events (the 30 files with most time are listed)
    import di

    per_file: dict[str, list[int]] = {}
    for name, nbytes, args, start, end in (
        di.load(recorded_job)
        .events.filter(pl.col("cat") == "io")
        .select(pl.col("name").cast(pl.String), "bytes", "args", "start_ns", "end_ns")
        .iter_rows()
    ):
        f = per_file.setdefault(json.loads(args).get("file") or "(unknown)" if args else "(unknown)", [0, 0, 0, 0])
        f[0] += 1
        f[1] += max(nbytes or 0, 0) if "read" in name else 0
        f[2] += max(nbytes or 0, 0) if "write" in name else 0
        f[3] += end - start
    rows = tables["io_files"]
    assert len(rows) == min(30, len(per_file))
    assert all([r["calls"], r["read_bytes"], r["write_bytes"], r["time_ns"]] == per_file[r["file"]] for r in rows)
    assert [r["time_ns"] for r in rows] == sorted((v[3] for v in per_file.values()), reverse=True)[: len(rows)]
    assert any(r["series"] == "cpu busy" and r["samples"] > 0 for r in tables["counters"])
    rates = [r for r in tables["counters"] if r["unit"].endswith("/s")]
    assert rates and all(r["min"] >= 0 for r in rates), "cumulative counters are shown as rates"


def test_cumulative_counters_become_rates():
    import polars as pl

    from di.engine.counters import as_rates

    series = pl.DataFrame(
        {"series": [0, 1], "loc": [0, 0], "name": ["mlx5_0/1 port_rcv_data", "mem used"], "unit": ["bytes", "bytes"]}
    )
    samples = pl.DataFrame(
        {"series": [0, 0, 0, 1, 1, 1], "ts_ns": [0, 10**9, 3 * 10**9] * 2, "value": [0.0, 100.0, 500.0, 5.0, 9.0, 12.0]}
    )
    units, rates = as_rates(series, samples)
    assert units.get_column("unit").to_list() == ["bytes/s", "bytes"]
    assert rates.filter(pl.col("series") == 0).get_column("value").to_list() == [100.0, 200.0]
    assert rates.filter(pl.col("series") == 1).get_column("value").to_list() == [5.0, 9.0, 12.0]


def test_report_of_missing_file_is_one_line_error(tmp_path, capsys):
    assert main(["report", str(tmp_path / "nope.json"), "-o", str(tmp_path / "r.html")]) == 2
    err = capsys.readouterr().err
    assert "nope.json" in err and "Traceback" not in err


def windowed(src: str, window: str, tmp_path: Path, capsys) -> tuple[dict, dict, dict]:
    """(page tables, page keys, analyze --json) for one window."""
    out = tmp_path / f"report-{abs(hash(window))}.html"
    assert main(["report", src, "-o", str(out), "--no-plugins", "--window", window]) == 0
    capsys.readouterr()
    assert main(["analyze", src, "--window", window, "--json", "-"]) == 0
    doc = json.loads(capsys.readouterr().out)
    tables, keys = read_page(out.read_text(encoding="utf-8"))
    check_against_json(tables, keys, doc)
    return tables, keys, doc


def gpu_union(doc: dict, state: str) -> int:
    return sum(
        b["union_ns"]
        for r in doc["ranks"]
        for b in r["breakdown"]
        if b["scope"].startswith("gpu") and b["step"] is None and b["state"] == state
    )


def test_window_reaches_the_top_events(demo_job, tmp_path, capsys):
    """The demo's kernels (and its copies/sets) never overlap on a GPU, so their summed time in a window is the
    GPU compute (memory) time `di analyze --window` gives; the whole trace has more of both."""
    whole, _, _ = windowed(str(demo_job), "steps=:", tmp_path, capsys)
    tables, keys, doc = windowed(str(demo_job), "steps=1:3", tmp_path, capsys)
    assert keys["steps"] == 2
    kernels = sum(r["total_ns"] for r in tables["top_kernels"])
    assert len(tables["top_kernels"]) < 25, "every kernel name is listed"
    assert kernels == gpu_union(doc, "compute") > 0
    assert sum(r["total_ns"] for r in tables["top_memory"]) == gpu_union(doc, "memory") > 0
    assert kernels < sum(r["total_ns"] for r in whole["top_kernels"])
    assert sum(r["count"] for r in tables["top_collectives"]) < sum(r["count"] for r in whole["top_collectives"])


def test_window_reaches_io_and_counters(recorded_job, tmp_path, capsys):
    """A time window that cuts through the job's file I/O: the page's I/O time per file sums to the ranks'
    host io time of `di analyze --window` (each rank does its I/O on one thread), less than in the whole run."""
    import di

    trace = di.load(recorded_job)
    t0 = trace.meta["time_range"]["start_ns"]
    io = trace.events.filter(pl.col("cat") == "io")
    cut = (int(io.get_column("start_ns").min()) + int(io.get_column("end_ns").max())) // 2 - t0
    whole, whole_keys, _ = windowed(str(recorded_job), "time=0:", tmp_path, capsys)
    tables, keys, doc = windowed(str(recorded_job), f"time=0:{cut}", tmp_path, capsys)
    host_io = sum(
        b["union_ns"]
        for r in doc["ranks"]
        for b in r["breakdown"]
        if b["scope"] == "host" and b["step"] is None and b["state"] == "io"
    )
    assert keys["io.time_ns"] == host_io > 0  # all files; the table lists the 30 with most time
    assert keys["io.time_ns"] < whole_keys["io.time_ns"]
    assert sum(r["time_ns"] for r in tables["io_files"]) < sum(r["time_ns"] for r in whole["io_files"])
    assert sum(r["calls"] for r in tables["io_files"]) < sum(r["calls"] for r in whole["io_files"])
    # counters: only samples inside the window (cumulative ones become rates, which need a sample before)
    in_window = trace.samples.filter(pl.col("ts_ns").is_between(t0, t0 + cut)).height
    assert 0 < sum(r["samples"] for r in tables["counters"]) <= in_window
    assert sum(r["samples"] for r in tables["counters"]) < sum(r["samples"] for r in whole["counters"])


def test_axes_label_at_most_max_tick_labels() -> None:
    """A heat map of 750 steps labels 24 of them, evenly spaced, the first and the last among them; a short axis keeps
    every label. Each label is text matplotlib measures and draws: one per step cost a 750-step profile's report 6 of
    its 15 CPU-s."""
    from matplotlib.figure import Figure

    from di.viewers.report.page import MAX_TICK_LABELS, label_ticks

    ax = Figure().add_subplot()
    ax.imshow([[0.0] * 750] * 3, aspect="auto")
    label_ticks(ax.xaxis, range(750), [str(s) for s in range(750)])
    label_ticks(ax.yaxis, range(3), ["rank 0", "rank 1", "rank 2"])
    shown = [t.get_text() for t in ax.get_xticklabels()]
    assert len(shown) == MAX_TICK_LABELS and shown[0] == "0" and shown[-1] == "749"
    gaps = {int(b) - int(a) for a, b in zip(shown, shown[1:])}
    assert max(gaps) - min(gaps) <= 1
    assert [t.get_text() for t in ax.get_yticklabels()] == ["rank 0", "rank 1", "rank 2"]


def test_imbalance_heat_map_values_against_python() -> None:
    """Each cell: a rank's work in a step as % above the step's mean over every rank of the breakdown (a rank with no
    work there counts 0; a step whose mean is 0 shows 0), checked against plain Python on uneven work."""
    from di.viewers.report.imbalance import _relative_work

    work = pl.DataFrame(
        {"rank": [0, 0, 1, 2, 2, 0], "step": [3, 5, 3, 3, 5, 9], "work_ns": [10, 30, 20, 60, 10, 0]},
        schema={"rank": pl.Int32, "step": pl.Int64, "work_ns": pl.Int64},
    )
    ranks, steps, z = _relative_work(pl.Series([2, 0, 1, 1, 3], dtype=pl.Int32), work)
    assert ranks == [0, 1, 2, 3] and steps == [3, 5, 9]
    cells = {(r, s): w for r, s, w in work.iter_rows()}
    for i, r in enumerate(ranks):
        for j, s in enumerate(steps):
            mean = sum(cells.get((q, s), 0) for q in ranks) / len(ranks)
            want = 100 * (cells.get((r, s), 0) / mean - 1) if mean else 0.0
            assert z[i, j] == pytest.approx(want)
    assert z[3, 0] == pytest.approx(-100.0) and z[2, 0] == pytest.approx(100 * (60 / 22.5 - 1))


def test_bar_charts_draw_the_rows_least_like_the_median() -> None:
    """Of more rows than MAX_BARS, a chart draws the ones least like the median row, in their order, and says so; a
    straggler among 200 ranks is always drawn. Fewer rows: all, with no note."""
    import numpy as np

    from di.viewers.report.page import MAX_BARS, share_bars, unusual_rows

    values = np.full((200, 3), 10.0)
    values[150] = [90.0, 5.0, 5.0]  # the straggler
    values[7, 1] = 12.0
    assert unusual_rows(values, 2).tolist() == [7, 150]
    assert unusual_rows(values[:5], 8).tolist() == [0, 1, 2, 3, 4]
    wide = pl.DataFrame(
        {
            "rank": list(range(200)),
            "scope": ["host"] * 200,
            "span_ns": [1000] * 200,
            "compute": (values[:, 0] * 10).astype(int),
            "idle": (values[:, 1] * 10).astype(int),
        }
    )
    svg = share_bars(wide, [("compute", "C0", "compute"), ("idle", "C1", "idle")], "%", "test")
    assert svg.count('id="ytick_') == MAX_BARS and "rank 150 host" in svg
    assert f"{MAX_BARS} of 200 rows drawn" in svg
    few = share_bars(wide.head(3), [("compute", "C0", "compute")], "%", "test")
    assert few.count('id="ytick_') == 3 and "drawn" not in few


def test_wait_matrix_grid_against_python() -> None:
    """The wait-state heat map's cells: ns waited per waiting rank (row) and causing rank (column) over every rank
    that waited or caused a wait; a wait with no causing rank is in no cell."""
    from di.viewers.report.waits import _wait_grid

    matrix = pl.DataFrame(
        {"rank": [0, 0, 2, 5, 2], "cause_rank": [2, None, 7, 0, 0], "wait_ns": [10, 99, 30, 40, 50]},
        schema={"rank": pl.Int32, "cause_rank": pl.Int32, "wait_ns": pl.Int64},
    )
    ranks, grid = _wait_grid(matrix)
    assert ranks == [0, 2, 5, 7]
    want = {(0, 2): 10, (2, 7): 30, (5, 0): 40, (2, 0): 50}
    assert grid.tolist() == [[want.get((a, b), 0) for b in ranks] for a in ranks]
