"""The terminal summary of an analysis (``di analyze`` without ``--json -``): rich tables, the slowest first.

Reads an :class:`di.engine.Analysis` (and nothing of the engine's internals). A table with nothing to show is one
line saying why, not an empty frame: a text log alone (``di analyze train.log``) has steps and counters but no
program events, so it gets its step times and no breakdown.
"""

from __future__ import annotations

import os
from typing import Any

import polars as pl

from di.engine import Analysis
from di.engine.breakdown import STATE_LABELS, STATE_NAMES as STATES
from di.engine.gpu_idle import CAUSE_HELP, CAUSE_LABELS, CAUSES
from di.engine.imbalance import WORK
from di.engine.phases import BACKWARD_PREFIX


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.1f}"


def _ms(ns: float | int | None) -> str:
    return "—" if ns is None else f"{ns / 1e6:,.2f}"


def mib_text(b: float | int | None, sign: str = "") -> str:
    """Bytes as MiB text (2**20 bytes): one decimal, three significant digits under 0.1 MiB (a 4 KiB host buffer is
    not 0.0); ``sign`` "+" for a change."""
    if b is None:
        return "—"
    return f"{b / 2**20:{sign},.1f}" if b == 0 or abs(b) >= 2**20 / 10 else f"{b / 2**20:{sign}.3g}"


NAME_CHARS = 60
"""The most characters of an event name in a table cell (all of it is in ``--csv``/``--json``)."""


def short_name(name: str | None, width: int = NAME_CHARS) -> str:
    """A kernel or function name for a table cell: C++ template arguments and parameter lists folded to ``<…>`` and
    ``(…)`` (``void cutlass::Kernel2<cutlass_80_…>(Params)`` -> ``cutlass::Kernel2<…>(…)``), then cut to ``width``."""
    if name is None:
        return "—"
    text = name.removeprefix("void ")
    out, depth, prev = [], 0, ""
    for ch in text:  # one pass over a name of a table row (at most a few dozen rows)
        opens = ch == "<" or (ch == "(" and prev not in ("", " "))  # "Memcpy DtoD (Device -> Device)" stays whole
        if opens or (ch in "<(" and depth):
            if depth == 0:
                out.append(ch + "…")
            depth += 1
        elif ch in ">)" and depth and prev != "-":
            depth -= 1
            if depth == 0:
                out.append(">" if ch == ">" else ")")
        elif depth == 0:
            out.append(ch)
        prev = ch
    folded = "".join(out).strip() or text
    return folded if len(folded) <= width else folded[: width - 1] + "…"


def print_table(console: Any, table: Any) -> None:
    """Print a rich table whose right-aligned (number) columns are never cut: each keeps the width of its widest
    cell. On a narrow terminal the headers and the text columns wrap or shorten instead, and the cells lose
    their padding when even that does not fit. Written to a file or a pipe (``di analyze x.di > summary.txt``),
    where no window crops the lines, the table is as wide as its cells ask: nothing is cut or wrapped, unless
    ``COLUMNS`` sets a width to keep to."""
    for column in table.columns:
        if column.justify == "right":  # a number is one word: at its width it never wraps
            column.min_width = max((len(str(c)) for c in column.cells), default=0)
    from rich.measure import Measurement

    wide = Measurement.get(console, console.options.update_width(UNBOUNDED_WIDTH), table).maximum
    if wide > console.width and not console.is_terminal and "COLUMNS" not in os.environ:
        narrow, console.width = console.width, wide  # rich's print never goes past the console's width
        try:
            console.print(table)
        finally:
            console.width = narrow
        return
    if wide > console.width:
        table.padding = (0, 0)
    console.print(table)


UNBOUNDED_WIDTH = 1 << 16
"""Columns offered to a table when measuring the width its cells ask for."""
STEP_RANKS_SHOWN = 16
"""Ranks in the step-time table (those with the longest median step first); all are in ``--csv``/``--json``."""
SLOWEST_STEPS_SHOWN = 5
COUNTER_ROWS_SHOWN = 24
"""Counter series shown one per row; with more, one row per counter name (over its timelines)."""


