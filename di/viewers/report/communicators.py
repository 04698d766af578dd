"""Communicators: each NCCL communicator's members, hosts, channels and the transports inside and across nodes.

Reads the engine's :mod:`di.engine.communicators` (definitions there); hints name the configurations that slow
collectives down whatever the program does: traffic across nodes over TCP sockets, inside a node through host
memory, and inits that never completed.
"""

from __future__ import annotations

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
    hints = []
    for r in c.iter_rows(named=True):
        if r["socket_links"]:
            hints.append(
                f"Communicator {r['comm']} sends across nodes over TCP sockets ({r['socket_links']} connections, "
                "NET/Socket): NCCL used no InfiniBand/RoCE; check NCCL_IB_DISABLE, NCCL_IB_HCA and the IB drivers."
            )
        if r["shm_links"]:
            hints.append(
                f"Communicator {r['comm']} goes through host memory inside a node ({r['shm_links']} connections, SHM): "
                "no GPU peer access; check NCCL_P2P_DISABLE, PCIe ACS and the container's IPC."
            )
        if r["init_incomplete"]:
            hints.append(f"{r['init_incomplete']} member(s) of communicator {r['comm']} never completed their init.")
    body = table("communicators", cols, rows)
    return Section("communicators", "Communicators and their transports", body, hints)
