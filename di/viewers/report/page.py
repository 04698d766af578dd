"""The page around the panels: HTML shell, inline CSS and JS, tables and inline SVG plots.

Everything is inline (no file, font or script is fetched), so the report opens
offline. Numeric table cells carry their exact value in ``data-v`` (ns as
integers, shares as fractions) next to the formatted text, so a reader or a
test can compare the page with ``di analyze --json``.
"""

from __future__ import annotations

import html
import io
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from di.viewers.rows_shown import unusual_rows

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#1d2330;background:#f5f6f8}
header{background:#1d2330;color:#fff;padding:14px 24px}header h1{margin:0;font-size:20px}header p{margin:4px 0 0;color:#b8c0d0;font-size:12px}
nav{padding:8px 24px;background:#e8ebf0;font-size:13px}nav a{margin-right:12px;color:#2457a6;text-decoration:none}
main{padding:8px 24px 40px;max-width:1200px}
section{background:#fff;border-radius:6px;padding:12px 18px;margin:14px 0;box-shadow:0 1px 2px rgba(0,0,0,.08)}
h2{font-size:17px;margin:4px 0 8px}p.note{color:#5b6475;font-size:12px;margin:4px 0}
ul.hints{margin:6px 0 10px;padding-left:20px}ul.hints li{color:#8a4b00}
table{border-collapse:collapse;font-size:12.5px;margin:6px 0}th,td{padding:3px 9px;border-bottom:1px solid #e3e6eb;text-align:left}
td.n{text-align:right;font-variant-numeric:tabular-nums}th{background:#f0f2f5;position:sticky;top:0}
table.sortable th{cursor:pointer}table.sortable th:after{content:" \\2195";color:#aab}
dl.kv{display:grid;grid-template-columns:max-content auto;gap:2px 16px;margin:4px 0}dl.kv dt{color:#5b6475}dl.kv dd{margin:0;font-weight:600}
.plot svg{max-width:100%;height:auto}
.error{color:#a00}
"""

SORT_JS = """
document.querySelectorAll("table.sortable th").forEach(function(th){th.addEventListener("click",function(){
 var table=th.closest("table"),body=table.tBodies[0],i=Array.prototype.indexOf.call(th.parentNode.children,th);
 var asc=th.dataset.dir!=="asc";th.dataset.dir=asc?"asc":"desc";
 var rows=Array.prototype.slice.call(body.rows);
 function key(r){var c=r.cells[i];var v=c.dataset.v;return v!==undefined&&v!==""&&!isNaN(+v)?+v:c.textContent;}
 rows.sort(function(a,b){var x=key(a),y=key(b);var d=(typeof x==="number"&&typeof y==="number")?x-y:String(x).localeCompare(String(y));return asc?d:-d;});
 rows.forEach(function(r){body.appendChild(r);});});});
"""


@dataclass
class Section:
    """One panel's part of the page.

    Attributes:
        id: HTML id (anchor in the navigation).
        title: heading.
        body: HTML of the panel (tables, ``svg_plot`` output, notes).
        hints: one-line plain-language findings with what to try; shown above the body.
    """

    id: str
    title: str
    body: str
    hints: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Cell:
    """A table cell: shown ``text``, exact ``value`` (data-v) when numeric."""

    text: str
    value: Any = None


def ms(ns: float | int | None) -> Cell:
    """A duration cell: shown in ms, exact ns in data-v."""
    return Cell("—", None) if ns is None else Cell(f"{ns / 1e6:,.3f}", int(ns) if float(ns).is_integer() else float(ns))


def mib(b: float | int | None, sign: str = "") -> Cell:
    """A size cell: shown in MiB (:func:`di.viewers.terminal.mib_text`; ``sign`` "+" for a change), exact bytes in
    data-v."""
    from di.viewers.terminal import mib_text

    return Cell("—", None) if b is None else Cell(mib_text(b, sign), int(b) if float(b).is_integer() else float(b))


def pct(share: float | None) -> Cell:
    """A share cell: shown in %, exact fraction in data-v."""
    return Cell("—", None) if share is None else Cell(f"{100 * share:.1f}", float(share))


def num(x: float | int | None, fmt: str = "{:,}") -> Cell:
    """A plain number cell."""
    return Cell("—", None) if x is None else Cell(fmt.format(x), x)


def table(name: str, columns: Sequence[str], rows: Sequence[Sequence[Any]], *, sortable: bool = True) -> str:
    """An HTML table with ``data-table=name``; each column's ``data-col`` is its header.

    Cells are :class:`Cell` (numeric, right-aligned) or anything else (shown as text).
    """
    head = "".join(f'<th data-col="{html.escape(c)}">{html.escape(_label(c))}</th>' for c in columns)
    out = [
        f'<table data-table="{html.escape(name)}" class="{"sortable" if sortable else ""}"><thead><tr>{head}</tr></thead><tbody>'
    ]
    for row in rows:
        out.append("<tr>")
        for c in row:
            if isinstance(c, int) and not isinstance(c, bool):
                c = Cell(str(c), c)
            if isinstance(c, Cell):
                v = (
                    ""
                    if c.value is None
                    else html.escape(repr(c.value) if isinstance(c.value, float) else str(c.value))
                )
                out.append(f'<td class="n" data-v="{v}">{html.escape(c.text)}</td>')
            else:
                text = "" if c is None else str(c)
                if len(text) > LONG_TEXT:
                    out.append(f'<td title="{html.escape(text)}">{html.escape(text[: LONG_TEXT - 1])}…</td>')
                else:
                    out.append(f"<td>{html.escape(text)}</td>")
        out.append("</tr>")
    out.append("</tbody></table>")
    if len(rows) > FOLD_ROWS:
        return f"<details><summary>{len(rows)} rows</summary>{''.join(out)}</details>"
    return "".join(out)


GENERATOR = '<meta name="generator" content="di report">'
"""Names di in the page's head: how di recognises a report it wrote before replacing it."""
LONG_TEXT = 110
"""Text cells longer than this (kernel names) are cut; the whole text is the cell's tooltip."""
FOLD_ROWS = 30
"""Tables longer than this are folded (click to open)."""
PERCENT_COLUMNS = ("share", "ratio", "imbalance", "percent_imbalance")


def _label(column: str) -> str:
    """What a header shows: ns columns are shown in ms, shares in %."""
    if column.endswith("_ns"):
        return column[:-3].replace("_", " ") + " (ms)"
    if column in PERCENT_COLUMNS:
        return column.replace("_", " ") + " (%)"
    return column.replace("_", " ")


MAX_TICK_LABELS = 24
"""The most labelled ticks on one axis of a plot. matplotlib lays out and draws every label's text: with a label per
step on the imbalance heat map, ``di report`` of a 750-step profile (issue 16's real-shaped one) took 9.1-10.0 CPU-s
and wrote 764 KB, with 24 labels 5.6-6.1 CPU-s and 376 KB; a few dozen labels are all an axis can show legibly."""


def label_ticks(axis: Any, positions: Sequence[float], labels: Sequence[str]) -> None:
    """Ticks at ``positions`` with ``labels`` on ``axis`` (``ax.xaxis`` or ``ax.yaxis``); more than
    :data:`MAX_TICK_LABELS` are thinned to that many, evenly spaced, the first and the last kept."""
    if len(labels) > MAX_TICK_LABELS:
        last = len(labels) - 1
        keep = sorted({round(k * last / (MAX_TICK_LABELS - 1)) for k in range(MAX_TICK_LABELS)})
        positions, labels = [positions[k] for k in keep], [labels[k] for k in keep]
    axis.set_ticks(list(positions), list(labels))


def new_figure(width: float = 9.0, height: float = 3.2) -> Any:
    """A matplotlib Figure not tied to pyplot's global state (no GUI backend)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), layout="constrained")
    return fig


MAX_BARS = 32
"""The most rows a bar chart of the report draws (a bar, or a group of bars, per rank or per rank and scope). Each bar
is a shape and each row a label that matplotlib lays out and draws: with every row drawn, ``di report`` of a 64-rank
job (two charts of 128 stacked bars, one of 64 groups) took 10.4-10.8 CPU-s and wrote 940 KB, with 32 rows 6.6-8.5
CPU-s and 548 KB; a thousand rows would be unreadable as well as slow. The tables list every row."""


def cells(row_keys: np.ndarray, col_keys: np.ndarray, rows: Any, cols: Any, values: Any) -> np.ndarray:
    """A float grid of ``row_keys`` x ``col_keys`` (both sorted), 0 but at (``rows[i]``, ``cols[i]``), a key of
    each, where it holds ``values[i]``: a heat map's or a grouped chart's cells from a table's rows."""
    grid = np.zeros((len(row_keys), len(col_keys)))
    grid[np.searchsorted(row_keys, np.asarray(rows)), np.searchsorted(col_keys, np.asarray(cols))] = np.asarray(values)
    return grid


def drawn_note(drawn: int, rows: int, what: str) -> str:
    """The note under a chart that draws ``drawn`` of ``rows`` rows (:func:`unusual_rows`); empty when it draws all."""
    if drawn == rows:
        return ""
    return (
        f'<p class="note">{drawn} of {rows} {what} drawn: those least like the median one (the largest summed '
        "differences from the median of each column); the table lists them all.</p>"
    )


def share_bars(wide: Any, parts: Sequence[tuple[str, str, str]], xlabel: str, label: str) -> str:
    """Horizontal stacked bars, one per row of ``wide`` (columns rank, scope, span_ns and each part's ns), of each
    part as a % of the row's span; ``parts``: (column, colour, legend label) in stacking order. More rows than
    :data:`MAX_BARS`: the :func:`unusual_rows` of the parts' shares. The SVG, and the note saying which rows it draws."""
    span = wide.get_column("span_ns").fill_null(0).to_numpy().astype(np.float64)
    shares = np.zeros((wide.height, len(parts)))
    for k, (column, _, _) in enumerate(parts):
        time_ns = wide.get_column(column).fill_null(0).to_numpy().astype(np.float64)
        np.divide(100 * time_ns, span, out=shares[:, k], where=span != 0)
    rows = unusual_rows(shares, MAX_BARS)
    shares = shares[rows]
    labels = [
        f"rank {r} {s}" for r, s in zip(wide.get_column("rank").gather(rows), wide.get_column("scope").gather(rows))
    ]
    fig = new_figure(9, max(1.6, 0.32 * len(labels) + 0.9))
    ax = fig.add_subplot()
    left = np.zeros(len(labels))
    for k, (_, color, legend) in enumerate(parts):
        ax.barh(labels, shares[:, k], left=left, color=color, label=legend)
        left = left + shares[:, k]
    ax.invert_yaxis()
    ax.set_xlabel(xlabel)
    ax.set_xlim(0, 100)
    ax.legend(ncol=max(len(parts), 1), loc="lower center", bbox_to_anchor=(0.5, 1.0), frameon=False, fontsize=8)
    return svg_plot(fig, label) + drawn_note(rows.size, wide.height, "rows")


def svg_plot(fig: Any, label: str) -> str:
    """The figure as inline SVG (text kept as text, no external references)."""
    import matplotlib

    buf = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "di-report", "font.size": 9}):
        fig.savefig(buf, format="svg", metadata={"Date": None})
    text = buf.getvalue()
    text = text[text.index("<svg") :]
    return f'<div class="plot" role="img" aria-label="{html.escape(label)}">{text}</div>'


def render_page(title: str, subtitle: str, sections: Sequence[Section]) -> str:
    """The whole HTML document."""
    nav = "".join(f'<a href="#{html.escape(s.id)}">{html.escape(s.title)}</a>' for s in sections)
    parts = []
    for s in sections:
        hints = "".join(f"<li>{html.escape(h)}</li>" for h in s.hints)
        parts.append(
            f'<section id="{html.escape(s.id)}"><h2>{html.escape(s.title)}</h2>'
            + (f'<ul class="hints">{hints}</ul>' if hints else "")
            + s.body
            + "</section>"
        )
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">"
        f'{GENERATOR}<meta name="viewport" content="width=device-width"><title>{html.escape(title)}</title><style>{CSS}</style></head><body>'
        f"<header><h1>{html.escape(title)}</h1><p>{html.escape(subtitle)}</p></header><nav>{nav}</nav><main>{''.join(parts)}</main>"
        f"<script>{SORT_JS}</script></body></html>"
    )