def render(result: Analysis, console: Any, *, title: str = "") -> None:
    """A readable summary on a rich console."""
    console.print(
        f"[bold]di analyze[/bold] {title}  window: {result.window}  steps: {result.steps.height and result.steps.get_column('step').n_unique()}"
    )
    _render_step_times(result, console)
    if result.breakdown is not None and not result.breakdown.height:
        console.print(
            "Breakdown, overlap, wait states, critical path: no program events in the window (a text log alone "
            "has none: its steps, counters and communicators are what it gives)"
        )
    else:
        _render_breakdown(result, console)
        _render_phases(result, console)
        _render_gpu_idle(result, console)
        _render_overlap(result, console)
        _render_waits(result, console)
        _render_path(result, console)
    _render_memory(result, console)
    _render_flops(result, console)
    _render_comm_bandwidth(result, console)
    _render_imbalance(result, console)
    _render_clocks(result, console)
    _render_step_clocks(result, console)
    _render_communicators(result, console)
    _render_counters(result, console)


COMMS_SHOWN = 12


def _render_communicators(result: Analysis, console: Any) -> None:
    """Each communicator's ranks, hosts, channels and transports, then what looks wrong in them."""
    from rich.table import Table

    c = result.communicators
    if c is None or not c.height:
        return
    more = f"; {c.height - COMMS_SHOWN} more in --csv/--json" if c.height > COMMS_SHOWN else ""
    t = Table(title=f"Communicators (connections per transport as NCCL printed it{more})")
    for col in ("comm", "NCCL", "ranks", "hosts", "channels", "inside a node", "across nodes"):
        t.add_column(col, justify="right" if col in ("ranks", "hosts", "channels") else "left", overflow="fold")
    for r in (
        c.sort("nranks", "comm", descending=[True, False], nulls_last=True).head(COMMS_SHOWN).iter_rows(named=True)
    ):
        t.add_row(
            r["comm"],
            r["version"] or "",
            f"{r['members']}/{r['nranks'] if r['nranks'] is not None else '?'}",
            str(r["hosts"]),
            "" if r["nchannels"] is None else str(r["nchannels"]),
            r["intra_node"] or "—",
            r["inter_node"] or "—",
        )
    print_table(console, t)
    from di.viewers.communicator_hints import hints

    for line in hints(c):
        console.print(line)


def _num(x: float | None) -> str:
    return "—" if x is None else f"{x:,.4g}"


def _render_counters(result: Analysis, console: Any) -> None:
    """Each counter series' samples, min, mean, max and last value, those whose value changed first; with more
    than :data:`COUNTER_ROWS_SHOWN` series, one row per name and unit over its timelines."""
    from rich.table import Table

    c = result.counters
    if c is None or not c.height:
        return
    # the series that moved first (utilisation, power, clocks, loss), then the constant ones (sizes, limits)
    c = c.sort(pl.col("max") == pl.col("min"), maintain_order=True)
    odd = bool(c.get_column("nonfinite").sum())  # NaN or infinite readings: a column of their own
    if c.height <= COUNTER_ROWS_SHOWN:
        t = Table(title="Counters in the window (cumulative ones as rates; min to last of the finite readings)")
        cols = ("timeline", "counter", "unit", "samples", *(("NaN/inf",) if odd else ()), "min", "mean", "max", "last")
        for col in cols:
            t.add_column(col, justify="left" if col in ("timeline", "counter", "unit") else "right")
        for r in c.iter_rows(named=True):
            t.add_row(
                r["location"] or "",
                r["name"],
                r["unit"] or "",
                f"{r['samples']:,}",
                *((f"{r['nonfinite']:,}",) if odd else ()),
                *(_num(r[k]) for k in ("min", "mean", "max", "last")),
            )
        print_table(console, t)
        return
    finite = pl.col("samples") - pl.col("nonfinite")  # the readings each series' mean is of
    by_name = (
        c.with_columns((pl.col("mean") * finite).alias("total"), finite.alias("finite"))
        .group_by("name", "unit", maintain_order=True)
        .agg(
            pl.len().alias("timelines"),
            pl.col("samples").sum(),
            pl.col("min").min(),
            (pl.col("total").sum() / pl.col("finite").sum()).alias("mean"),
            pl.col("max").max(),
            pl.col("location").get(pl.col("max").arg_max()).alias("max_at"),
        )
    )
    t = Table(title=f"Counters in the window, {c.height:,} series by name (cumulative ones as rates; all in --csv)")
    for col in ("counter", "unit", "timelines", "samples", "min", "mean", "max", "max on"):
        t.add_column(col, justify="left" if col in ("counter", "unit", "max on") else "right")
    for r in by_name.head(COUNTER_ROWS_SHOWN).iter_rows(named=True):
        t.add_row(
            r["name"],
            r["unit"] or "",
            f"{r['timelines']:,}",
            f"{r['samples']:,}",
            *(_num(r[k]) for k in ("min", "mean", "max")),
            r["max_at"] or "",
        )
    print_table(console, t)


