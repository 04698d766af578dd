"""Critical path: its length against the window, and what it is made of (category, rank, name).

The engine's result (:mod:`di.engine.critical_path`): ``contrib_ns`` is each
part's exclusive time on the path; the shares sum to 1 over the path length.
"""

from __future__ import annotations

import html

from di.viewers.report.page import Section, ms, new_figure, pct, svg_plot, table


def panel(ctx) -> Section | None:  # noqa: ANN001
    cp = ctx.result.critical_path
    if not cp or not cp["summary"].get("length_ns"):
        return None
    s = cp["summary"]
    body = (
        '<dl class="kv">'
        + "".join(
            f'<dt>{k}</dt><dd data-key="cp.{k}" data-v="{s[k]}">{html.escape(v)}</dd>'
            for k, v in (
                ("length_ns", f"{s['length_ns'] / 1e6:,.3f} ms"),
                ("window_span_ns", f"{s['window_span_ns'] / 1e6:,.3f} ms"),
                ("segments", f"{s['segments']:,}"),
                ("events", f"{s['events']:,}"),
            )
        )
        + "</dl>"
    )
    cat = cp["by_category"].sort("contrib_ns", descending=True)
    fig = new_figure(9, max(1.4, 0.3 * cat.height + 0.8))
    ax = fig.add_subplot()
    ax.barh(
        cat.get_column("category").to_list(), [v / 1e6 for v in cat.get_column("contrib_ns").to_list()], color="#5c6bc0"
    )
    ax.invert_yaxis()
    ax.set_xlabel("ms on the critical path")
    body += svg_plot(fig, "critical path by category")
    body += "<h3>By category</h3>" + table(
        "cp_by_category",
        ["category", "contrib_ns", "share"],
        [(r["category"], ms(r["contrib_ns"]), pct(r["share"])) for r in cat.iter_rows(named=True)],
    )
    body += "<h3>By rank</h3>" + table(
        "cp_by_rank",
        ["rank", "contrib_ns", "share"],
        [(r["rank"], ms(r["contrib_ns"]), pct(r["share"])) for r in cp["by_rank"].sort("rank").iter_rows(named=True)],
    )
    body += "<h3>Longest names on the path</h3>" + table(
        "cp_by_name",
        ["name", "contrib_ns", "share"],
        [(r["name"], ms(r["contrib_ns"]), pct(r["share"])) for r in cp["by_name"].head(20).iter_rows(named=True)],
    )
    hints = []
    if cat.height:
        top = cat.row(0, named=True)
        advice = {
            "comm": "overlap or shrink communication",
            "compute": "speed up the kernels on the path",
            "launch": "the GPU waits for the host to launch work: CUDA graphs or fewer, larger kernels",
            "cuda_api": "the host spends the path in CUDA API calls: remove synchronizations",
            "io": "the path waits on file I/O: prefetch",
            "message": "ranks wait for messages from others on the path: see the wait states for who sends late",
            "collective": "collectives are on the path: see the wait states for the late rank",
            "sync": "synchronizations stall the path: remove .item()/.cpu() calls in the loop",
            "launch_inferred": "the GPU waits for the host to launch work (launches matched to kernels in stream order, "
            "the trace records no launch edges): CUDA graphs or fewer, larger kernels",
            "sync_inferred": "the host returns late from waiting for the device (the wait linked by stream and time, "
            "the trace records no sync edges): synchronize less often",
        }.get(top["category"], "start there")
        hints.append(f"{100 * top['share']:.0f} % of the critical path is {top['category']}: {advice}.")
    return Section("critical_path", "Critical path", body, hints)
