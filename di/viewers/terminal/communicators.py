"""The communicator section: each communicator's ranks, hosts, channels and transports, then what looks wrong."""

from __future__ import annotations

from typing import Any

from di.engine import Analysis
from di.viewers.terminal.tables import print_table

COMMS_SHOWN = 12


def render_communicators(result: Analysis, console: Any) -> None:
    """Each communicator's ranks, hosts, channels and transports, then what looks wrong in them."""
    from rich.table import Table

    c = result.communicators
    if c is None or not c.height:
        return
    more = f"; {c.height - COMMS_SHOWN} more in --csv/--json" if c.height > COMMS_SHOWN else ""
    t = Table(title=f"Communicators (connections per transport as NCCL printed it{more})")
    for col in ("comm", "NCCL", "ranks", "hosts", "channels", "inside a node", "across nodes"):
        t.add_column(col, justify="right" if col in ("ranks", "hosts", "channels") else "left", overflow="fold")
    for r in (
        c.sort("nranks", "comm", descending=[True, False], nulls_last=True).head(COMMS_SHOWN).iter_rows(named=True)
    ):
        t.add_row(
            r["comm"],
            r["version"] or "",
            f"{r['members']}/{r['nranks'] if r['nranks'] is not None else '?'}",
            str(r["hosts"]),
            "" if r["nchannels"] is None else str(r["nchannels"]),
            r["intra_node"] or "—",
            r["inter_node"] or "—",
        )
    print_table(console, t)
    from di.viewers.communicator_hints import hints

    for line in hints(c):
        console.print(line)
