"""The terminal summary of a :class:`di.viewers.diff.Diff` (rich): the biggest changes first, then the tables.

Times are shown in ms, memory in MiB (2^20 bytes), matrix work's rates in TFLOP/s, training phases' shares in % of
the rank's steps; Δ is B - A. Only what changed is listed in the long tables (the JSON and the HTML page hold every
row).
"""

from __future__ import annotations

from typing import Any

import polars as pl

from di.viewers.diff import Diff
from di.viewers.diff.collectives import ALGBW_FORMULA, BUSBW_FORMULA
from di.viewers.diff.sides import by_change
from di.viewers.terminal import mib_text, print_table, tflops_text

TOP = 12
"""Rows per table."""
NAME_CHARS = 70
"""Names are cut to this many characters."""


def biggest_changes(d: Diff, n: int = TOP) -> pl.DataFrame:
    """kind (kernel, op, collective), name, status, a_total_ns, b_total_ns, delta_ns, note: the ``n`` largest |delta_ns|
    over kernels, operators and collectives."""

    def part(df: pl.DataFrame, kind: str, name: pl.Expr, note: pl.Expr) -> pl.DataFrame:
        return df.filter(pl.col("delta_ns") != 0).select(
            pl.lit(kind).alias("kind"),
            name.alias("name"),
            pl.col("status").cast(pl.String),
            "a_total_ns",
            "b_total_ns",
            "delta_ns",
            note.alias("note"),
        )

    renamed = (
        pl.when(pl.col("match") == "op")
        .then(pl.lit("paired by launch stack with ") + pl.col("matched_name"))
        .otherwise(pl.lit(""))
    )
    coll_name = pl.col("op") + pl.lit(" ") + pl.col("bytes").cast(pl.String).fill_null("?") + pl.lit(" B")
    parts = [
        part(d.kernels, "kernel", pl.col("name"), renamed),
        part(d.ops, "op", pl.col("name"), pl.lit("")),
        part(d.collectives, "collective", coll_name, pl.lit("")),
    ]
    return by_change(pl.concat(parts), "delta_ns", "kind", "name").head(n)


def render(d: Diff, console: Any, *, names: tuple[str, str] = ("A", "B")) -> None:
    """Print the summary on a rich console."""
    from rich.markup import escape

    console.print(f"[bold]di diff[/bold] A = {escape(names[0])}  B = {escape(names[1])}  window: {escape(d.window)}")
    console.print(_steps_line(d))
    cp = d.critical_path
    if cp["a_length_ns"] is not None and cp["b_length_ns"] is not None:
        console.print(
            f"Critical path: {_ms(cp['a_length_ns'])} → {_ms(cp['b_length_ns'])} ms ({_signed_ms(cp['delta_ns'])} ms, {_rel(cp['a_length_ns'], cp['b_length_ns'])})"
        )
    for line in (memory_line(d), flops_line(d), phases_line(d)):
        if line:
            console.print(line)
    big = biggest_changes(d)
    t = _table(
        "Biggest changes (total time over all ranks; Δ = B - A)",
        "kind",
        "name",
        "A ms",
        "B ms",
        "Δ ms",
        "Δ %",
        "status",
    )
    for r in big.iter_rows(named=True):
        t.add_row(
            r["kind"],
            _cut(r["name"]),
            _ms(r["a_total_ns"]),
            _ms(r["b_total_ns"]),
            _signed_ms(r["delta_ns"]),
            _rel(r["a_total_ns"], r["b_total_ns"]),
            r["status"] + (f", {_cut(r['note'], 50)}" if r["note"] else ""),
        )
    console.print(t if big.height else "No kernel, operator or collective changed its total time.")
    _named(console, d.kernels, "Kernels by name (GPU kernels, copies, sets)")
    _renamed(console, d)
    _stacks(console, d)
    _named(console, d.ops, "Operators by name (CPU)")
    _collectives(console, d)
    _counters(console, d)
    _communicators(console, d)
    _breakdown(console, d)
    _phases(console, d)
    _gpu_idle(console, d)
    _memory(console, d)
    _flops(console, d)
    _path(console, d)


