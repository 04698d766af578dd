"""The job's critical path computed by the processes together: a parallel forward replay.

The graph is :mod:`di.engine.critical_path_graph`'s, built by each process on
its part (:mod:`di.parallel.ownership`): the nodes of its ranks' timelines, and
the nodes of its ghosts, which stand for nodes of other processes. Each edge
into an owned node is held by that node's process; an edge from a ghost is a
cross-process edge. Node ids are the single-process graph's (timeline by
timeline in ``loc`` order), so ties in time are broken as there; they are not
stored per node (:class:`NodeIds`): owned nodes come first, each timeline one
block of consecutive ids, and only the ghosts' ids are listed.

Longest-path distances are computed in rounds (bulk-synchronous replay):
each process advances through its nodes in (time, node id) order until a node
needs the distance of a ghost not yet known, then the processes send each
other the distances of the nodes others hold as ghosts (``alltoall``), and so
on until every node is done. The globally earliest waiting node always gets
its inputs in the next round, so the replay ends; the number of rounds is the
length of the longest chain of cross-process dependencies (about one per
collective or message round trip). The path is then walked back from the
sink, handing over to the owner of each ghost it crosses, and process 0 turns
the steps of the path into the engine's result tables with the engine's own
code. Per-process memory: its nodes and edges plus one distance per ghost:
about 42 bytes per node in the replay (time, event, owner, flags, CSR offset,
distance, predecessor and edge, replay order), the graph laid out once.

The package: :mod:`~di.parallel.critical_path.node_ids` (the node ids of a
part), :mod:`~di.parallel.critical_path.layout` (laying out the nodes as the
engine does), :mod:`~di.parallel.critical_path.graph` (the part's graph and
the ghosts' nodes), :mod:`~di.parallel.critical_path.replay` (the replay),
:mod:`~di.parallel.critical_path.backtrack` (the walk back from the sink) and
:mod:`~di.parallel.critical_path.result` (the result tables on process 0).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from di.engine.window import EventFrame
from di.parallel.critical_path.backtrack import backtrack, path_sink
from di.parallel.critical_path.graph import part_graph
from di.parallel.critical_path.node_ids import NodeIds
from di.parallel.critical_path.replay import _advance as _advance
from di.parallel.critical_path.replay import honoured_edges, in_edges, replay
from di.parallel.critical_path.result import assemble, selected_range
from di.parallel.exchange import Exchange
from di.parallel.ownership import Part

__all__ = ["NodeIds", "critical_path"]


def critical_path(ex: Exchange, part: Part, frame: EventFrame) -> dict[str, Any] | None:
    """The job's critical path (:func:`di.engine.critical_path.critical_path`'s result) on process 0, None elsewhere."""
    frame, g, ids, dropped, wanted = part_graph(ex, part, frame)
    g, tied = honoured_edges(g, ids)
    dropped += tied
    # owned nodes are numbered in id order, so a stable sort by time orders them by (time, id)
    order = np.argsort(g.time_ns[: ids.n_own], kind="stable").astype(np.int32)
    m = g.event.size
    g, edges = in_edges(g)
    args = (g.time_ns, g.first_of_loc, g.owner, g.event, frame.activity, frame.on_gpu, frame.call_only)
    dist, pred, via = np.zeros(m, np.int64), np.full(m, -1, np.int32), np.full(m, -1, np.int32)
    replay(ex, ids, wanted, order, dist, pred, via, args, *edges[:3])
    del order, wanted
    dropped = sum(ex.allgather(dropped, "dropped edges"))
    length, sink_p, sink = path_sink(ex, ids, dist)
    ranges = ex.allgather(selected_range(part, frame), "window span")
    pieces = backtrack(ex, part, g, ids, sink_p, sink, pred, via, edges, args, frame)
    gathered = ex.gather(pieces, "critical path")
    if gathered is None:
        return None
    steps = [p for per in gathered for p in per]
    steps.sort(key=lambda hp: -hp[0])
    table = pl.concat([s for _, s in steps]) if steps else None
    return assemble(table, dropped, max(length, 0), ranges)
