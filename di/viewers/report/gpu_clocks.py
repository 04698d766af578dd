"""GPU clocks, power and temperature next to the longest kernels (the engine's ``gpu_clocks`` result).

Where the trace holds GPU counter series (an nvidia-smi or DCGM log merged with the trace, or ``di record``'s
NVML sampler), each row is one kernel name on one GPU, longest total first: its count and total time, the
GPU's mean SM clock over the kernels' time next to the highest SM clock that GPU showed, the time under 95 % of
it, and the mean power and temperature (:mod:`di.engine.gpu_clocks` has the definitions). A row whose mean SM
clock is under 95 % of the highest is marked throttled. Where the trace has steps, a second table gives the same
per step and GPU, slowest first, next to each step's time against its rank's median step
(:mod:`di.engine.gpu_step_clocks`), and a hint says whether the slow steps are the throttled ones.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from di.viewers.report.page import Cell, Section, ms, num, table

TOP = 25


def _mhz(x: float | None) -> Cell:
    return Cell("—", None) if x is None else Cell(f"{x:,.0f}", float(x))


CLOCK_COLUMNS = ["covered_ns", "sm_clock_mhz", "max_sm_clock_mhz", "below_ns", "power_w", "temperature_c", "throttled"]
"""The columns both tables end with (:func:`_clock_cells`)."""


def _clock_cells(r: dict[str, Any]) -> tuple[Cell | str, ...]:
    """The cells of :data:`CLOCK_COLUMNS` of a kernel's or a step's row (times in ns shown in ms, MHz, W, C)."""
    return (
        ms(r["covered_ns"]),
        _mhz(r["sm_clock_mhz"]),
        _mhz(r["max_sm_clock_mhz"]),
        ms(r["below_ns"]),
        _mhz(r["power_w"]),
        _mhz(r["temperature_c"]),
        "yes" if r["throttled"] else "",
    )


def panel(ctx) -> Section | None:  # noqa: ANN001
    clocks = ctx.result.gpu_clocks
    if clocks is None or not clocks.drop_nulls("sm_clock_mhz").height:
        return None
    body, hints = _kernels(clocks)
    step_body, step_hints = _steps(ctx.result.gpu_step_clocks)
    title = "GPU clocks during the top kernels" + (" and the slowest steps" if step_body else "")
    return Section("gpu_clocks", title, body + step_body, hints + step_hints)


def _kernels(clocks: pl.DataFrame) -> tuple[str, list[str]]:
    """The kernels' table, its note and hint."""
    top = clocks.drop_nulls("sm_clock_mhz").head(TOP)
    columns = ["name", "rank", "device", "count", "total_ns", *CLOCK_COLUMNS]
    rows = [
        (
            r["name"],
            r["rank"],
            r["device"],
            num(r["count"]),
            ms(r["total_ns"]),
            *_clock_cells(r),
        )
        for r in top.iter_rows(named=True)
    ]
    body = table("gpu_clocks", columns, rows)
    body += (
        "<p class=\"note\">Means weighted by time over the kernels' time that the GPU's series cover (a reading "
        "stands until the next one); throttled: mean SM clock under 95 % of the highest the GPU showed. "
        "Kernels of the report's window.</p>"
    )
    hints = []
    slow = top.filter(pl.col("throttled"))
    if slow.height:
        r = slow.row(0, named=True)
        drop = 1 - r["sm_clock_mhz"] / r["max_sm_clock_mhz"]
        hints.append(
            f"Kernel {r['name'][:60]} on rank {r['rank']} (GPU {r['device']}) ran at a mean SM clock of "
            f"{r['sm_clock_mhz']:,.0f} MHz, {100 * drop:.0f} % under the {r['max_sm_clock_mhz']:,.0f} MHz the GPU "
            f"reached ({r['below_ns'] / 1e6:,.1f} ms of it throttled): check power draw against the power limit, "
            "the temperature and nvidia-smi's clocks_event_reasons."
        )
    return body, hints


def _steps(steps: pl.DataFrame | None) -> tuple[str, list[str]]:
    """The steps' table (slowest first), its note and hint: whether the slow steps are the throttled ones."""
    if steps is None or not steps.drop_nulls("sm_clock_mhz").height:
        return "", []
    known = steps.drop_nulls("sm_clock_mhz").sort(
        "duration_ns", "rank", "step", "device", descending=[True, False, False, False]
    )
    columns = ["rank", "step", "device", "duration_ns", "slowdown", *CLOCK_COLUMNS]
    rows = [
        (
            r["rank"],
            r["step"],
            r["device"],
            ms(r["duration_ns"]),
            Cell("—", None) if r["slowdown"] is None else Cell(f"{100 * r['slowdown']:+.1f} %", float(r["slowdown"])),
            *_clock_cells(r),
        )
        for r in known.head(TOP).iter_rows(named=True)
    ]
    body = table("gpu_step_clocks", columns, rows)
    body += (
        "<p class=\"note\">Per step and GPU, slowest first: the means over the step's time; slowdown: the step's "
        "time against its rank's median step in the window.</p>"
    )
    throttled = known.filter(pl.col("throttled"))
    if not throttled.height:
        return body, []
    others = known.filter(~pl.col("throttled"))
    slow = throttled.row(0, named=True)
    text = (
        f"{throttled.height} of {known.height} steps ran throttled; the slowest of them, step {slow['step']} on rank "
        f"{slow['rank']} (GPU {slow['device']}), took {slow['duration_ns'] / 1e6:,.1f} ms"
        + ("" if slow["slowdown"] is None else f" ({100 * slow['slowdown']:+.1f} % against its rank's median)")
        + f" at a mean SM clock of {slow['sm_clock_mhz']:,.0f} MHz of {slow['max_sm_clock_mhz']:,.0f}"
    )
    slow_mean, other_mean = throttled["slowdown"].mean(), others["slowdown"].mean()
    if slow_mean is not None and other_mean is not None:
        text += (
            f"; throttled steps took {slow_mean * 100:+.1f} % on average against their ranks' "
            f"medians, the others {other_mean * 100:+.1f} %"
        )
    return body, [text + ": the GPU's clock, not the program, may explain the slow steps."]