def _render_step_times(result: Analysis, console: Any) -> None:
    """Each rank's step durations (the longest medians first), then the steps slowest against their rank's
    median."""
    from rich.table import Table

    from di.engine.slow_steps import NOTES
    from di.engine.step_times import SLOW_SLOWDOWN

    st = result.step_times
    if st is None or not st.height:
        return
    shown = st.sort("median_ns", "rank", descending=[True, False]).head(STEP_RANKS_SHOWN)
    more = f"; {st.height - shown.height} more ranks in --csv/--json" if st.height > shown.height else ""
    sources = ", ".join(st.get_column("source").unique(maintain_order=True).to_list())
    t = Table(
        title=f"Step times per rank (steps from {sources}; slow = over {1 + SLOW_SLOWDOWN:g}x the rank's median{more})"
    )
    columns = ("rank", "steps", "median ms", "p90 ms", "max ms", "slowest", "cv %", "slow")
    several = st.height > 1
    for c in (*columns, "vs fastest %") if several else columns:
        t.add_column(c, justify="right")
    for r in shown.iter_rows(named=True):
        cells = [
            str(r["rank"]),
            f"{r['steps']:,}",
            _ms(r["median_ns"]),
            _ms(r["p90_ns"]),
            _ms(r["max_ns"]),
            str(r["slowest_step"]),
            _pct(r["cv"]),
            f"{r['slow_steps']:,}",
        ]
        t.add_row(*cells, _pct(r["vs_fastest"])) if several else t.add_row(*cells)
    print_table(console, t)
    slow = result.slow_steps
    if slow is None or not slow.height:
        return
    t = Table(title=f"Slowest steps against their rank's median ({slow.height:,} over {1 + SLOW_SLOWDOWN:g}x)")
    why = slow.select(pl.any_horizontal(pl.col(NOTES).is_not_null()).any()).item()
    for c in ("rank", "step", "label", "ms", "vs median %", *(("in the step",) if why else ())):
        t.add_column(c, justify="left" if c in ("label", "in the step") else "right")
    for r in (
        slow.sort("slowdown", "rank", "step", descending=[True, False, False])
        .head(SLOWEST_STEPS_SHOWN)
        .iter_rows(named=True)
    ):
        cells = [str(r["rank"]), str(r["step"]), r["label"] or "", _ms(r["duration_ns"]), _pct(r["slowdown"])]
        notes = "; ".join(r[c] for c in NOTES if r[c])
        t.add_row(*cells, notes) if why else t.add_row(*cells)
    print_table(console, t)


PHASE_IDLE_NOTE = 0.05
"""A note under the phases table names the rank and phase whose GPUs sit idle longest when that is at least this share
of the rank's time."""