def _steps_line(d: Diff) -> str:
    a, b = d.step_stat("a", "mean_ns"), d.step_stat("b", "mean_ns")
    if a is None or b is None:
        return f"Step time: {'no steps in A' if a is None else ''}{' and ' if a is None and b is None else ''}{'no steps in B' if b is None else ''}"
    parts = [
        f"{k.removesuffix('_ns')} {_ms(d.step_stat('a', k))} → {_ms(d.step_stat('b', k))} ms ({_signed_ms(d.step_stat('delta', k))}, "
        f"{_rel(d.step_stat('a', k), d.step_stat('b', k))})"
        for k in ("mean_ns", "p50_ns", "p90_ns")
    ]
    return (
        f"[bold]Step time[/bold] ({d.step_stat('a', 'count')} steps in A, {d.step_stat('b', 'count')} in B): "
        + "; ".join(parts)
    )


def _named(console: Any, df: pl.DataFrame, title: str) -> None:
    rows = df.filter(pl.col("status") != "same")
    if not rows.height:
        console.print(f"{title}: no change")
        return
    t = _table(
        f"{title}: {rows.height} changed, added or removed (largest |Δ| first)",
        "name",
        "status",
        "count A→B",
        "A ms",
        "B ms",
        "Δ ms",
        "mean µs A→B",
    )
    for r in rows.head(TOP).iter_rows(named=True):
        t.add_row(
            _cut(r["name"]),
            str(r["status"]),
            f"{r['a_count']}→{r['b_count']}",
            _ms(r["a_total_ns"]),
            _ms(r["b_total_ns"]),
            _signed_ms(r["delta_ns"]),
            f"{_us(r['a_mean_ns'])}→{_us(r['b_mean_ns'])}",
        )
    print_table(console, t)


def _renamed(console: Any, d: Diff) -> None:
    pairs = d.kernels.filter((pl.col("match") == "op") & (pl.col("status") == "removed"))
    if not pairs.height:
        return
    b = d.kernels.select(
        pl.col("name").alias("matched_name"),
        pl.col("b_total_ns").alias("partner_b_ns"),
        pl.col("b_count").alias("partner_b_count"),
    )
    t = _table(
        "Kernels renamed or re-tiled (A's name → B's name, launched from the same CPU call stack)",
        "A name",
        "B name",
        "launched from",
        "A ms",
        "B ms",
        "Δ ms",
    )
    for r in pairs.join(b, on="matched_name").iter_rows(named=True):
        t.add_row(
            _cut(r["name"], 45),
            _cut(r["matched_name"], 45),
            _cut(r["match_stack"], 50),
            _ms(r["a_total_ns"]),
            _ms(r["partner_b_ns"]),
            _signed_ms(r["partner_b_ns"] - r["a_total_ns"]),
        )
    print_table(console, t)


def _stacks(console: Any, d: Diff) -> None:
    rows = d.kernel_stacks.filter(pl.col("delta_ns") != 0)
    if not rows.height:
        return
    t = _table(
        "GPU time by the CPU call stack that launched it (largest |Δ| first)",
        "launched from",
        "A count",
        "B count",
        "A ms",
        "B ms",
        "Δ ms",
    )
    for r in rows.head(TOP).iter_rows(named=True):
        t.add_row(
            _cut(r["stack"], 90),
            str(r["a_count"]),
            str(r["b_count"]),
            _ms(r["a_total_ns"]),
            _ms(r["b_total_ns"]),
            _signed_ms(r["delta_ns"]),
        )
    print_table(console, t)


def _collectives(console: Any, d: Diff) -> None:
    c = d.collectives
    if not c.height:
        console.print("Collectives: none in either run")
        return
    t = _table(
        "Collectives by op and message size (A→B)",
        "op",
        "bytes",
        "ranks",
        "calls",
        "mean µs",
        "algbw GB/s",
        "busbw GB/s",
        "Δ total ms",
    )
    for r in c.head(TOP).iter_rows(named=True):
        t.add_row(
            r["op"],
            "—" if r["bytes"] is None else f"{r['bytes']:,}",
            str(r["b_ranks"] or r["a_ranks"] or "—"),
            f"{r['a_calls']}→{r['b_calls']}",
            f"{_us(r['a_mean_ns'])}→{_us(r['b_mean_ns'])}",
            f"{_gb(r['a_algbw_gbps'])}→{_gb(r['b_algbw_gbps'])}",
            f"{_gb(r['a_busbw_gbps'])}→{_gb(r['b_busbw_gbps'])}",
            _signed_ms(r["delta_ns"]),
        )
    print_table(console, t)
    console.print(f"[dim]{ALGBW_FORMULA}; {BUSBW_FORMULA}[/dim]", soft_wrap=True)


