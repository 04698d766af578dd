"""The self-contained HTML page of a :class:`di.viewers.diff.Diff`, built with the report's page helpers.

Everything is inline (:func:`di.viewers.report.page.render_page`: CSS, the
sort script, SVG), nothing is fetched. Numeric cells carry their exact value
in ``data-v`` (ns, bytes and floating-point operations as integers; memory is shown in MiB, 2^20 bytes, work in
TFLOP, 10^12 operations) as in ``di report``, so the page can be checked against ``di diff --json``.
"""

from __future__ import annotations

import html
import time
from typing import Any

import polars as pl

from di.viewers.diff import Diff
from di.viewers.diff.collectives import ALGBW_FORMULA, BUSBW_FORMULA
from di.viewers.diff.results import breakdown_totals, flops_headline, memory_headline
from di.viewers.diff.terminal import biggest_changes
from di.viewers.report.page import (
    Cell,
    Section,
    mib,
    ms,
    new_figure,
    num,
    pct,
    render_page,
    svg_plot,
    table,
)

ROWS = 200
"""Rows per table at most (the JSON holds all)."""
MIB = 2**20
"""Bytes in a MiB."""
NAMED = [
    "name",
    "cat",
    "status",
    "a_count",
    "b_count",
    "a_total_ns",
    "b_total_ns",
    "delta_ns",
    "a_mean_ns",
    "b_mean_ns",
]


def build_page(d: Diff, *, names: tuple[str, str] = ("A", "B")) -> str:
    """The HTML document; ``names``: how A and B are shown."""
    sections = [
        s
        for s in (
            _summary(d, names),
            _changes(d),
            _kernels(d),
            _stacks(d),
            _named(d.ops, "ops", "Operators (CPU) by name"),
            _collectives(d),
            _counters(d),
            _communicators(d),
            _breakdown(d),
            _phases(d),
            _gpu_idle(d),
            _memory(d),
            _flops(d),
            _path(d),
        )
        if s is not None
    ]
    title = f"di diff: {names[0]} → {names[1]}"
    return render_page(
        title,
        f"A = {names[0]} · B = {names[1]} · window {d.window} · Δ = B - A · di diff {time.strftime('%Y-%m-%d %H:%M')}",
        sections,
    )


def _summary(d: Diff, names: tuple[str, str]) -> Section:
    label = {
        "count": "steps",
        "mean_ns": "mean step (ms)",
        "p50_ns": "p50 step (ms)",
        "p90_ns": "p90 step (ms)",
        "min_ns": "shortest step (ms)",
        "max_ns": "longest step (ms)",
    }
    rows = [
        (
            label[s],
            _cell(s, d.step_stat("a", s)),
            _cell(s, d.step_stat("b", s)),
            _cell(s, d.step_stat("delta", s)),
            pct(_ratio(d, s)),
        )
        for s in label
    ]
    cp = d.critical_path
    rows.append(
        (
            "critical path (ms)",
            ms(cp["a_length_ns"]),
            ms(cp["b_length_ns"]),
            ms(cp["delta_ns"]),
            pct(
                None
                if not cp["a_length_ns"] or cp["b_length_ns"] is None
                else cp["b_length_ns"] / cp["a_length_ns"] - 1
            ),
        )
    )
    body = f"<p class=\"note\">A = {html.escape(names[0])}; B = {html.escape(names[1])}. A step's time: from the first rank's start to the last rank's end.</p>"
    body += table("steps", ["stat", "A", "B", "delta", "change %"], rows, sortable=False)
    times = d.step_times
    if times.height:
        fig = new_figure(9, 2.6)
        ax = fig.add_subplot()
        for run, color in (("a", "#8d99ae"), ("b", "#5c6bc0")):
            t = times.filter(pl.col("run") == run)
            ax.plot(
                range(t.height),
                [v / 1e6 for v in t.get_column("time_ns").to_list()],
                marker="o",
                color=color,
                label=run.upper(),
            )
        ax.set_xlabel("step (in window order)")
        ax.set_ylabel("ms")
        ax.legend()
        body += svg_plot(fig, "step time of A and B")
    hints = list(d.notes)
    a, b = d.step_stat("a", "mean_ns"), d.step_stat("b", "mean_ns")
    if a and b is not None:
        hints.insert(0, f"Mean step time {a / 1e6:,.3f} → {b / 1e6:,.3f} ms ({100 * (b - a) / a:+.1f} %).")
    peak = memory_headline(d.memory)
    if peak is not None:
        hints.append(
            f"Peak memory of rank {peak['rank']} {peak['device']}: {peak['a_peak_bytes'] / MIB:,.1f} → "
            f"{peak['b_peak_bytes'] / MIB:,.1f} MiB ({peak['delta_peak_bytes'] / MIB:+,.1f} MiB, "
            f"{100 * peak['rel_peak']:+.1f} %)."
        )
    hints += [h for h in (_flops_hint(d), _phases_hint(d)) if h is not None]
    return Section("summary", "Step time", body, hints)


