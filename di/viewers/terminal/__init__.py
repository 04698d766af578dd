"""The terminal summary of an analysis (``di analyze`` without ``--json -``): rich tables, the slowest first.

Reads an :class:`di.engine.Analysis` (and nothing of the engine's internals). A table with nothing to show is one
line saying why, not an empty frame: a text log alone (``di analyze train.log``) has steps and counters but no
program events, so it gets its step times and no breakdown.

Each section is a ``render_*(result, console)`` function in a module of this package named after its analysis
(:mod:`.steps`, :mod:`.breakdown`, :mod:`.gpu_idle` ...); :mod:`.tables` prints a table and writes the text of its
cells, which the report and ``di diff`` viewers use too. The names other modules import are re-exported here.
"""

from __future__ import annotations

from typing import Any

from di.engine import Analysis
from di.viewers.terminal.breakdown import render_breakdown
from di.viewers.terminal.comm_bandwidth import COMM_ROWS_SHOWN, render_comm_bandwidth
from di.viewers.terminal.communicators import COMMS_SHOWN, render_communicators
from di.viewers.terminal.counters import COUNTER_ROWS_SHOWN, render_counters
from di.viewers.terminal.critical_path import render_critical_path
from di.viewers.terminal.flops import FLOP_OPS_SHOWN, OP_LABELS, dims_label, op_label, render_flops, shapeless_text
from di.viewers.terminal.gpu_clocks import render_clocks, render_step_clocks
from di.viewers.terminal.gpu_idle import GAPS_SHOWN, render_gpu_idle
from di.viewers.terminal.imbalance import render_imbalance
from di.viewers.terminal.memory import HOLDERS_SHOWN, holder_label, render_memory
from di.viewers.terminal.overlap import render_overlap
from di.viewers.terminal.phases import PHASE_IDLE_NOTE, render_phases
from di.viewers.terminal.steps import SLOWEST_STEPS_SHOWN, render_step_times
from di.viewers.terminal.tables import (
    NAME_CHARS,
    RANKS_SHOWN,
    UNBOUNDED_WIDTH,
    mib_text,
    print_table,
    short_name,
    size_text,
    tflops_text,
)
from di.viewers.terminal.waits import render_waits

__all__ = [
    "render",
    "print_table",
    "short_name",
    "mib_text",
    "size_text",
    "tflops_text",
    "holder_label",
    "op_label",
    "dims_label",
    "shapeless_text",
    "NAME_CHARS",
    "UNBOUNDED_WIDTH",
    "RANKS_SHOWN",
    "SLOWEST_STEPS_SHOWN",
    "PHASE_IDLE_NOTE",
    "GAPS_SHOWN",
    "HOLDERS_SHOWN",
    "FLOP_OPS_SHOWN",
    "OP_LABELS",
    "COMM_ROWS_SHOWN",
    "COMMS_SHOWN",
    "COUNTER_ROWS_SHOWN",
]


def render(result: Analysis, console: Any, *, title: str = "") -> None:
    """A readable summary on a rich console."""
    console.print(
        f"[bold]di analyze[/bold] {title}  window: {result.window}  steps: {result.steps.height and result.steps.get_column('step').n_unique()}"
    )
    render_step_times(result, console)
    if result.breakdown is not None and not result.breakdown.height:
        console.print(
            "Breakdown, overlap, wait states, critical path: no program events in the window (a text log alone "
            "has none: its steps, counters and communicators are what it gives)"
        )
    else:
        render_breakdown(result, console)
        render_phases(result, console)
        render_gpu_idle(result, console)
        render_overlap(result, console)
        render_waits(result, console)
        render_critical_path(result, console)
    render_memory(result, console)
    render_flops(result, console)
    render_comm_bandwidth(result, console)
    render_imbalance(result, console)
    render_clocks(result, console)
    render_step_clocks(result, console)
    render_communicators(result, console)
    render_counters(result, console)