def _counters(console: Any, d: Diff) -> None:
    c = d.counters.filter((pl.col("delta_mean") != 0) | pl.col("delta_mean").is_null())
    if not c.height:
        console.print("Counters: " + ("no change" if d.counters.height else "none in either run"))
        return
    t = _table(
        "Counters (A→B, mean over the window; largest change first)", "where", "counter", "unit", "mean", "Δ", "max"
    )
    for r in c.head(TOP).iter_rows(named=True):
        t.add_row(
            _cut(r["location"], 24),
            _cut(r["name"], 40),
            r["unit"] or "",
            f"{_val(r['a_mean'])}→{_val(r['b_mean'])}",
            _rel(r["a_mean"], r["b_mean"]),
            f"{_val(r['a_max'])}→{_val(r['b_max'])}",
        )
    print_table(console, t)


def _communicators(console: Any, d: Diff) -> None:
    c = d.communicators.filter(pl.col("changed") | ~pl.col("in_a") | ~pl.col("in_b"))
    if not c.height:
        if d.communicators.height:
            console.print("Communicators: the same versions and transports")
        return
    t = _table("Communicators that changed (by size; A→B)", "ranks", "hosts", "NCCL", "inside a node", "across nodes")
    for r in c.head(TOP).iter_rows(named=True):
        t.add_row(
            str(r["nranks"]),
            str(r["hosts"]),
            _pair(r["a_version"], r["b_version"]),
            _pair(r["a_intra_node"], r["b_intra_node"]),
            _pair(r["a_inter_node"], r["b_inter_node"]),
        )
    print_table(console, t)


def _pair(a: str | None, b: str | None) -> str:
    from rich.markup import escape

    return escape(a or "—") if a == b else f"{escape(a or '—')} → {escape(b or '—')}"


def _val(x: float | None) -> str:
    return "—" if x is None else f"{x:,.4g}"


def _gpu_idle(console: Any, d: Diff) -> None:
    from di.engine.gpu_idle import CAUSE_LABELS
    from di.viewers.diff.results import gpu_idle_totals

    tot = gpu_idle_totals(d.gpu_idle).filter(pl.col("delta_ns") != 0)
    if not tot.height:
        return
    t = _table(
        "Why the GPUs are idle: idle time per cause, summed over the GPUs", "cause", "A ms", "B ms", "Δ ms", "Δ %"
    )
    for r in tot.iter_rows(named=True):
        t.add_row(
            CAUSE_LABELS.get(r["cause"], r["cause"]),
            _ms(r["a_time_ns"]),
            _ms(r["b_time_ns"]),
            _signed_ms(r["delta_ns"]),
            _rel(r["a_time_ns"], r["b_time_ns"]),
        )
    print_table(console, t)


def memory_line(d: Diff) -> str | None:
    """The headline of the largest peak-memory change (MiB), when it is at least
    :data:`di.viewers.diff.results.MEMORY_HEADLINE_SHARE` of A's peak; else None."""
    from rich.markup import escape

    from di.viewers.diff.results import memory_headline

    r = memory_headline(d.memory)
    if r is None:
        return None
    return (
        f"Peak memory (rank {r['rank']}, {escape(r['device'])}): {mib_text(r['a_peak_bytes'])} → {mib_text(r['b_peak_bytes'])} MiB "
        f"({_signed_mib(r['delta_peak_bytes'])} MiB, {_rel(r['a_peak_bytes'], r['b_peak_bytes'])})"
    )


def _memory(console: Any, d: Diff) -> None:
    m = d.memory
    if not m.height:
        return
    t = _table(
        "Peak device memory (MiB)",
        "rank",
        "device",
        "A",
        "B",
        "Δ",
        "Δ %",
        "reserved at peak A→B",
        "growth/step A→B",
        "op at peak A → B",
    )
    for r in m.head(TOP).iter_rows(named=True):
        t.add_row(
            str(r["rank"]),
            _cut(r["device"]),
            mib_text(r["a_peak_bytes"]),
            mib_text(r["b_peak_bytes"]),
            _signed_mib(r["delta_peak_bytes"]),
            _rel(r["a_peak_bytes"], r["b_peak_bytes"]),
            f"{mib_text(r['a_reserved_at_peak_bytes'])}→{mib_text(r['b_reserved_at_peak_bytes'])}",
            f"{mib_text(r['a_growth_bytes_per_step'])}→{mib_text(r['b_growth_bytes_per_step'])}",
            _pair(_short(r["a_op"], 40), _short(r["b_op"], 40)),
        )
    print_table(console, t)
    if m.height > TOP:
        console.print(f"[dim]{m.height - TOP} more rank/device rows in the JSON and the HTML page[/dim]")