def _flops_hint(d: Diff) -> str | None:
    """The headline of :func:`di.viewers.diff.results.flops_headline` as a sentence; None without one."""
    from di.viewers.terminal import tflops_text

    r = flops_headline(d.flops)
    if r is None:
        return None
    return (
        f"Matrix work of rank {r['rank']} GPU {r['device']}: utilization {100 * r['a_utilization']:.1f} → "
        f"{100 * r['b_utilization']:.1f} % of the {_pair(r['a_peak_dtype'], r['b_peak_dtype'])} peak "
        f"({100 * r['delta_utilization']:+.1f} points), achieved "
        f"{tflops_text(r['a_achieved_tflops'])} → {tflops_text(r['b_achieved_tflops'])} TFLOP/s."
    )


def _phases_hint(d: Diff) -> str | None:
    """The headline of :func:`di.viewers.diff.results.phases_headline` (the terminal's sentence,
    :func:`di.viewers.diff.terminal.phases_line`); None without one."""
    from di.viewers.diff.terminal import phases_line

    line = phases_line(d)
    return None if line is None else f"{line}."


def _changes(d: Diff) -> Section | None:
    big = biggest_changes(d, n=25)
    if not big.height:
        return None
    rows = [
        (r["kind"], r["name"], r["status"], ms(r["a_total_ns"]), ms(r["b_total_ns"]), ms(r["delta_ns"]), r["note"])
        for r in big.iter_rows(named=True)
    ]
    return Section(
        "changes",
        "Biggest changes",
        table("changes", ["kind", "name", "status", "a_total_ns", "b_total_ns", "delta_ns", "note"], rows)
        + '<p class="note">Total time over all ranks of kernels, operators and collectives, largest |Δ| first.</p>',
    )


def _kernels(d: Diff) -> Section | None:
    sec = _named(d.kernels, "kernels", "GPU kernels by name", extra=("match", "matched_name"))
    if sec is None:
        return None
    pairs = d.kernels.filter((pl.col("match") == "op") & (pl.col("status") == "removed"))
    if pairs.height:
        partner = d.kernels.select(pl.col("name").alias("matched_name"), pl.col("b_total_ns").alias("p_ns"))
        rows = [
            (
                r["name"],
                r["matched_name"],
                r["match_stack"],
                ms(r["a_total_ns"]),
                ms(r["p_ns"]),
                ms(r["p_ns"] - r["a_total_ns"]),
            )
            for r in pairs.join(partner, on="matched_name").iter_rows(named=True)
        ]
        sec.body += "<h3>Renamed or re-tiled (paired by the CPU call stack that launched them)</h3>" + table(
            "renamed", ["a_name", "b_name", "launched_from", "a_total_ns", "b_total_ns", "delta_ns"], rows
        )
        sec.hints.append(f"{pairs.height} kernel(s) of A appear under another name in B, launched from the same op.")
    return sec


def _named(df: pl.DataFrame, key: str, title: str, extra: tuple[str, ...] = ()) -> Section | None:
    if not df.height:
        return None
    rows = [tuple(_value(c, r[c]) for c in (*NAMED, *extra)) for r in df.head(ROWS).iter_rows(named=True)]
    counts = df.group_by("status").len().rows_by_key("status")
    said = ", ".join(f"{counts[s][0][0]} {s}" for s in ("changed", "added", "removed", "same") if s in counts)
    body = f'<p class="note">{said}; largest |Δ total| first.{_more(df)}</p>' + table(key, [*NAMED, *extra], rows)
    return Section(key, title, body, [])


