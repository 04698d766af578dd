"""Device memory in `di diff A B`: run A keeps 8 MiB per step alive (a leak), run B does not; the peak, its change,
the growth per step and the op at the peak side by side in the JSON, the terminal and the page; traces without
allocator events have no memory rows and no table."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from test_memory import BACKWARD, BASE, MIB, kineto_job

import di
from di.engine.memory import MEMORY_EVENT
from di.viewers.diff import diff
from di.viewers.diff.document import validate
from di.viewers.diff.results import MEMORY_HEADLINE_SHARE, memory_headline

STEPS = 4
PEAK_EXTRA = 350 * MIB
"""What a step allocates on top of the memory kept before it (activations and a gradient, see kineto_job)."""


def write_run(path: Path, *, leak_mib: int, allocator: bool = True) -> Path:
    """One rank (0) of :func:`test_memory.kineto_job`, as a single-rank Kineto file; without the allocator's events
    when ``allocator`` is False."""
    job = kineto_job(0, steps=STEPS, leak_mib=leak_mib)
    job["distributedInfo"]["world_size"] = 1
    if not allocator:
        job["traceEvents"] = [e for e in job["traceEvents"] if e["name"] != MEMORY_EVENT]
    path.write_text(json.dumps(job))
    return path


def run_diff(a: Path, b: Path, tmp: Path) -> tuple[str, dict, str]:
    """(terminal text, JSON document, HTML page) of ``di diff a b``."""
    out, page = tmp / "d.json", tmp / "d.html"
    done = subprocess.run(
        [sys.executable, "-m", "di", "diff", str(a), str(b), "--json", str(out), "--html", str(page)],
        cwd=tmp,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads(out.read_text())
    validate(doc)
    return done.stdout, doc, page.read_text()


@pytest.fixture(scope="module")
def leak_vs_fixed(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict, str]:
    tmp = tmp_path_factory.mktemp("memory_diff")
    return run_diff(write_run(tmp / "a.json", leak_mib=8), write_run(tmp / "b.json", leak_mib=0), tmp)


def test_json_has_each_runs_peak_and_the_change(leak_vs_fixed: tuple[str, dict, str]) -> None:
    _, doc, _ = leak_vs_fixed
    rows = {(r["rank"], r["device"]): r for r in doc["memory"]}
    assert set(rows) == {(0, "cuda:0"), (0, "cpu")}
    assert [r["device"] for r in doc["memory"]] == ["cuda:0", "cpu"], "GPUs before the CPU"
    gpu = rows[(0, "cuda:0")]
    a_peak, b_peak = BASE + STEPS * 8 * MIB + PEAK_EXTRA, BASE + PEAK_EXTRA
    assert (gpu["a_peak_bytes"], gpu["b_peak_bytes"]) == (a_peak, b_peak)
    assert gpu["delta_peak_bytes"] == -32 * MIB
    assert gpu["rel_peak"] == pytest.approx(b_peak / a_peak - 1)
    assert gpu["a_growth_bytes_per_step"] == pytest.approx(8 * MIB)
    assert gpu["b_growth_bytes_per_step"] == pytest.approx(0, abs=1e-6)
    assert gpu["a_op"] == gpu["b_op"] == BACKWARD, "the gradient's allocation reaches the peak"
    assert gpu["a_reserved_at_peak_bytes"] == gpu["b_reserved_at_peak_bytes"] == 1536 * MIB
    cpu = rows[(0, "cpu")]
    assert (cpu["a_peak_bytes"], cpu["b_peak_bytes"], cpu["delta_peak_bytes"]) == (4096, 4096, 0)
    assert cpu["a_growth_bytes_per_step"] is None, "host memory moves in one step only"


def test_terminal_shows_the_table(leak_vs_fixed: tuple[str, dict, str]) -> None:
    text, _, _ = leak_vs_fixed
    assert "Peak device memory (MiB)" in text
    table = text[text.index("Peak device memory (MiB)") :]
    assert "1,382.0" in table and "1,350.0" in table and "-32.0" in table and "8.0→0.0" in table
    assert "0.00391" in table, "the host's 4 KiB buffer"
    assert "Peak memory (rank" not in text, "a 2 % change is not a headline"


def test_page_has_the_section_with_exact_bytes(leak_vs_fixed: tuple[str, dict, str]) -> None:
    _, _, page = leak_vs_fixed
    assert 'data-table="memory"' in page and "Peak device memory" in page
    assert f'data-v="{-32 * MIB}"' in page and f'data-v="{BASE + PEAK_EXTRA}"' in page


def test_a_large_change_is_a_headline(tmp_path: Path) -> None:
    """A keeps 40 MiB per step: B's peak is 160 MiB (10.6 %) lower, at least the headline share."""
    text, doc, page = run_diff(
        write_run(tmp_path / "a.json", leak_mib=40), write_run(tmp_path / "b.json", leak_mib=0), tmp_path
    )
    gpu = next(r for r in doc["memory"] if r["device"] == "cuda:0")
    assert gpu["delta_peak_bytes"] == -160 * MIB and abs(gpu["rel_peak"]) >= MEMORY_HEADLINE_SHARE
    assert "Peak memory (rank 0, cuda:0): 1,510.0 → 1,350.0 MiB (-160.0 MiB, -10.6 %)" in text
    assert text.index("Peak memory (rank 0") < text.index("Kernels by name")
    assert "Peak memory of rank 0 cuda:0: 1,510.0 → 1,350.0 MiB (-160.0 MiB, -10.6 %)." in page


def test_headline_needs_five_percent_and_a_peak_in_a() -> None:
    def table(a: int | None, b: int | None) -> pl.DataFrame:
        return pl.DataFrame(
            {"rank": [0], "device": ["cuda:0"], "a_peak_bytes": [a], "b_peak_bytes": [b]},
            schema={"rank": pl.Int32, "device": pl.String, "a_peak_bytes": pl.Int64, "b_peak_bytes": pl.Int64},
        ).with_columns((pl.col("b_peak_bytes") - pl.col("a_peak_bytes")).alias("delta_peak_bytes"))

    assert memory_headline(table(100, 105)) is not None
    assert memory_headline(table(100, 104)) is None
    assert memory_headline(table(100, 90))["delta_peak_bytes"] == -10
    assert memory_headline(table(None, 100)) is None, "a device only in B has no change to rate"
    assert memory_headline(table(0, 100)) is None


def test_traces_without_allocator_events_have_no_memory(tmp_path: Path) -> None:
    a = write_run(tmp_path / "a.json", leak_mib=8, allocator=False)
    b = write_run(tmp_path / "b.json", leak_mib=0, allocator=False)
    text, doc, page = run_diff(a, b, tmp_path)
    assert doc["memory"] == []
    assert "Peak device memory" not in text and "Peak memory" not in text
    assert 'data-table="memory"' not in page
    assert diff(di.load(a), di.load(b)).memory.height == 0


def test_a_device_in_one_run_only_has_nulls_on_the_other_side(tmp_path: Path) -> None:
    a = write_run(tmp_path / "a.json", leak_mib=8)
    b = write_run(tmp_path / "b.json", leak_mib=0, allocator=False)
    m = diff(di.load(a), di.load(b)).memory
    gpu = m.filter(pl.col("device") == "cuda:0").row(0, named=True)
    assert gpu["a_peak_bytes"] == BASE + STEPS * 8 * MIB + PEAK_EXTRA
    assert gpu["b_peak_bytes"] is None and gpu["delta_peak_bytes"] is None and gpu["rel_peak"] is None
    assert (gpu["in_a"], gpu["in_b"]) == (True, False)
