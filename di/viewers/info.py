"""``di info``: what a trace holds, in one screen.

Ranks, hosts, timelines by kind, events by canonical category, time range,
sources (with where each rank came from), what was dropped and why, the
per-file I/O statistics' totals per module (``io_files``: di record, Darshan), and
the scheduler's job rows per state (``jobs``: Slurm).
"""

from __future__ import annotations

from typing import Any

import polars as pl

from di.trace import Trace


def category_counts(events: pl.DataFrame) -> pl.DataFrame:
    """Per category (cat, sorted): events (n) and instants."""
    return events.group_by("cat").agg(pl.len().alias("n"), pl.col("instant").sum().alias("instants")).sort("cat")


def summary(trace: Trace, *, categories: pl.DataFrame | None = None) -> dict[str, Any]:
    """The facts ``di info`` prints, as a JSON-ready dict (times in ns).

    Args:
        categories: :func:`category_counts` of the job's events when counted elsewhere (by the processes of a
            parallel run, :mod:`di.parallel.info`); default: of ``trace.events``.
    """
    meta = trace.meta
    tr = meta.get("time_range", {})
    span = (tr["end_ns"] - tr["start_ns"]) if tr.get("start_ns") is not None else 0
    kinds = trace.locations.group_by("kind").len().sort("kind")
    cats = category_counts(trace.events) if categories is None else categories
    return {
        "ranks": trace.ranks,
        "world_size": meta.get("world_size"),
        "hosts": meta.get("hosts", []),
        "timelines": {str(k): int(n) for k, n in kinds.iter_rows()},
        "events_by_cat": {str(c): int(n) for c, n, _ in cats.iter_rows()},
        "instants": int(cats.get_column("instants").sum()),
        "tables": meta.get("tables", {}),
        "time_range": tr,
        "duration_ns": span,
        "clock": meta.get("clock"),
        "sources": [
            {
                **{k: s.get(k) for k in ("path", "format", "rank", "rank_source", "events", "dropped")},
                "rank_variable": (s.get("info") or {}).get("rank_variable"),
            }
            for s in meta.get("sources", [])
        ],
        "warnings": meta.get("warnings", []),
        "analysis_timelines": _analysis_timelines(trace),
        "io_files": _io_files(trace.io_files),
        "job_states": _job_states(trace.jobs),
    }


def _io_files(files: pl.DataFrame) -> list[dict[str, Any]]:
    """Totals of the per-file I/O statistics (``io_files``) per module (null: di record's shim): rows, files,
    operations, bytes and ns in calls."""
    if not files.height:
        return []
    cols = ["opens", "reads", "writes", "bytes_read", "bytes_written", "read_time_ns", "write_time_ns", "meta_time_ns"]
    agg = files.group_by("module").agg(
        pl.len().alias("rows"), pl.col("file").n_unique().alias("files"), *[pl.col(c).sum() for c in cols]
    )
    return agg.sort("module", nulls_last=True).to_dicts()


def _job_states(jobs: pl.DataFrame) -> dict[str, int]:
    """Rows of the ``jobs`` table per state (its first word: ``CANCELLED by 7`` is ``CANCELLED``; ``?`` where the
    output has no state column or the row no state), most rows first."""
    if not jobs.height:
        return {}
    state = next((c for c in ("state", "st") if c in jobs.columns), None)
    words = jobs.get_column(state).str.split(" ").list.first() if state else pl.repeat(None, jobs.height, eager=True)
    counts = words.fill_null("?").value_counts(sort=True, name="n")
    return {str(k): int(n) for k, n in counts.iter_rows()}


def _analysis_timelines(trace: Trace) -> int:
    from di.analysis_parts import analysis_locs

    return analysis_locs(trace).len()


def render(trace: Trace, console: Any, *, categories: pl.DataFrame | None = None) -> None:
    """Print the summary with rich (``categories``: see :func:`summary`)."""
    from rich.table import Table

    from di.viewers.terminal import print_table

    s = summary(trace, categories=categories)
    dur_ms = s["duration_ns"] / 1e6
    console.print(
        f"[bold]ranks[/bold] {len(s['ranks'])} ({_ranges(s['ranks'])})  world size {s['world_size'] or '?'}  "
        f"hosts {', '.join(s['hosts']) or '?'}  duration {dur_ms:.3f} ms  clock {s['clock']['domain']}"
    )
    console.print("[bold]timelines[/bold] " + ", ".join(f"{k} {v}" for k, v in s["timelines"].items()))
    console.print("[bold]tables[/bold] " + ", ".join(f"{k} {v}" for k, v in s["tables"].items()))
    cats = Table("category", "events", title=None, box=None)
    for c, n in s["events_by_cat"].items():
        cats.add_row(c, f"{n:,}")
    cats.columns[1].justify = "right"
    print_table(console, cats)
    src = Table("source", "format", "rank", "rank from", "events", "dropped", box=None)
    for x in s["sources"]:
        dropped = "; ".join(f"{v} {k}" for k, v in (x["dropped"] or {}).items()) or "nothing"
        rank_from = x["rank_source"] + (f" ({x['rank_variable']})" if x.get("rank_variable") else "")
        src.add_row(str(x["path"]), x["format"], str(x["rank"]), rank_from, f"{x['events']:,}", dropped)
    for column in (src.columns[2], src.columns[4]):
        column.justify = "right"
    print_table(console, src)
    if s["io_files"]:
        io = Table(
            "I/O",
            "files",
            "opens",
            "reads",
            "writes",
            "read B",
            "written B",
            "read ms",
            "write ms",
            "meta ms",
            box=None,
        )
        for m in s["io_files"]:
            io.add_row(
                m["module"] or "di record",
                *(f"{m[k]:,}" for k in ("files", "opens", "reads", "writes", "bytes_read", "bytes_written")),
                *(f"{m[k] / 1e6:,.1f}" for k in ("read_time_ns", "write_time_ns", "meta_time_ns")),
            )
        for column in io.columns[1:]:
            column.justify = "right"
        print_table(console, io)
    if s["job_states"]:
        states = ", ".join(f"{k} {n:,}" for k, n in s["job_states"].items())
        console.print(f"[bold]jobs[/bold] {sum(s['job_states'].values()):,} rows (Slurm): {states}")
    if s["analysis_timelines"]:
        console.print(
            f"[bold]analysis tracks[/bold] {s['analysis_timelines']} timelines added by di (process 'di analysis'); "
            "di analyze and di report leave them out, di convert replaces them"
        )


def _ranges(ranks: list[int]) -> str:
    if not ranks:
        return "none"
    out, start, prev = [], ranks[0], ranks[0]
    for r in ranks[1:] + [None]:  # type: ignore[list-item]
        if r is not None and r == prev + 1:
            prev = r
            continue
        out.append(f"{start}" if start == prev else f"{start}-{prev}")
        if r is not None:
            start = prev = r
    return ",".join(out)