def _stacks(d: Diff) -> Section | None:
    df = d.kernel_stacks
    if not df.height:
        return None
    rows = [
        (
            r["stack"],
            r["status"],
            num(r["a_count"]),
            num(r["b_count"]),
            ms(r["a_total_ns"]),
            ms(r["b_total_ns"]),
            ms(r["delta_ns"]),
            ", ".join(r["names"] or []),
        )
        for r in df.head(ROWS).iter_rows(named=True)
    ]
    body = (
        '<p class="note">GPU time by the CPU call stack (outermost first) whose runtime call launched it; kernels renamed or re-tiled under '
        f"the same stack stay on one row.{_more(df)}</p>"
        + table(
            "kernel_stacks",
            ["stack", "status", "a_count", "b_count", "a_total_ns", "b_total_ns", "delta_ns", "names"],
            rows,
        )
    )
    return Section("kernel_stacks", "GPU time by launching call stack", body)


def _collectives(d: Diff) -> Section | None:
    c = d.collectives
    if not c.height:
        return None
    rows = [
        (
            r["op"],
            num(r["bytes"]),
            num(r["b_ranks"] or r["a_ranks"]),
            num(r["a_calls"]),
            num(r["b_calls"]),
            ms(r["a_total_ns"]),
            ms(r["b_total_ns"]),
            ms(r["delta_ns"]),
            ms(r["a_mean_ns"]),
            ms(r["b_mean_ns"]),
            _gb(r["a_algbw_gbps"]),
            _gb(r["b_algbw_gbps"]),
            _gb(r["a_busbw_gbps"]),
            _gb(r["b_busbw_gbps"]),
            r["busbw_factor"] or "—",
        )
        for r in c.head(ROWS).iter_rows(named=True)
    ]
    cols = [
        "op",
        "bytes",
        "ranks",
        "a_calls",
        "b_calls",
        "a_total_ns",
        "b_total_ns",
        "delta_ns",
        "a_mean_ns",
        "b_mean_ns",
        "a_algbw GB/s",
        "b_algbw GB/s",
        "a_busbw GB/s",
        "b_busbw GB/s",
        "busbw factor",
    ]
    note = f'<p class="note">{html.escape(ALGBW_FORMULA)}.<br>{html.escape(BUSBW_FORMULA)}.</p>'
    return Section("collectives", "Collectives by op and message size", table("collectives", cols, rows) + note)


def _counters(d: Diff) -> Section | None:
    c = d.counters
    if not c.height:
        return None
    rows = [
        (
            r["location"] or "",
            r["name"],
            r["unit"] or "",
            num(r["a_samples"]),
            num(r["b_samples"]),
            num(r["a_mean"], "{:,.4g}"),
            num(r["b_mean"], "{:,.4g}"),
            pct(r["rel_mean"]),
            num(r["a_max"], "{:,.4g}"),
            num(r["b_max"], "{:,.4g}"),
        )
        for r in c.head(ROWS).iter_rows(named=True)
    ]
    cols = ["where", "counter", "unit", "a_samples", "b_samples", "a_mean", "b_mean", "rel_mean", "a_max", "b_max"]
    note = (
        '<p class="note">Mean over the window (cumulative counters as rates per second); rel_mean = (B - A) / |A|.</p>'
    )
    return Section("counters", "Counters", table("counters", cols, rows) + note)


def _communicators(d: Diff) -> Section | None:
    c = d.communicators
    if not c.height:
        return None
    rows = [
        (
            num(r["nranks"]),
            num(r["hosts"]),
            num(r["a_comms"]),
            num(r["b_comms"]),
            r["a_version"] or "—",
            r["b_version"] or "—",
            r["a_intra_node"] or "—",
            r["b_intra_node"] or "—",
            r["a_inter_node"] or "—",
            r["b_inter_node"] or "—",
            "changed" if r["changed"] else "",
        )
        for r in c.head(ROWS).iter_rows(named=True)
    ]
    cols = [
        "nranks",
        "hosts",
        "a_comms",
        "b_comms",
        "a_NCCL",
        "b_NCCL",
        "a_inside",
        "b_inside",
        "a_across",
        "b_across",
        "status",
    ]
    note = '<p class="note">Communicators of the same size and hosts together; transports as NCCL printed them.</p>'
    return Section("communicators", "Communicators and their transports", table("communicators", cols, rows) + note)