def _render_phases(result: Analysis, console: Any) -> None:
    """Each rank's share of its steps in each training phase, with the share its GPUs sat idle in it."""
    from rich.table import Table

    from di.engine.phases import PHASES

    ph = result.phases
    if ph is None or not ph.height:
        return
    whole = ph.filter(pl.col("step").is_null())
    present = [p for p in PHASES if p in set(whole.get_column("phase").to_list())]
    ranks = whole.get_column("rank").unique().sort()
    shown = ranks.head(STEP_RANKS_SHOWN).to_list()
    more = f"; {ranks.len() - len(shown)} more ranks in --csv/--json" if ranks.len() > len(shown) else ""
    gpu = whole.get_column("gpu_ns").null_count() < whole.height
    how = "; GPU idle: the part with the rank's GPUs idle" if gpu else ""
    t = Table(title=f"Training phases: % of each rank's steps on the host{how}{more}")
    for c in ("rank", "time ms", *(("",) if gpu else ()), *present):
        t.add_column(c, justify="left" if c == "" else "right")
    cells = {(r["rank"], r["phase"]): r for r in whole.iter_rows(named=True)}
    for rank in shown:
        rows = [cells.get((rank, p)) for p in present]
        time_ns = next(r["time_ns"] for r in rows if r is not None)
        host = [_pct(r["host_share"]) if r is not None else "—" for r in rows]
        if not gpu:
            t.add_row(str(rank), _ms(time_ns), *host)
            continue
        idle = [
            _pct(r["gpu_idle_ns"] / time_ns) if r is not None and r["gpu_idle_ns"] is not None and time_ns else "—"
            for r in rows
        ]
        t.add_row(str(rank), _ms(time_ns), "host", *host)
        t.add_row("", "", "GPU idle", *idle)
    print_table(console, t)
    worst = (
        whole.filter(pl.col("gpu_idle_ns").is_not_null() & (pl.col("time_ns") > 0))
        .with_columns((pl.col("gpu_idle_ns") / pl.col("time_ns")).alias("idle"))
        .sort("idle", "rank", descending=[True, False])
        .head(1)
    )
    for r in worst.filter(pl.col("idle") >= PHASE_IDLE_NOTE).iter_rows(named=True):
        console.print(
            f"Rank {r['rank']}'s GPUs sat idle {_ms(r['gpu_idle_ns'])} ms ({_pct(r['idle'])}% of its steps) in its "
            f"{r['phase']} phase."
        )


def _render_breakdown(result: Analysis, console: Any) -> None:
    from rich.table import Table

    if result.breakdown is None:
        return
    wide = result.breakdown.pivot(on="state", index=["rank", "scope", "step", "span_ns"], values="share").sort(
        "rank", "scope", "step", nulls_last=False
    )
    shown = [s for s in STATES if s == "idle" or (s in wide.columns and (wide.get_column(s).fill_null(0) > 0).any())]
    hidden = [STATE_LABELS.get(s, s) for s in STATES if s not in shown]
    t = Table(
        title="Temporal breakdown (% of each scope's span; states exclusive, never summed overlaps)",
        caption=f"0.0 everywhere: {', '.join(hidden)}" if hidden else None,
    )
    for c in ("rank", "scope", *(("step",) if wide.get_column("step").is_not_null().any() else ()), "span ms"):
        t.add_column(c, justify="right")
    for s in shown:
        t.add_column(STATE_LABELS.get(s, s), justify="right")
    per_step = "step" in [c.header for c in t.columns]
    for r in wide.iter_rows(named=True):
        t.add_row(
            str(r["rank"]),
            r["scope"],
            *(("" if r["step"] is None else str(r["step"]),) if per_step else ()),
            _ms(r["span_ns"]),
            *(_pct(r.get(s)) for s in shown),
        )
    print_table(console, t)


GAPS_SHOWN = 5
"""Longest GPU idle gaps in the terminal (more in ``--json``/``--csv``)."""


def _render_gpu_idle(result: Analysis, console: Any) -> None:
    """Each GPU's idle time by cause (the whole window's rows), then its longest gaps."""
    from rich.table import Table

    idle = result.gpu_idle
    if idle is None or not idle.height:
        return
    whole = idle.filter(pl.col("step").is_null())
    wide = whole.pivot(on="cause", index=["rank", "scope", "idle_ns", "span_ns"], values="share").sort("rank", "scope")
    shown = [c for c in CAUSES if c in wide.columns and (wide.get_column(c).fill_null(0) > 0).any()]
    t = Table(
        title="Why the GPUs are idle (% of each GPU's idle time)",
        caption="; ".join(f"{CAUSE_LABELS[c]}: {CAUSE_HELP[c]}" for c in shown),
    )
    for c in ("rank", "gpu", "idle ms", "% span", *(CAUSE_LABELS[c] for c in shown)):
        t.add_column(c, justify="right")
    for r in wide.iter_rows(named=True):
        t.add_row(
            str(r["rank"]),
            r["scope"],
            _ms(r["idle_ns"]),
            _pct(r["idle_ns"] / r["span_ns"] if r["span_ns"] else None),
            *(_pct(r.get(c)) for c in shown),
        )
    print_table(console, t)
    gaps = result.gpu_idle_gaps
    if gaps is None or not gaps.height:
        return
    g = Table(title="Longest GPU idle gaps (the work that ended each, its launch and the operator that launched it)")
    for c in ("rank", "gpu", "ms", "cause", "next", "launch", "operator"):
        g.add_column(c, justify="right" if c in ("rank", "gpu", "ms") else "left")
    for r in gaps.head(GAPS_SHOWN).iter_rows(named=True):
        g.add_row(
            str(r["rank"]),
            str(r["device"]),
            _ms(r["dur_ns"]),
            CAUSE_LABELS[r["cause"]],
            short_name(r["next"], 40),
            short_name(r["launch"], 24),
            short_name(r["operator"], 32),
        )
    print_table(console, g)


