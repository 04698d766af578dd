"""Collectives by op and message size with nccl-tests' bandwidths (:mod:`di.viewers.diff.collectives`), and the
communicators with their NCCL versions and transports, on the page."""

from __future__ import annotations

import html

from di.viewers.diff import Diff
from di.viewers.diff.collectives import ALGBW_FORMULA, BUSBW_FORMULA
from di.viewers.diff.page.cells import ROWS
from di.viewers.report.page import Cell, Section, ms, num, table


def collectives_section(d: Diff) -> Section | None:
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


def communicators_section(d: Diff) -> Section | None:
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


def _gb(x: float | None) -> Cell:
    return num(x, "{:,.2f}")