def _gpu_idle(d: Diff) -> Section | None:
    from di.engine.gpu_idle import CAUSE_LABELS
    from di.viewers.diff.results import gpu_idle_totals

    if not d.gpu_idle.height:
        return None
    tot = gpu_idle_totals(d.gpu_idle)
    body = "<h3>Summed over the GPUs</h3>" + table(
        "gpu_idle_totals",
        ["cause", "a_time_ns", "b_time_ns", "delta_ns"],
        [
            (CAUSE_LABELS.get(r["cause"], r["cause"]), ms(r["a_time_ns"]), ms(r["b_time_ns"]), ms(r["delta_ns"]))
            for r in tot.iter_rows(named=True)
        ],
    )
    per = d.gpu_idle.filter((pl.col("a_time_ns") != 0) | (pl.col("b_time_ns") != 0))
    body += "<h3>Per GPU</h3>" + table(
        "gpu_idle",
        ["rank", "scope", "cause", "a_time_ns", "b_time_ns", "delta_ns", "a_share", "b_share"],
        [
            (
                r["rank"],
                r["scope"],
                CAUSE_LABELS.get(r["cause"], r["cause"]),
                ms(r["a_time_ns"]),
                ms(r["b_time_ns"]),
                ms(r["delta_ns"]),
                pct(r["a_share"]),
                pct(r["b_share"]),
            )
            for r in per.iter_rows(named=True)
        ],
    )
    return Section("gpu_idle", "Why the GPUs are idle (idle time by cause)", body)


def _memory(d: Diff) -> Section | None:
    m = d.memory
    if not m.height:
        return None
    rows = [
        (
            r["rank"],
            r["device"],
            mib(r["a_peak_bytes"]),
            mib(r["b_peak_bytes"]),
            mib(r["delta_peak_bytes"], "+"),
            pct(r["rel_peak"]),
            mib(r["a_reserved_at_peak_bytes"]),
            mib(r["b_reserved_at_peak_bytes"]),
            mib(r["a_growth_bytes_per_step"]),
            mib(r["b_growth_bytes_per_step"]),
            r["a_op"] or "—",
            r["b_op"] or "—",
        )
        for r in m.head(ROWS).iter_rows(named=True)
    ]
    cols = [
        "rank",
        "device",
        "a_peak MiB",
        "b_peak MiB",
        "delta MiB",
        "change %",
        "a_reserved MiB",
        "b_reserved MiB",
        "a_growth MiB/step",
        "b_growth MiB/step",
        "a_op",
        "b_op",
    ]
    note = (
        '<p class="note">The framework allocator\'s peak of allocated memory over the window per rank and device; '
        "reserved: what the allocator held from the driver at the peak (reserved - peak: its cache); growth: the "
        "least-squares slope of the memory at each step's end (null under 3 steps; a steady growth is memory kept "
        f"across steps); op: the operator that reached the peak. Cells hold the exact bytes.{_more(m)}</p>"
    )
    return Section("memory", "Peak device memory", table("memory", cols, rows) + note)


