"""GPU clocks, power and temperature next to the longest kernels (the engine's ``gpu_clocks`` result).

Where the trace holds GPU counter series (an nvidia-smi or DCGM log merged with the trace, or ``di record``'s
NVML sampler), each row is one kernel name on one GPU, longest total first: its count and total time, the
GPU's mean SM clock over the kernels' time next to the highest SM clock that GPU showed, the time under 95 % of
it, and the mean power and temperature (:mod:`di.engine.gpu_clocks` has the definitions). A row whose mean SM
clock is under 95 % of the highest is marked throttled.
"""

from __future__ import annotations

import polars as pl

from di.viewers.report.page import Cell, Section, ms, num, table

TOP = 25


def _mhz(x: float | None) -> Cell:
    return Cell("—", None) if x is None else Cell(f"{x:,.0f}", float(x))


def panel(ctx) -> Section | None:  # noqa: ANN001
    clocks = ctx.result.gpu_clocks
    if clocks is None or not clocks.drop_nulls("sm_clock_mhz").height:
        return None
    top = clocks.drop_nulls("sm_clock_mhz").head(TOP)
    columns = ["name", "rank", "device", "count", "total_ns", "covered_ns", "sm_clock_mhz", "max_sm_clock_mhz"]
    columns += ["below_ns", "power_w", "temperature_c", "throttled"]
    rows = [
        (
            r["name"],
            r["rank"],
            r["device"],
            num(r["count"]),
            ms(r["total_ns"]),
            ms(r["covered_ns"]),
            _mhz(r["sm_clock_mhz"]),
            _mhz(r["max_sm_clock_mhz"]),
            ms(r["below_ns"]),
            _mhz(r["power_w"]),
            _mhz(r["temperature_c"]),
            "yes" if r["throttled"] else "",
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
    return Section("gpu_clocks", "GPU clocks during the top kernels", body, hints)
