"""Communicators: each NCCL communicator's members, hosts, channels and the transports inside and across nodes.

Reads the engine's :mod:`di.engine.communicators` (definitions there); hints name the configurations that slow
collectives down whatever the program does: traffic across nodes over TCP sockets, inside a node through host
memory, and inits that never completed.
"""

from __future__ import annotations

from di.viewers.communicator_hints import hints
from di.viewers.report.page import Section, num, table


def panel(ctx) -> Section | None:  # noqa: ANN001
    c = ctx.result.communicators
    if c is None or not c.height:
        return None
    rows = [
        (
            r["comm"],
            r["version"] or "",
            num(r["members"]),
            num(r["nranks"]),
            num(r["hosts"]),
            num(r["max_ranks_per_host"]),
            num(r["nchannels"]),
            r["intra_node"] or "—",
            r["inter_node"] or "—",
        )
        for r in c.iter_rows(named=True)
    ]
    cols = ["comm", "NCCL", "members", "nranks", "hosts", "ranks per host", "channels", "inside a node", "across nodes"]
    body = table("communicators", cols, rows)
    return Section("communicators", "Communicators and their transports", body, hints(c))