HOLDERS_SHOWN = 5
"""Rows of the held-at-the-peak table per device (all of :data:`di.engine.memory.HOLDERS_SHOWN` are in
``--csv``/``--json``)."""


def holder_label(row: dict[str, Any]) -> str:
    """What a row of :func:`di.engine.memory.memory_holders` names: the operator (and module) that allocated, or
    what the trace cannot tell apart."""
    if row["kind"] == "before_trace":
        return "(before the trace)"
    if row["kind"] == "rest":
        return "(the other operators)"
    if row["op"] is None and row["module"] is None:
        return "(no operator)"
    op = row["op"]
    if op is not None and op.startswith(BACKWARD_PREFIX):  # the autograd node that ran: AddmmBackward0
        op = op.removeprefix(BACKWARD_PREFIX)
    op = short_name(op, 40) if op is not None else "—"
    return op if row["module"] is None else f"{op} in {row['module'].removeprefix('nn.Module: ')}"


def _render_memory(result: Analysis, console: Any) -> None:
    """Each device's allocator peak and what held the memory then (traces with allocator events)."""
    from rich.table import Table

    mem = result.memory
    if mem is None or not mem.height:
        return
    whole = mem.filter(pl.col("step").is_null())
    t = Table(
        title="Device memory (the framework's allocator, MiB)",
        caption="reserved: held by the allocator at the peak (allocated + cached); growth: per step, of the memory "
        "left at each step's end",
    )
    for c in ("rank", "device", "peak", "reserved", "growth", "step", "at the peak"):
        t.add_column(c, justify="left" if c == "at the peak" else "right")
    for r in whole.iter_rows(named=True):
        t.add_row(
            str(r["rank"]),
            r["device"],
            mib_text(r["peak_bytes"]),
            mib_text(r["reserved_at_peak_bytes"]),
            mib_text(r["growth_bytes_per_step"]),
            "—" if r["peak_step"] is None else str(r["peak_step"]),
            holder_label({**r, "kind": "allocated"}),
        )
    print_table(console, t)
    held = result.memory_holders
    if held is None or not held.height:
        return
    h = Table(title="Held at each device's peak (allocations alive then, by the operator and module that made them)")
    for c in ("rank", "device", "MiB", "%", "allocs", "phase", "allocated by"):
        h.add_column(c, justify="left" if c in ("phase", "allocated by") else "right")
    shown = held.filter(pl.col("bytes").rank("ordinal", descending=True).over("rank", "device") <= HOLDERS_SHOWN)
    for r in shown.iter_rows(named=True):
        h.add_row(
            str(r["rank"]),
            r["device"],
            mib_text(r["bytes"]),
            _pct(r["share"]),
            "—" if r["allocations"] is None else f"{r['allocations']:,}",
            r["phase"] or "—",
            holder_label(r),
        )
    print_table(console, h)


FLOP_OPS_SHOWN = 8
"""Rows of the operator table per rank (all are in ``--csv``/``--json``)."""


def tflops_text(value: float | None) -> str:
    """TFLOP/s with three significant digits (``12.7``, ``0.418``); — for null."""
    if value is None:
        return "—"
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


OP_LABELS = (
    ("aten::_scaled_dot_product_flash_attention", "sdpa flash"),
    ("aten::_scaled_dot_product_efficient_attention", "sdpa mem-eff"),
    ("aten::_scaled_dot_product_cudnn_attention", "sdpa cudnn"),
    ("aten::convolution_backward", "conv backward"),
    ("aten::convolution", "conv"),
    ("aten::", ""),
)
"""Short names of the counted operators (a prefix and what it becomes; ``_backward`` is kept as `` backward``)."""