def flops_line(d: Diff) -> str | None:
    """The headline of the largest change of matrix work's utilization (of the GPU's dense peak, %) with the
    achieved TFLOP/s, when it is at least :data:`di.viewers.diff.results.FLOPS_HEADLINE_POINTS`; else None."""
    from di.viewers.diff.results import flops_headline

    r = flops_headline(d.flops)
    if r is None:
        return None
    return (
        f"Matrix work (rank {r['rank']}, GPU {r['device']}): utilization {_pct(r['a_utilization'])}% → "
        f"{_pct(r['b_utilization'])}% of the {_pair(r['a_peak_dtype'], r['b_peak_dtype'])} peak, achieved "
        f"{tflops_text(r['a_achieved_tflops'])} → {tflops_text(r['b_achieved_tflops'])} TFLOP/s"
    )


def _flops(console: Any, d: Diff) -> None:
    f = d.flops
    if not f.height:
        return
    t = _table("Matrix work per GPU", "rank", "GPU", "util A %", "util B %", "Δ points", "TFLOP/s A", "TFLOP/s B")
    for r in f.head(TOP).iter_rows(named=True):
        delta = r["delta_utilization"]
        t.add_row(
            str(r["rank"]),
            str(r["device"]),
            _pct(r["a_utilization"]),
            _pct(r["b_utilization"]),
            "—" if delta is None else f"{100 * delta:+.1f}",
            tflops_text(r["a_achieved_tflops"]),
            tflops_text(r["b_achieved_tflops"]),
        )
    print_table(console, t)
    console.print("[dim]util %: rate over the window / dense peak; TFLOP/s: achieved while kernels ran[/dim]")
    if f.height > TOP:
        console.print(f"[dim]{f.height - TOP} more rank/GPU rows in the JSON and the HTML page[/dim]")


def phases_line(d: Diff) -> str | None:
    """The headline of the largest change of a training phase's host time (ms, and % of the rank's steps), with the
    GPUs' idle time in it, when it is at least :data:`di.viewers.diff.results.PHASES_HEADLINE_SHARE` of the rank's
    step time in A; else None."""
    from di.viewers.diff.results import phases_headline

    r = phases_headline(d.phases)
    if r is None:
        return None
    idle = ""
    if r["a_gpu_idle_ns"] is not None or r["b_gpu_idle_ns"] is not None:
        idle = f"; GPUs idle in it {_ms(r['a_gpu_idle_ns'])} → {_ms(r['b_gpu_idle_ns'])} ms"
    return (
        f"Training phase (rank {r['rank']}, {r['phase']}): host {_ms(r['a_host_ns'])} → {_ms(r['b_host_ns'])} ms "
        f"({_signed_ms(r['delta_host_ns'])} ms), {_pct(r['a_host_share'])}% → {_pct(r['b_host_share'])}% of its "
        f"steps{idle}"
    )


def _phases(console: Any, d: Diff) -> None:
    p = d.phases
    if not p.height:
        return
    moved = p.filter(
        pl.col("a_host_ns").ne_missing(pl.col("b_host_ns"))
        | pl.col("a_gpu_idle_ns").ne_missing(pl.col("b_gpu_idle_ns"))
    )
    if not moved.height:
        console.print("Training phases: no change")
        return
    t = _table(
        "Training phases that changed: host time (largest |Δ| first)",
        "rank",
        "phase",
        "A ms",
        "B ms",
        "Δ ms",
        "% A→B",
        "idle Δ ms",
    )
    moved = moved.sort(pl.col("delta_host_ns").abs(), descending=True, nulls_last=True, maintain_order=True)
    for r in moved.head(TOP).iter_rows(named=True):
        t.add_row(
            str(r["rank"]),
            r["phase"],
            _ms(r["a_host_ns"]),
            _ms(r["b_host_ns"]),
            _signed_ms(r["delta_host_ns"]),
            f"{_pct(r['a_host_share'])}→{_pct(r['b_host_share'])}",
            _signed_ms(r["delta_gpu_idle_ns"]),
        )
    print_table(console, t)
    console.print("[dim]%: of the rank's steps; idle: the GPUs' idle time during the phase[/dim]")
    if moved.height > TOP:
        console.print(f"[dim]{moved.height - TOP} more changed rank/phase rows in the JSON and the HTML page[/dim]")