def _flops(d: Diff) -> Section | None:
    from di.viewers.report.flops import rate, tflop

    f = d.flops
    if not f.height:
        return None
    rows = [
        (
            r["rank"],
            r["device"],
            _pair(r["a_device_name"], r["b_device_name"]),
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
            _pair(r["a_peak_dtype"], r["b_peak_dtype"]),
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
        f"peak is unknown). Cells hold the exact operations, ns and fractions.{_more(f)}</p>"
    )
    return Section("flops", "Matrix work", table("flops", cols, rows) + note)


def _phases(d: Diff) -> Section | None:
    p = d.phases
    if not p.height:
        return None
    rows = [
        (
            num(r["rank"]),
            r["phase"],
            ms(r["a_host_ns"]),
            ms(r["b_host_ns"]),
            ms(r["delta_host_ns"]),
            pct(r["a_host_share"]),
            pct(r["b_host_share"]),
            ms(r["a_gpu_idle_ns"]),
            ms(r["b_gpu_idle_ns"]),
            ms(r["delta_gpu_idle_ns"]),
        )
        for r in p.head(ROWS).iter_rows(named=True)
    ]
    cols = [
        "rank",
        "phase",
        "a_host_ns",
        "b_host_ns",
        "delta_host_ns",
        "a_host %",
        "b_host %",
        "a_gpu_idle_ns",
        "b_gpu_idle_ns",
        "delta_gpu_idle_ns",
    ]
    note = (
        "<p class=\"note\">host: the union over the rank's threads of the phase's regions and work (PyTorch's "
        "DataLoader, autograd and optimizer regions, users' forward/backward/optimizer ranges; unmarked work in a "
        "step before its last backward is the forward); host %: of the rank's steps; GPU idle: the part of the host "
        "time with the rank's GPUs running nothing (— for a rank without GPU work, or a run that names no phase of "
        f"the rank). Cells hold the exact ns and fractions.{_more(p)}</p>"
    )
    return Section("phases", "Training phases", table("phases", cols, rows) + note)


def _pair(a: str | None, b: str | None) -> str:
    """One text when A's and B's agree, else ``A → B``; — for null."""
    return a or "—" if a == b else f"{a or '—'} → {b or '—'}"


def _breakdown(d: Diff) -> Section | None:
    if not d.breakdown.height:
        return None
    tot = breakdown_totals(d.breakdown)
    body = "<h3>Summed over ranks</h3>" + table(
        "breakdown_totals",
        ["where", "state", "a_time_ns", "b_time_ns", "delta_ns"],
        [
            (r["kind"], r["state"], ms(r["a_time_ns"]), ms(r["b_time_ns"]), ms(r["delta_ns"]))
            for r in tot.iter_rows(named=True)
        ],
    )
    per = d.breakdown.filter((pl.col("a_time_ns") != 0) | (pl.col("b_time_ns") != 0))
    body += "<h3>Per rank</h3>" + table(
        "breakdown",
        ["rank", "scope", "state", "a_time_ns", "b_time_ns", "delta_ns", "a_share", "b_share"],
        [
            (
                r["rank"],
                r["scope"],
                r["state"],
                ms(r["a_time_ns"]),
                ms(r["b_time_ns"]),
                ms(r["delta_ns"]),
                pct(r["a_share"]),
                pct(r["b_share"]),
            )
            for r in per.iter_rows(named=True)
        ],
    )
    body += "<h3>Overlap</h3>" + table(
        "overlap",
        ["rank", "pair", "a_ratio", "b_ratio", "delta points"],
        [
            (
                r["rank"],
                r["pair"],
                pct(r["a_ratio"]),
                pct(r["b_ratio"]),
                Cell("—", None)
                if r["delta_ratio"] is None
                else Cell(f"{100 * r['delta_ratio']:+.1f}", r["delta_ratio"]),
            )
            for r in d.overlap.iter_rows(named=True)
        ],
    )
    return Section(
        "breakdown",
        "Breakdown and overlap",
        body + '<p class="note">Exclusive time per state (gpuN: a device\'s streams, host: CPU threads); '
        "overlap: share of the first activity's time during which the second also runs.</p>",
    )


def _path(d: Diff) -> Section | None:
    if d.critical_path["a_length_ns"] is None and d.critical_path["b_length_ns"] is None:
        return None
    body = ""
    for df, col in ((d.cp_by_category, "category"), (d.cp_by_name, "name")):
        rows = [
            (
                r[col],
                ms(r["a_contrib_ns"]),
                ms(r["b_contrib_ns"]),
                ms(r["delta_ns"]),
                pct(r["a_share"]),
                pct(r["b_share"]),
            )
            for r in df.head(ROWS if col == "category" else 40).iter_rows(named=True)
        ]
        body += f"<h3>By {col}</h3>" + table(
            f"cp_by_{col}", [col, "a_contrib_ns", "b_contrib_ns", "delta_ns", "a_share", "b_share"], rows
        )
    return Section("critical_path", "Critical path composition", body)


def _value(col: str, v: Any) -> Any:
    if col.endswith("_ns"):
        return ms(v)
    if col.endswith("_count"):
        return num(v)
    return v


def _cell(stat: str, v: Any) -> Cell:
    return num(v) if stat == "count" else ms(v)


def _ratio(d: Diff, stat: str) -> float | None:
    r = d.step_stat("ratio", stat)
    return None if r is None else r - 1


def _gb(x: float | None) -> Cell:
    return num(x, "{:,.2f}")


def _more(df: pl.DataFrame) -> str:
    return f" The first {ROWS} of {df.height} rows; the JSON (--json) holds all." if df.height > ROWS else ""