def op_label(op: str) -> str:
    """``aten::_scaled_dot_product_flash_attention_backward`` as ``sdpa flash backward``, ``aten::addmm`` as
    ``addmm``."""
    for prefix, short in OP_LABELS:
        if op.startswith(prefix):
            rest = op.removeprefix(prefix)
            return (short + rest.replace("_backward", " backward")).strip() if short else rest
    return op


def dims_label(dims: str | None) -> str:
    """An ``Input Dims`` text as its tensors' shapes (``[[512],[141,512],[512,512],[],[]]`` as
    ``512 141x512 512x512``); the text itself where it is not such a list."""
    import json

    try:
        shapes = json.loads(dims) if dims else None
        return " ".join("x".join(str(int(d)) for d in shape) for shape in shapes if shape)
    except (ValueError, TypeError):
        return dims or "—"


def shapeless_text(calls: int) -> str:
    """What a trace whose matrix operators have no recorded shapes says about them."""
    return (
        f"{calls:,} matrix-operator calls (matmul, conv, attention) were recorded without their input shapes; "
        "PyTorch's profiler with record_shapes=True records them, and di then counts their work against the GPU's peak."
    )


def _render_flops(result: Analysis, console: Any) -> None:
    """Each GPU's matrix-operator work against its peak, and the operators by GPU time (traces with shapes)."""
    from rich.table import Table

    rates = result.flops
    if rates is None or not rates.height:
        return
    if rates.get_column("flop").null_count() == rates.height:  # a profile without record_shapes: nothing to count
        calls = rates.filter(pl.col("step").is_null()).get_column("calls").sum()
        console.print(f"Matrix work: {shapeless_text(calls)}")
        return
    t = Table(
        title="Matrix work (matmul, conv, attention; TFLOP/s)",
        caption="achieved: while their kernels ran; rate: over the steps (or the GPU's span); util: rate / the "
        "GPU's dense peak (MFU when nothing is recomputed)",
    )
    for c in ("rank", "gpu", "calls", "TFLOP", "achieved", "rate", "peak", "util"):
        t.add_column(c, justify="right")
    for r in rates.filter(pl.col("step").is_null()).iter_rows(named=True):
        peak = "—" if r["peak_tflops"] is None else f"{tflops_text(r['peak_tflops'])} {r['peak_dtype']}"
        t.add_row(
            str(r["rank"]),
            str(r["device"]),
            f"{r['calls']:,}" + (f" ({r['unknown_calls']:,} ?)" if r["unknown_calls"] else ""),
            "—" if r["flop"] is None else f"{r['flop'] / 1e12:.3g}",
            tflops_text(r["achieved_tflops"]),
            tflops_text(r["flop_rate_tflops"]),
            peak,
            _pct(r["utilization"]),
        )
    print_table(console, t)
    ops = result.flops_ops
    if ops is None or not ops.height:
        return
    o = Table(
        title="Matrix operators by GPU time (per input shape)",
        caption="% roof: of the roofline, min(peak, flop per byte x the GPU's bandwidth); m: memory-bound",
    )
    for c in ("rank", "operator", "dtype", "calls", "GPU ms", "TFLOP/s", "% roof", "input shapes"):
        o.add_column(c, justify="left" if c in ("operator", "input shapes", "dtype") else "right")
    shown = ops.filter(pl.int_range(pl.len()).over("rank") < FLOP_OPS_SHOWN)
    for r in shown.iter_rows(named=True):
        o.add_row(
            str(r["rank"]),
            short_name(op_label(r["op"]), 20),
            r["dtype"] or "—",
            f"{r['calls']:,}",
            f"{r['gpu_ns'] / 1e6:.3f}",
            tflops_text(r["tflops"]),
            _pct(r["of_attainable"]) + ("m" if r["bound"] == "memory" else ""),
            short_name(dims_label(r["dims"]), 22),
        )
    print_table(console, o)


COMM_ROWS_SHOWN = 10
"""Collective groups shown (the most total call time first; all are in ``--csv``/``--json``)."""