def _breakdown(console: Any, d: Diff) -> None:
    from di.viewers.diff.results import breakdown_totals

    tot = breakdown_totals(d.breakdown).filter(pl.col("delta_ns") != 0)
    if not tot.height:
        console.print("Breakdown: no change")
        return
    t = _table(
        "Breakdown: time per state, summed over ranks (gpu: the devices, host: CPU threads)",
        "where",
        "state",
        "A ms",
        "B ms",
        "Δ ms",
        "Δ %",
    )
    for r in tot.iter_rows(named=True):
        t.add_row(
            r["kind"],
            r["state"],
            _ms(r["a_time_ns"]),
            _ms(r["b_time_ns"]),
            _signed_ms(r["delta_ns"]),
            _rel(r["a_time_ns"], r["b_time_ns"]),
        )
    print_table(console, t)
    ov = d.overlap.filter(pl.col("delta_ratio").abs() > 1e-9)
    if ov.height:
        t = _table(
            "Overlap (% of the first activity hidden behind the second)", "rank", "pair", "A %", "B %", "Δ points"
        )
        for r in ov.iter_rows(named=True):
            t.add_row(
                str(r["rank"]), r["pair"], _pct(r["a_ratio"]), _pct(r["b_ratio"]), f"{100 * r['delta_ratio']:+.1f}"
            )
        console.print(t)


def _path(console: Any, d: Diff) -> None:
    for df, col, title in (
        (d.cp_by_category, "category", "Critical path by category"),
        (d.cp_by_name, "name", "Critical path by name"),
    ):
        rows = df.filter(pl.col("delta_ns") != 0)
        if not rows.height:
            continue
        t = _table(f"{title} (largest |Δ| first)", col, "A ms", "B ms", "Δ ms", "A %", "B %")
        for r in rows.head(TOP if col == "name" else 20).iter_rows(named=True):
            t.add_row(
                _cut(r[col]),
                _ms(r["a_contrib_ns"]),
                _ms(r["b_contrib_ns"]),
                _signed_ms(r["delta_ns"]),
                _pct(r["a_share"]),
                _pct(r["b_share"]),
            )
        console.print(t)


def _table(title: str, *cols: str) -> Any:
    from rich.table import Table

    t = Table(title=title, title_justify="left")
    for i, c in enumerate(cols):
        text = c in ("name", "A name", "B name", "launched from")
        left = text or i == 0 or c in ("status", "state", "pair", "op", "kind", "where", "counter", "unit", "NCCL")
        left = left or c in ("inside a node", "across nodes", "device", "op at peak A → B", "phase")
        t.add_column(c, justify="left" if left else "right", overflow="fold", min_width=20 if text else None)
    return t


def _cut(text: str | None, n: int = NAME_CHARS) -> str:
    from rich.markup import escape

    return escape(_short(text, n) or "")


def _short(text: str | None, n: int = NAME_CHARS) -> str | None:
    """``text`` cut to ``n`` characters (not escaped); None stays None."""
    return text if text is None or len(text) <= n else text[: n - 1] + "…"


def _ms(ns: float | None) -> str:
    return "—" if ns is None else f"{ns / 1e6:,.3f}"


def _signed_ms(ns: float | None) -> str:
    return "—" if ns is None else f"{ns / 1e6:+,.3f}"


def _us(ns: float | None) -> str:
    return "—" if ns is None else f"{ns / 1e3:,.1f}"


def _signed_mib(b: float | None) -> str:
    return mib_text(b, "+")


def _gb(x: float | None) -> str:
    return "—" if x is None else f"{x:,.2f}"


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.1f}"


def _rel(a: float | None, b: float | None) -> str:
    if a is None or b is None:
        return "—"
    if not a:
        return "new" if b else "0 %"
    return f"{100 * (b - a) / a:+.1f} %"
