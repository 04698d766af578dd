"""What looks wrong in a job's communicators, in words: the terminal summary and the report say the same.

Reads the engine's :mod:`di.engine.communicators` table (its definitions there): traffic across nodes over TCP
sockets, inside a node through host memory, and inits that never completed, each one sentence per communicator.
"""

from __future__ import annotations

import polars as pl


def hints(communicators: pl.DataFrame) -> list[str]:
    """One sentence per finding of each communicator (row of :func:`di.engine.communicators.communicators`)."""
    out = []
    for r in communicators.iter_rows(named=True):
        if r["socket_links"]:
            out.append(
                f"Communicator {r['comm']} sends across nodes over TCP sockets ({r['socket_links']} connections, "
                "NET/Socket): NCCL used no InfiniBand/RoCE; check NCCL_IB_DISABLE, NCCL_IB_HCA and the IB drivers."
            )
        if r["shm_links"]:
            out.append(
                f"Communicator {r['comm']} goes through host memory inside a node ({r['shm_links']} connections, SHM): "
                "no GPU peer access; check NCCL_P2P_DISABLE, PCIe ACS and the container's IPC."
            )
        if r["init_incomplete"]:
            out.append(f"{r['init_incomplete']} member(s) of communicator {r['comm']} never completed their init.")
    return out
