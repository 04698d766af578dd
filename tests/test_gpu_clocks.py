"""GPU clocks next to the kernels: a real two-rank Kineto trace merged with an nvidia-smi log of the same job.

The log is written here from the trace's time range (``nvidia-smi --query-gpu=timestamp,index,name,clocks.sm,
power.draw,temperature.gpu --format=csv -lms 50``), so the answer is known: GPU 0 runs at 1410 MHz, 400 W and
60 C except for a stretch in the middle where it drops to 1005 MHz, 250.5 W and 70 C; GPU 1 holds 1980 MHz,
300 W and 55 C. Every kernel's expected mean is the share of its time inside that stretch.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import polars as pl
import pytest
from conftest import DATA
from report_tables import read_page

import di
from di.cli import main
from di.engine.gpu_clocks import THROTTLE_SHARE

TRACE = DATA / "kineto" / "hta_trace_filter"
PERIOD_NS = 50_000_000
FAST, SLOW = (1410.0, 400.0, 60.0), (1005.0, 250.5, 70.0)
STEADY = (1980.0, 300.0, 55.0)


def stamp(ns: int) -> str:
    d = dt.datetime.fromtimestamp(ns // 10**9, dt.timezone.utc)
    return d.strftime("%Y/%m/%d %H:%M:%S") + f".{ns % 10**9 // 10**6:03d}"


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, tuple[int, int]]:
    """(trace folder, nvidia-smi log, [start, end) of GPU 0's slow stretch in ns)."""
    if not TRACE.is_dir():
        pytest.skip("shared test data absent: kineto/hta_trace_filter not found under ../shared/data")
    span = di.load(TRACE).meta["time_range"]
    first = span["start_ns"] // PERIOD_NS * PERIOD_NS - 4 * PERIOD_NS
    slow = (first + 28 * PERIOD_NS, first + 36 * PERIOD_NS)  # 0.4 s amid the kernels (0.8 s to 2.1 s in)
    lines = ["timestamp, index, name, clocks.sm [MHz], power.draw [W], temperature.gpu"]
    for ts in range(first, span["end_ns"] + 4 * PERIOD_NS, PERIOD_NS):
        for gpu, (mhz, watts, temp) in ((0, SLOW if slow[0] <= ts < slow[1] else FAST), (1, STEADY)):
            lines.append(f"{stamp(ts)}, {gpu}, NVIDIA A100-SXM4-80GB, {mhz:.0f} MHz, {watts:.2f} W, {temp:.0f}")
    log = tmp_path_factory.mktemp("smi") / "smi.csv"
    log.write_text("\n".join(lines) + "\n")
    return TRACE, log, slow


def expected(trace: di.Trace, slow: tuple[int, int], lo: int | None = None, hi: int | None = None) -> pl.DataFrame:
    """Per (rank, device, name): the means the log implies, from each kernel's time inside the slow stretch."""
    k = trace.events.filter(pl.col("cat") == "kernel").join(trace.locations.select("loc", "rank", "device"), on="loc")
    if lo is not None:
        k = k.with_columns(pl.col("start_ns").clip(lo, hi), pl.col("end_ns").clip(lo, hi)).filter(
            pl.col("end_ns") > pl.col("start_ns")
        )
    dur = pl.col("end_ns") - pl.col("start_ns")
    inside = (pl.min_horizontal("end_ns", pl.lit(slow[1])) - pl.max_horizontal("start_ns", pl.lit(slow[0]))).clip(0)
    k = k.with_columns(dur.alias("d"), pl.when(pl.col("device") == 0).then(inside).otherwise(0).alias("ov"))

    def mean(i: int) -> pl.Expr:
        fast = pl.when(pl.col("device") == 0).then(FAST[i]).otherwise(STEADY[i])
        return ((fast * pl.col("d")).sum() + (SLOW[i] - FAST[i]) * pl.col("ov").sum()) / pl.col("d").sum()

    return (
        k.group_by(pl.col("rank").cast(pl.Int64), pl.col("device").cast(pl.Int64), pl.col("name").cast(pl.String))
        .agg(
            pl.len().cast(pl.Int64).alias("count"),
            pl.col("d").sum().alias("total_ns"),
            pl.col("ov").sum().alias("below_ns"),
            mean(0).alias("sm_clock_mhz"),
            mean(1).alias("power_w"),
            mean(2).alias("temperature_c"),
        )
        .filter(pl.col("total_ns") > 0)
        .sort("rank", "device", "name")
    )


def got(result: pl.DataFrame) -> pl.DataFrame:
    return result.filter(pl.col("total_ns") > 0).sort("rank", "device", "name")


def test_each_kernel_gets_its_gpu_clock_power_and_temperature(job) -> None:
    folder, log, slow = job
    trace = di.load([folder, log])
    alignment = next(s["info"]["alignment"] for s in trace.meta["sources"] if s["path"].endswith("smi.csv"))
    assert alignment["method"] == "timestamps" and alignment["offset_ns"] == 0
    result = got(di.analyze(trace, analyses=("gpu_clocks",)).gpu_clocks)
    want = expected(trace, slow)
    assert result.height == want.height > 0
    assert result.select("rank", "device", "name", "count", "total_ns", "below_ns").equals(
        want.select("rank", "device", "name", "count", "total_ns", "below_ns")
    )
    assert result.get_column("covered_ns").equals(result.get_column("total_ns"))  # the log covers the whole trace
    for col in ("sm_clock_mhz", "power_w", "temperature_c"):
        diff = (result.get_column(col) - want.get_column(col)).abs().max()
        assert diff < 1e-6, col
    assert set(result.get_column("max_sm_clock_mhz")) == {FAST[0], STEADY[0]}
    gpu0 = result.filter(pl.col("device") == 0)
    throttled = (want.filter(pl.col("device") == 0).get_column("sm_clock_mhz") < THROTTLE_SHARE * FAST[0]).to_list()
    assert gpu0.get_column("throttled").to_list() == throttled and any(throttled) and not all(throttled)
    assert not result.filter(pl.col("device") == 1).get_column("throttled").any()


def test_a_time_window_takes_the_clock_over_the_clipped_kernels(job) -> None:
    folder, log, slow = job
    trace = di.load([folder, log])
    t0 = trace.meta["time_range"]["start_ns"]
    window = f"time={(slow[0] - t0) / 1e9}s:{(slow[1] - t0) / 1e9}s"
    result = got(di.analyze(trace, window=window, analyses=("gpu_clocks",)).gpu_clocks)
    gpu0 = result.filter(pl.col("device") == 0)
    assert gpu0.height and (gpu0.get_column("sm_clock_mhz") - SLOW[0]).abs().max() < 1e-6
    assert gpu0.get_column("below_ns").equals(gpu0.get_column("total_ns")) and gpu0.get_column("throttled").all()
    want = expected(trace, slow, *slow)
    assert result.select("rank", "device", "name", "total_ns").equals(want.select("rank", "device", "name", "total_ns"))


def test_analyze_json_and_the_report_show_the_clocks(job, tmp_path: Path, capsys) -> None:
    folder, log, slow = job
    assert main(["analyze", str(folder), str(log), "--json", "-"]) == 0
    doc = json.loads(capsys.readouterr().out)
    rows = {(r["rank"], r["device"], r["name"]): r for r in doc["gpu_clocks"]}
    page = tmp_path / "report.html"
    assert main(["report", str(folder), str(log), "-o", str(page), "--no-plugins"]) == 0
    capsys.readouterr()
    text = page.read_text(encoding="utf-8")
    shown = read_page(text)[0]["gpu_clocks"]
    assert len(shown) == min(25, len(rows))
    for r in shown:
        want = rows[(r["rank"], r["device"], r["name"])]
        assert r["total_ns"] == want["total_ns"] and r["below_ns"] == want["below_ns"]
        assert r["sm_clock_mhz"] == pytest.approx(want["sm_clock_mhz"])
        assert (r["throttled"] == "yes") == want["throttled"]
    assert [r["total_ns"] for r in shown] == sorted((r["total_ns"] for r in rows.values()), reverse=True)[: len(shown)]
    assert "throttled" in text and "under the 1,410 MHz the GPU reached" in text


def test_a_trace_without_gpu_series_has_no_clocks(job, tmp_path: Path) -> None:
    folder, _, _ = job
    trace = di.load(folder)
    assert di.analyze(trace, analyses=("gpu_clocks",)).gpu_clocks.height == 0
    page = tmp_path / "plain.html"
    assert main(["report", str(folder), "-o", str(page), "--no-plugins"]) == 0
    assert 'data-table="gpu_clocks"' not in page.read_text(encoding="utf-8")


def test_each_gpu_takes_one_series_per_quantity_in_order_of_preference() -> None:
    """A real nvidia-smi capture holds the SM clock three ways (--query-gpu, dmon, -q): the query's is taken."""
    from di.engine.gpu_clocks import gpu_series

    capture = DATA / "logs" / "nvidia-smi" / "capture_linux_h100_80gb_hbm3_drv590.48.01.txt"
    if not capture.is_file():
        pytest.skip("shared test data absent: logs/nvidia-smi capture not found under ../shared/data")
    trace = di.load(capture)
    names = dict(zip(trace.series.get_column("series").cast(pl.Int64), trace.series.get_column("name")))
    have = set(names.values())
    assert {"clocks.current.sm", "dmon.pclk", "q.Clocks.SM", "power.draw", "dmon.pwr", "temperature.gpu"} <= have
    used = gpu_series(trace)
    chosen = {q: names[s] for q, s in zip(used.get_column("quantity"), used.get_column("series"))}
    assert used.get_column("device").to_list() == [0, 0, 0]
    assert chosen == {"sm_clock": "clocks.current.sm", "power": "power.draw", "temperature": "temperature.gpu"}


def test_mpiexec_gives_the_clocks_of_one_process(job, tmp_path: Path) -> None:
    """Under ``mpiexec -n 2`` on a store split per rank (the log's samples lie with rank 0 only), as one process."""
    from test_parallel import MPIEXEC, analysis, stores

    if not MPIEXEC.exists():
        pytest.skip("mpiexec of the mpich wheel not installed")
    folder, log, _ = job
    single, parted = stores(di.load([folder, log]), tmp_path, ranks_per_group=1)
    one_doc, two_doc = analysis(single, tmp_path, None), analysis(parted, tmp_path, 2)
    one, two = one_doc["gpu_clocks"], two_doc["gpu_clocks"]
    assert one and {r["device"] for r in one} == {0, 1} and two == one
    steps = one_doc["gpu_step_clocks"]
    assert len(steps) == 4 and any(r["throttled"] for r in steps) and two_doc["gpu_step_clocks"] == steps


def test_one_host_takes_one_series_per_gpu_whatever_host_the_series_names() -> None:
    """On one host, an SM clock series naming the host and one naming none are the same GPU's: one is chosen
    (both would join every kernel of the GPU twice)."""
    from di.engine.gpu_clocks import choose

    found = pl.DataFrame(
        {
            "series": [0, 1, 2],
            "name": ["clocks.current.sm", "gpu0 sm clock", "clocks.current.sm"],
            "host": ["node1", None, "node1"],
            "device": [0, 0, 1],
            "quantity": ["sm_clock"] * 3,
            "pref": [0, 4, 0],
            "len": [10, 50, 10],
        }
    )
    one = choose(found, pl.Series(["node1"]))
    assert one.select("device", "series").rows() == [(0, 0), (1, 2)]
    several = choose(found, pl.Series(["node1", "node2"]))
    assert several.select("host", "device", "series").rows() == [("node1", 0, 0), ("node1", 1, 2)]


@pytest.fixture(scope="module")
def step_job(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[int, tuple[int, int]]]:
    """(trace folder, nvidia-smi log, GPU -> its slow stretch): GPU 0 throttles inside rank 0's second step,
    GPU 1 inside rank 1's first step; each stretch lies on the log's 50 ms grid, so the held readings change
    exactly at its ends."""
    if not TRACE.is_dir():
        pytest.skip("shared test data absent: kineto/hta_trace_filter not found under ../shared/data")
    trace = di.load(TRACE)
    steps = di.analyze(trace, analyses=()).steps.sort("rank", "step")
    assert steps.height == 4  # ProfilerStep#551 and #552 on two ranks

    def inside(rank: int, k: int) -> tuple[int, int]:
        s = steps.filter(pl.col("rank") == rank).row(k, named=True)
        return (s["start_ns"] // PERIOD_NS + 2) * PERIOD_NS, (s["end_ns"] // PERIOD_NS - 1) * PERIOD_NS

    slow = {0: inside(0, 1), 1: inside(1, 0)}
    span = trace.meta["time_range"]
    first = span["start_ns"] // PERIOD_NS * PERIOD_NS - 4 * PERIOD_NS
    lines = ["timestamp, index, name, clocks.sm [MHz], power.draw [W], temperature.gpu"]
    for ts in range(first, span["end_ns"] + 4 * PERIOD_NS, PERIOD_NS):
        for gpu, normal in ((0, FAST), (1, STEADY)):
            mhz, watts, temp = SLOW if slow[gpu][0] <= ts < slow[gpu][1] else normal
            lines.append(f"{stamp(ts)}, {gpu}, NVIDIA A100-SXM4-80GB, {mhz:.0f} MHz, {watts:.2f} W, {temp:.0f}")
    log = tmp_path_factory.mktemp("smi_steps") / "smi.csv"
    log.write_text("\n".join(lines) + "\n")
    return TRACE, log, slow


def expected_steps(trace: di.Trace, slow: dict[int, tuple[int, int]]) -> pl.DataFrame:
    """Per (rank, step): the means the log implies from the step's time inside its GPU's slow stretch."""
    steps = di.analyze(trace, analyses=()).steps.with_columns(pl.col("rank").cast(pl.Int64), device=pl.col("rank"))
    lo = pl.col("device").replace_strict({g: s[0] for g, s in slow.items()})
    hi = pl.col("device").replace_strict({g: s[1] for g, s in slow.items()})
    inside = (pl.min_horizontal("end_ns", hi) - pl.max_horizontal("start_ns", lo)).clip(0)
    dur = pl.col("end_ns") - pl.col("start_ns")

    def mean(i: int) -> pl.Expr:
        normal = pl.when(pl.col("device") == 0).then(FAST[i]).otherwise(STEADY[i])
        return normal + (SLOW[i] - normal) * inside / dur

    top = pl.when(pl.col("device") == 0).then(FAST[0]).otherwise(STEADY[0])
    return steps.select(
        "rank",
        pl.col("step").cast(pl.Int64),
        pl.col("device").cast(pl.Int64),
        dur.alias("duration_ns"),
        inside.alias("below_ns"),
        mean(0).alias("sm_clock_mhz"),
        mean(1).alias("power_w"),
        mean(2).alias("temperature_c"),
        (mean(0) < THROTTLE_SHARE * top).alias("throttled"),
    ).sort("rank", "step", "device")


def test_each_step_gets_its_gpu_clock_and_the_throttled_steps_are_marked(step_job) -> None:
    folder, log, slow = step_job
    trace = di.load([folder, log])
    got_steps = di.analyze(trace, analyses=("gpu_clocks",)).gpu_step_clocks
    want = expected_steps(trace, slow)
    assert got_steps.height == want.height == 4
    keys = ["rank", "step", "device", "duration_ns", "below_ns", "throttled"]
    assert got_steps.select(keys).equals(want.select(keys))
    assert got_steps.get_column("covered_ns").equals(got_steps.get_column("duration_ns"))
    for col in ("sm_clock_mhz", "power_w", "temperature_c"):
        assert (got_steps.get_column(col) - want.get_column(col)).abs().max() < 1e-6, col
    # the throttled steps are exactly the chosen ones: rank 0's second step on GPU 0, rank 1's first on GPU 1
    marked = got_steps.filter("throttled").select("rank", "step").rows()
    assert marked == [(0, 552), (1, 551)]
    assert set(got_steps.get_column("max_sm_clock_mhz")) == {FAST[0], STEADY[0]}
    durations = got_steps.filter(pl.col("rank") == 0).get_column("duration_ns").to_list()
    median = sum(durations) / 2
    assert got_steps.filter(pl.col("rank") == 0).get_column("slowdown").to_list() == pytest.approx(
        [d / median - 1 for d in durations]
    )


def test_a_step_window_keeps_the_clocks_of_its_steps(step_job) -> None:
    folder, log, slow = step_job
    trace = di.load([folder, log])
    whole = di.analyze(trace, analyses=("gpu_clocks",)).gpu_step_clocks
    last = di.analyze(trace, window="steps=-1:", analyses=("gpu_clocks",)).gpu_step_clocks
    assert last.get_column("step").to_list() == [552, 552]
    cols = ["rank", "step", "sm_clock_mhz", "below_ns", "throttled"]
    assert last.select(cols).equals(whole.filter(pl.col("step") == 552).select(cols))
    assert last.get_column("slowdown").to_list() == [0.0, 0.0]  # one step per rank: its own median


def test_analyze_text_json_csv_and_the_report_show_the_step_clocks(step_job, tmp_path: Path, capsys) -> None:
    folder, log, slow = step_job
    engine = di.analyze(di.load([folder, log]), analyses=("gpu_clocks",)).gpu_step_clocks
    assert main(["analyze", str(folder), str(log), "--json", "-"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert pl.DataFrame(doc["gpu_step_clocks"], schema=engine.schema).equals(engine)
    assert main(["analyze", str(folder), str(log), "--csv", str(tmp_path / "csv")]) == 0
    capsys.readouterr()
    csv = pl.read_csv(tmp_path / "csv" / "gpu_step_clocks.csv", schema=engine.schema)
    assert csv.select("rank", "step", "device", "below_ns", "throttled").equals(
        engine.select("rank", "step", "device", "below_ns", "throttled")
    )
    assert main(["analyze", str(folder), str(log)]) == 0
    text = capsys.readouterr().out
    table = text.split("GPU clocks during the slowest steps", 1)[1]
    rows = [[c.strip() for c in ln.strip("│").split("│")] for ln in table.splitlines() if ln.startswith("│")][:4]
    assert {(int(r[0]), int(r[1])) for r in rows if r[5].endswith("*")} == {(0, 552), (1, 551)}
    page = tmp_path / "report.html"
    assert main(["report", str(folder), str(log), "-o", str(page), "--no-plugins"]) == 0
    capsys.readouterr()
    html = page.read_text(encoding="utf-8")
    shown = read_page(html)[0]["gpu_step_clocks"]
    by_key = {(r["rank"], r["step"]): r for r in engine.iter_rows(named=True)}
    assert [(r["rank"], r["step"]) for r in shown] == [
        k for k, _ in sorted(by_key.items(), key=lambda kv: -kv[1]["duration_ns"])
    ]
    for r in shown:
        want = by_key[(r["rank"], r["step"])]
        assert r["below_ns"] == want["below_ns"] and (r["throttled"] == "yes") == want["throttled"]
        assert r["sm_clock_mhz"] == pytest.approx(want["sm_clock_mhz"])
    assert "2 of 4 steps ran throttled" in html
