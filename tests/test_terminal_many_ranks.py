"""The terminal summary of a job of many ranks lists the ranks that matter, not every rank.

A 40-rank job whose rank 27 computes 30 ms longer each step (the others wait for it in the allreduce): each per-rank
table of ``di analyze`` lists at most ``RANKS_SHOWN`` ranks, among them the straggler, and says how many it left
out and where they are; ``--json`` keeps every rank.
"""

from __future__ import annotations

import io
import json

import numpy as np
import polars as pl
import pytest
from rich.console import Console

import di
from di.cli import main
from di.engine import analyze
from di.viewers.rows_shown import more_note, unusual_ranks, unusual_rows
from di.viewers.terminal import RANKS_SHOWN, render
from engine_jobs import late_allreduce

RANKS, LATE = 40, 27


@pytest.fixture(scope="module")
def summary() -> str:
    trace = late_allreduce(late_rank=LATE, late_ms=30, ranks=RANKS, steps=3).build()
    out = io.StringIO()
    render(analyze(trace), Console(file=out, width=200, color_system=None))
    return out.getvalue()


def _table(summary: str, title: str) -> tuple[str, list[list[str]]]:
    """The title (its lines joined; rich wraps it to the table's width) and the rows' cells of the table whose title
    starts with ``title``."""
    lines = summary.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith(title))
    top = next(i for i in range(start, len(lines)) if lines[i].startswith("┏"))
    end = next(i for i in range(top, len(lines)) if lines[i].startswith("└"))
    rows = [[c.strip() for c in line.split("│")[1:-1]] for line in lines[top:end] if line.startswith("│")]
    return " ".join(line.strip() for line in lines[start:top]), rows


def _table_ranks(summary: str, title: str) -> tuple[str, list[int]]:
    head, rows = _table(summary, title)
    return head, [int(r[0]) for r in rows if r[0]]


@pytest.mark.parametrize(
    "title, rule",
    [
        ("Temporal breakdown", "those whose scopes are least like the median one"),
        ("Wait states", "those that waited and caused the most"),
        ("Overlap", "those least like the median rank"),
        ("Step times per rank", "those with the longest median step"),
    ],
)
def test_each_per_rank_table_lists_at_most_16_ranks_and_says_so(summary: str, title: str, rule: str) -> None:
    head, ranks = _table_ranks(summary, title)
    assert len(set(ranks)) == RANKS_SHOWN
    assert f"{RANKS_SHOWN} of {RANKS} ranks: {rule} (all in --csv/--json)" in head


@pytest.mark.parametrize("title", ["Temporal breakdown", "Wait states"])
def test_the_straggler_is_among_the_ranks_shown(summary: str, title: str) -> None:
    assert LATE in _table_ranks(summary, title)[1]


def test_the_straggler_row_is_the_one_that_differs(summary: str) -> None:
    """The breakdown row of rank 27 has 92.9% cpu (390 of 420 ms), every other 71.4% (300 of 420)."""
    _, rows = _table(summary, "Temporal breakdown")
    assert rows[0][:4] == ["0", "host", "420.00", "28.6"]  # rank, scope, span ms, comm, cpu, idle
    cpu = {int(r[0]): r[4] for r in rows}
    assert cpu[LATE] == "92.9" and {v for r, v in cpu.items() if r != LATE} == {"71.4"}


def test_json_keeps_every_rank(tmp_path) -> None:
    path = tmp_path / "job.di"
    di.save(late_allreduce(late_rank=LATE, late_ms=30, ranks=RANKS, steps=1).build(), path)
    assert main(["analyze", str(path), "--json", str(tmp_path / "a.json")]) == 0
    doc = json.loads((tmp_path / "a.json").read_text())
    assert sorted(r["rank"] for r in doc["ranks"]) == list(range(RANKS))
    assert all(r["breakdown"] for r in doc["ranks"])