def _render_comm_bandwidth(result: Analysis, console: Any) -> None:
    """The collectives' bus bandwidth over the calls and once all members had arrived (traces with collectives)."""
    from rich.table import Table

    groups = result.comm_bandwidth
    if groups is None or not groups.height:
        return
    t = Table(
        title="Collective bandwidth (busbw, GB/s)",
        caption="call: over each rank's call, as nccl-tests; xfer: from the last member's arrival to the end; "
        "skew: last arrival less first; n: ranks",
    )
    for c in ("op", "size", "n", "scope", "calls", "call ms", "skew ms", "call", "xfer"):
        t.add_column(c, justify="left" if c in ("op", "scope") else "right")
    for r in groups.head(COMM_ROWS_SHOWN).iter_rows(named=True):
        t.add_row(
            short_name(r["op"], 14),
            size_text(r["bytes"]),
            "—" if r["ranks"] is None else str(r["ranks"]),
            (r["scope"] or "—").removesuffix("-node"),
            f"{r['calls']:,}",
            "—" if r["mean_call_ns"] is None else f"{r['mean_call_ns'] / 1e6:.3f}",
            "—" if r["mean_skew_ns"] is None else f"{r['mean_skew_ns'] / 1e6:.3f}",
            _gbps(r["busbw_gbps"]),
            _gbps(r["transfer_busbw_gbps"]),
        )
    print_table(console, t)


def size_text(value: int | None) -> str:
    """Bytes in the largest binary unit they reach (``8 B``, ``1.5 KiB``, ``30.0 MiB``, ``2.00 GiB``)."""
    if value is None:
        return "—"
    for unit, scale, fmt in (("GiB", 2**30, "{:.2f}"), ("MiB", 2**20, "{:.1f}"), ("KiB", 2**10, "{:.1f}")):
        if abs(value) >= scale:
            return f"{fmt.format(value / scale)} {unit}"
    return f"{value} B"


def _gbps(value: float | None) -> str:
    """GB/s: whole from 100, three significant digits from 1, else four decimals."""
    if value is None:
        return "—"
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}" if value >= 1 else f"{value:.4f}"


def _render_overlap(result: Analysis, console: Any) -> None:
    from rich.table import Table

    if result.overlap is None:
        return
    t = Table(title="Overlap (% of the first activity hidden behind the second; — = undefined)")
    pairs = ("comm_compute", "memcpy_compute", "io_compute", "cpu_gpu")
    for c in ("rank", "step", *pairs):
        t.add_column(c, justify="right")
    wide = result.overlap.pivot(on="pair", index=["rank", "step"], values="ratio").sort(
        "rank", "step", nulls_last=False
    )
    for r in wide.iter_rows(named=True):
        t.add_row(str(r["rank"]), "" if r["step"] is None else str(r["step"]), *(_pct(r.get(p)) for p in pairs))
    print_table(console, t)


def _render_clocks(result: Analysis, console: Any, top: int = 10) -> None:
    """The longest kernels' GPU clock, power and temperature (where the trace has such series)."""
    from rich.table import Table

    clocks = result.gpu_clocks
    if clocks is None or not clocks.drop_nulls("sm_clock_mhz").height:
        return
    t = Table(title="GPU clocks during the longest kernels (mean over their time; * = under 95 % of the GPU's highest)")
    for c in ("rank", "gpu", "kernel", "total ms", "SM MHz", "max MHz", "under ms", "W", "C"):
        t.add_column(c, justify="left" if c == "kernel" else "right")
    for r in clocks.drop_nulls("sm_clock_mhz").head(top).iter_rows(named=True):
        t.add_row(
            str(r["rank"]),
            str(r["device"]),
            short_name(r["name"]),
            _ms(r["total_ns"]),
            *_clock_cells(r),
        )
    print_table(console, t)


def _clock_cells(r: dict) -> tuple[str, ...]:
    """SM MHz (``*``: throttled), max MHz, ms under 95 % of it, W and °C of a kernels' or a step's row."""
    return (
        f"{r['sm_clock_mhz']:,.0f}{'*' if r['throttled'] else ''}",
        f"{r['max_sm_clock_mhz']:,.0f}",
        _ms(r["below_ns"]),
        "" if r["power_w"] is None else f"{r['power_w']:,.0f}",
        "" if r["temperature_c"] is None else f"{r['temperature_c']:,.0f}",
    )


