"""Matrix work on the page: per rank and GPU, A's and B's work (TFLOP), kernel time, achieved TFLOP/s and
utilization of the GPU's dense peak."""

from __future__ import annotations

from di.viewers.diff import Diff
from di.viewers.diff.page.cells import ROWS, more, pair
from di.viewers.report.page import Cell, Section, ms, pct, table


def flops_section(d: Diff) -> Section | None:
    from di.viewers.report.flops import rate, tflop

    f = d.flops
    if not f.height:
        return None
    rows = [
        (
            r["rank"],
            r["device"],
            pair(r["a_device_name"], r["b_device_name"]),
            tflop(r["a_flop"]),
            tflop(r["b_flop"]),
            ms(r["a_gpu_ns"]),
            ms(r["b_gpu_ns"]),
            rate(r["a_achieved_tflops"]),
            rate(r["b_achieved_tflops"]),
            pct(r["rel_achieved"]),
            pct(r["a_utilization"]),
            pct(r["b_utilization"]),
            Cell("—", None)
            if r["delta_utilization"] is None
            else Cell(f"{100 * r['delta_utilization']:+.1f}", r["delta_utilization"]),
            pair(r["a_peak_dtype"], r["b_peak_dtype"]),
        )
        for r in f.head(ROWS).iter_rows(named=True)
    ]
    cols = [
        "rank",
        "gpu",
        "device",
        "a_TFLOP",
        "b_TFLOP",
        "a_kernel_ns",
        "b_kernel_ns",
        "a_achieved TFLOP/s",
        "b_achieved TFLOP/s",
        "achieved change %",
        "a_utilization %",
        "b_utilization %",
        "delta points",
        "peak dtype",
    ]
    note = (
        '<p class="note">Counted: matrix products, convolutions and scaled-dot-product attention, from the shapes '
        "the profiler recorded (a multiply-add is 2). achieved: their work over the time their kernels ran; "
        "utilization: their work over the window's steps (or the GPU's span without steps) / the GPU's dense peak for "
        "the dtype doing most of the work (the model FLOP utilization when nothing is recomputed; — for a GPU whose "
        f"peak is unknown). Cells hold the exact operations, ns and fractions.{more(f)}</p>"
    )
    return Section("flops", "Matrix work", table("flops", cols, rows) + note)