def test_unusual_ranks_scores_each_row_against_its_own_group() -> None:
    """Rank 3's GPU row is ordinary for a GPU but far from the host rows' median: held against its group's median
    it does not count as unusual; rank 5's host row does."""
    ranks = np.repeat(np.arange(8), 2)
    groups = np.tile([0, 1], 8)  # host, GPU
    values = np.where(groups[:, None] == 0, [[0.7, 0.3]], [[0.2, 0.8]]).astype(np.float64)
    values[11] = [0.25, 0.75]  # rank 5's GPU, a little off
    values[10] = [0.1, 0.9]  # rank 5's host, far off
    values[6] = [0.65, 0.35]  # rank 3's host, a little off
    assert unusual_ranks(ranks, values, 2, groups).tolist() == [3, 5]
    assert unusual_ranks(ranks, values, 1, groups).tolist() == [5]
    assert unusual_ranks(ranks, values, 8, groups).tolist() == list(range(8))
    with_nan = values.copy()
    with_nan[0, 0] = np.nan  # null counts as 0: rank 0's host row is 0.7 from the median, second to rank 5's 1.2
    assert unusual_ranks(ranks, with_nan, 2, groups).tolist() == [0, 5]


def test_unusual_rows_and_the_note() -> None:
    values = np.zeros((6, 2))
    values[4] = [1, 1]
    assert unusual_rows(values, 1).tolist() == [4]
    assert unusual_rows(values, 6).tolist() == list(range(6))
    assert more_note(16, 16) == ""
    assert more_note(16, 512) == "; 16 of 512 ranks: those least like the median rank (all in --csv/--json)"


def test_the_imbalance_table_shows_the_most_imbalanced_steps_first() -> None:
    """15 steps whose rank 2 computes 5 ms longer than the others, but 50 ms in step 11: after the whole window's
    rows, the table lists step 11 first, and says how many per-step rows it left out."""
    from di.viewers.terminal.imbalance import IMBALANCE_ROWS_SHOWN

    job = late_allreduce(late_rank=2, late_ms=[50.0 if k == 11 else 5.0 for k in range(15)], steps=15)
    result = analyze(job.build())
    out = io.StringIO()
    render(result, Console(file=out, width=200, color_system=None))
    head, rows = _table(out.getvalue(), "Imbalance across ranks")
    shown = result.imbalance.filter(pl.col("max_ns") > 0).height
    assert len(rows) == IMBALANCE_ROWS_SHOWN < shown
    assert f"{shown - IMBALANCE_ROWS_SHOWN} more in --csv/--json" in head
    whole = [r for r in rows if r[0] == "all"]
    assert rows[: len(whole)] == whole and len(whole) == 3  # comm, cpu, work
    assert [r[0] for r in rows[len(whole) : len(whole) + 2]] == ["11", "11"]
    assert rows[len(whole)][7] == "2"  # the max rank of step 11's work


def test_memory_and_matrix_work_tables_list_the_ranks_that_matter(tmp_path) -> None:
    """20 ranks of a profile with allocator events, rank 13 keeping 300 MiB more each step (the highest peak), and
    20 of one with input shapes, each rank's GEMM slower than the last: the memory tables list 16 ranks with rank
    13; the matrix-work table 16 with the fastest and the slowest ranks, and its operators those ranks' only."""
    from test_flops import flops_job
    from test_memory import kineto_job

    def summary(jobs: list[dict]) -> str:
        paths = []
        for rank, doc in enumerate(jobs):
            paths.append(tmp_path / f"r{rank}-{len(paths)}.json")
            paths[-1].write_text(json.dumps({**doc, "distributedInfo": {"rank": rank, "world_size": len(jobs)}}))
        out = io.StringIO()
        render(analyze(di.load(paths)), Console(file=out, width=250, color_system=None))
        return out.getvalue()

    mem = summary([kineto_job(r, leak_mib=300 if r == 13 else 8) for r in range(20)])
    head, rows = _table(mem, "Device memory")
    assert "16 of 20 ranks: those with the highest peaks (all in --csv/--json)" in head
    assert len({r[0] for r in rows}) == RANKS_SHOWN and "13" in {r[0] for r in rows}
    _, held = _table(mem, "Held at each device's peak")
    assert {r[0] for r in held if r[0]} == {r[0] for r in rows}

    work = summary([flops_job(r) for r in range(20)])
    head, rows = _table(work, "Matrix work")
    assert "16 of 20 ranks: those whose rates are least like the median rank's (all in --csv/--json)" in head
    shown = {int(r[0]) for r in rows}
    assert len(shown) == RANKS_SHOWN and {0, 19} <= shown
    _, ops = _table(work, "Matrix operators by GPU time")
    assert {int(r[0]) for r in ops if r[0]} == shown
