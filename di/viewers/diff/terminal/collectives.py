"""Collectives by op and message size with nccl-tests' bandwidths (:mod:`di.viewers.diff.collectives`), and the
communicators whose NCCL versions or transports changed, in the terminal summary."""

from __future__ import annotations

from typing import Any

import polars as pl

from di.viewers.diff import Diff
from di.viewers.diff.collectives import ALGBW_FORMULA, BUSBW_FORMULA
from di.viewers.diff.terminal.cells import TOP, gb, new_table, pair, signed_ms, us
from di.viewers.terminal import print_table


def print_collectives(console: Any, d: Diff) -> None:
    c = d.collectives
    if not c.height:
        console.print("Collectives: none in either run")
        return
    t = new_table(
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
            f"{us(r['a_mean_ns'])}→{us(r['b_mean_ns'])}",
            f"{gb(r['a_algbw_gbps'])}→{gb(r['b_algbw_gbps'])}",
            f"{gb(r['a_busbw_gbps'])}→{gb(r['b_busbw_gbps'])}",
            signed_ms(r["delta_ns"]),
        )
    print_table(console, t)
    console.print(f"[dim]{ALGBW_FORMULA}; {BUSBW_FORMULA}[/dim]", soft_wrap=True)


def print_communicators(console: Any, d: Diff) -> None:
    c = d.communicators.filter(pl.col("changed") | ~pl.col("in_a") | ~pl.col("in_b"))
    if not c.height:
        if d.communicators.height:
            console.print("Communicators: the same versions and transports")
        return
    t = new_table(
        "Communicators that changed (by size; A→B)", "ranks", "hosts", "NCCL", "inside a node", "across nodes"
    )
    for r in c.head(TOP).iter_rows(named=True):
        t.add_row(
            str(r["nranks"]),
            str(r["hosts"]),
            pair(r["a_version"], r["b_version"]),
            pair(r["a_intra_node"], r["b_intra_node"]),
            pair(r["a_inter_node"], r["b_inter_node"]),
        )
    print_table(console, t)