def _render_step_clocks(result: Analysis, console: Any, top: int = 12) -> None:
    """The slowest steps' GPU clock, power and temperature (where the trace has steps and such series)."""
    from rich.table import Table

    clocks = result.gpu_step_clocks
    if clocks is None or not clocks.drop_nulls("sm_clock_mhz").height:
        return
    t = Table(title="GPU clocks during the slowest steps (mean over the step; * = under 95 % of the GPU's highest)")
    for c in ("rank", "step", "gpu", "step ms", "vs median %", "SM MHz", "max MHz", "under ms", "W", "C"):
        t.add_column(c, justify="right")
    rows = clocks.drop_nulls("sm_clock_mhz").sort(
        "duration_ns", "rank", "step", "device", descending=[True, False, False, False]
    )
    for r in rows.head(top).iter_rows(named=True):
        t.add_row(
            str(r["rank"]),
            str(r["step"]),
            str(r["device"]),
            _ms(r["duration_ns"]),
            _pct(r["slowdown"]),
            *_clock_cells(r),
        )
    print_table(console, t)


def _render_imbalance(result: Analysis, console: Any) -> None:
    from rich.table import Table

    imb = result.imbalance
    if imb is None or not imb.height:
        return
    t = Table(
        title=f"Imbalance across ranks (work = {' + '.join(STATE_LABELS.get(w, w) for w in WORK)}; max rank of work = straggler)"
    )
    for c in ("step", "side", "state", "max ms", "mean ms", "max/mean-1 %", "(max-mean)/max %", "max rank"):
        t.add_column(c, justify="right")
    rows = imb.filter(pl.col("max_ns") > 0).sort("step", "side", "state", nulls_last=False)
    for r in rows.head(40).iter_rows(named=True):
        t.add_row(
            "all" if r["step"] is None else str(r["step"]),
            r["side"],
            r["state"],
            _ms(r["max_ns"]),
            _ms(r["mean_ns"]),
            _pct(r["imbalance"]),
            _pct(r["percent_imbalance"]),
            str(r["max_rank"]),
        )
    print_table(console, t)


def _render_waits(result: Analysis, console: Any) -> None:
    from rich.table import Table

    w = result.wait_states
    if w is None:
        return
    if not w.height:
        console.print("Wait states: none (no messages or collectives with waits in the window)")
        return
    t = Table(title="Wait states (Scalasca): time waited, and time caused to others")
    for c in ("rank", "kind", "waited ms", "caused ms"):
        t.add_column(c, justify="right")
    waited = w.group_by("rank", "kind").agg(pl.col("wait_ns").sum().alias("waited"))
    caused = w.group_by(pl.col("cause_rank").alias("rank"), "kind").agg(pl.col("wait_ns").sum().alias("caused"))
    both = waited.join(caused, on=["rank", "kind"], how="full", coalesce=True).fill_null(0).sort("rank", "kind")
    for r in both.iter_rows(named=True):
        t.add_row(str(r["rank"]), r["kind"], _ms(r["waited"]), _ms(r["caused"]))
    print_table(console, t)


def _render_path(result: Analysis, console: Any) -> None:
    from rich.table import Table

    cp = result.critical_path
    if not cp:
        return
    s = cp["summary"]
    if not s["events"]:
        console.print("Critical path: none (no program events in the window)")
        return
    console.print(
        f"[bold]Critical path[/bold]: {_ms(s['length_ns'])} ms of a {_ms(s['window_span_ns'])} ms window, "
        f"{s['events']:,} events on it"
        + (f", {s['dropped_edges']:,} edges dropped (pointing back in time)" if s["dropped_edges"] else "")
    )
    for key, label in (("by_category", "category"), ("by_rank", "rank"), ("by_name", "name")):
        t = Table(title=f"Critical path by {label}")
        t.add_column(label)
        t.add_column("ms", justify="right")
        t.add_column("%", justify="right")
        for r in cp[key].head(8).iter_rows(named=True):
            if key == "by_name":
                label_text = short_name(r["name"]) if r["name"] is not None else "(no event: GPU gaps, launches)"
            else:
                label_text = str(r[key.removeprefix("by_")] if key != "by_category" else r["category"])
            t.add_row(
                label_text,
                _ms(r["contrib_ns"]),
                _pct(r["share"]),
            )
        print_table(console, t)
