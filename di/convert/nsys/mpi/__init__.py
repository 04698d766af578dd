"""MPI in an Nsight Systems export (``nsys profile --trace=mpi``): calls, messages, collectives.

Tables read (Nsight Systems' SQLite schema reference; columns found by name):

| table | columns used |
| --- | --- |
| MPI_P2P_EVENTS | start, end, globalTid, textId (function), commHandle, tag, remoteRank (rank in the communicator: the destination of a send, the source of a receive), size (bytes), requestHandle |
| MPI_COLLECTIVES_EVENTS | start, end, globalTid, textId, commHandle, rootRank, size (bytes sent), recvSize (older exports: collSendSize, collRecvSize), requestHandle |
| MPI_START_WAIT_EVENTS | start, end, globalTid, textId (MPI_Wait*, MPI_Start*), requestHandle |
| MPI_OTHER_EVENTS | start, end, globalTid, textId |
| MPI_RANKS | globalTid, rank (read by :mod:`.ranks`) |
| MPI_COMMUNICATORS | rank, commHandle, commUid (job-wide id), localRank, size, members |

Each call is an event on its thread (cat ``mpi_p2p``, ``mpi_coll`` or ``other``
as ``di record``'s capture names them); its recorded arguments go to ``args``
(``comm handle``, ``tag``, ``remote rank``, ``root``, ``request``, ``send
bytes``, ``recv bytes``) and the communicator rows to the source's
``info["mpi_communicators"]``, so :func:`link` can match calls across the
reports of a job.

:func:`link` builds ``messages`` and ``collectives`` from those events, over
one report or the merged reports of a job, with the definitions of di's
capture (:mod:`di.capture.matching`):

* A communicator is ``mpi:UID`` where ``MPI_COMMUNICATORS`` gives its
  ``commUid`` for (rank, handle), else ``MPI_COMM_WORLD`` for MPICH's world
  handle, else ``mpi handle H`` (the handle as recorded: MPICH's handles are
  equal on every rank, Open MPI's are addresses and may not be). A rank within it becomes a world rank through the
  (localRank, rank) pairs of its ``MPI_COMMUNICATORS`` rows, or its
  ``members`` text (a list of world ranks in communicator order, or, indexed
  by world rank, 0/1 flags or local ranks); without either, and for a
  communicator of the world's size, it is taken as the world rank.
* A message is the k-th send from world rank s to d on communicator c with
  tag t, matched with the k-th receive of that signature on d: sends in order
  of their start, receives of their post (MPI's non-overtaking rule).
  ``send`` is the send call (blocking, or the Isend), ``recv`` where the data
  arrived (the blocking receive, or the MPI_Wait* that completed an Irecv);
  ``send_done`` and ``recv_post`` the other ends of non-blocking ones. The
  call that completes a request is the first MPI_Wait* on the thread at or
  after its post with the same request handle (before that handle is posted
  again), else the first with no handle recorded, else the first at all (an
  MPI_Waitall recorded with one of its handles). An
  MPI_Sendrecv is one row when its two halves agree, else two rows, the send
  first (as nsys's ``mpi_event_trace`` report reads them). A receive from
  ``MPI_ANY_SOURCE`` or with ``MPI_ANY_TAG`` (a negative source or tag: the
  trace records the call's arguments, not the status) is matched after the
  exact ones, in post order, with the sends left to its rank on its
  communicator in start order (with the same tag, or from the same source,
  where it named one): MPI matches those by arrival, which no trace records.
  Sends to ``MPI_PROC_NULL`` are not matched. ``bytes`` is the sender's size.
* A collective instance is the i-th collective call of every member on one
  communicator (``seq`` per rank and communicator, ``instance`` by
  :func:`di.merge.assign_instances`); ``bytes`` is what the rank sends.

One module per concern: :mod:`.calls` (the tables -> event rows),
:mod:`.communicators` (the communicator rows, world ranks and names),
:mod:`.events` (a trace's MPI calls and their roles), :mod:`.messages`
(point-to-point matching) and :mod:`.collectives`; :func:`link` puts them together.
"""

from __future__ import annotations

from collections import Counter

import polars as pl

from di.convert.nsys.mpi.calls import MPI_TABLES, frames
from di.convert.nsys.mpi.collectives import _collectives
from di.convert.nsys.mpi.communicators import _communicator_tables, _on_communicators, communicators
from di.convert.nsys.mpi.events import _calls, _sources, _with_roles
from di.convert.nsys.mpi.messages import WILDCARDS, _messages
from di.merge import assign_instances
from di.trace import Trace

# ``import X as X``: names of the module this package was, kept for its readers
from di.convert.nsys.mpi.calls import COLL as COLL
from di.convert.nsys.mpi.calls import LOCAL_QUERIES as LOCAL_QUERIES
from di.convert.nsys.mpi.calls import OTHER as OTHER
from di.convert.nsys.mpi.calls import OTHER_CALLS as OTHER_CALLS
from di.convert.nsys.mpi.calls import P2P as P2P
from di.convert.nsys.mpi.calls import START_WAIT as START_WAIT
from di.convert.nsys.mpi.communicators import COMM_COLUMNS as COMM_COLUMNS
from di.convert.nsys.mpi.communicators import MPICH_WORLD as MPICH_WORLD
from di.convert.nsys.mpi.events import ARGS as ARGS
from di.convert.nsys.mpi.events import COLLECTIVE as COLLECTIVE
from di.convert.nsys.mpi.events import IRECV as IRECV
from di.convert.nsys.mpi.events import ISEND as ISEND
from di.convert.nsys.mpi.events import RECV as RECV
from di.convert.nsys.mpi.events import SEND as SEND
from di.convert.nsys.mpi.events import SENDRECV as SENDRECV
from di.convert.nsys.mpi.events import WAIT as WAIT

__all__ = ["MPI_TABLES", "communicators", "frames", "link"]

WARNING_PREFIX = "MPI (nsys): "


def link(trace: Trace) -> Trace:
    """``messages`` and ``collectives`` of the nsys MPI calls in ``trace`` (one report or a merged job), replacing
    those a previous link made; the unmatched calls are counted in one warning."""
    sources = _sources(trace)
    if not sources:
        return trace
    ev = _calls(trace, sources)
    if not ev.height:
        return trace
    ev = _with_roles(ev)
    world_size = trace.meta.get("world_size")
    by_handle, members = _communicator_tables(trace, sources)
    ev = _on_communicators(ev, by_handle, members, world_size)
    counts: Counter[str] = Counter()
    messages = _messages(ev, counts)
    collectives = _collectives(ev, members, world_size)
    return _replaced(trace, ev.get_column("row").implode(), messages, collectives, counts)


def _replaced(
    trace: Trace, ours: pl.Series, messages: pl.DataFrame, collectives: pl.DataFrame, counts: Counter[str]
) -> Trace:
    """``trace`` with ``messages`` and ``collectives`` in place of those of the calls ``ours``, and the warning."""
    kept_m = trace.messages.filter(~pl.col("send").is_in(ours))
    kept_c = trace.collectives.filter(~pl.col("event").is_in(ours))
    all_m = pl.concat([kept_m, messages], how="diagonal_relaxed").sort("send") if kept_m.height else messages
    all_c = assign_instances(pl.concat([kept_c, collectives], how="diagonal_relaxed").sort("event"))
    tables = {**trace.tables(), "messages": all_m, "collectives": all_c}
    return Trace.build(meta={**trace.meta, "warnings": _warnings(trace, counts)}, **tables)


def _warnings(trace: Trace, counts: Counter[str]) -> list[str]:
    """The trace's warnings, a previous link's replaced by one that counts what was not matched."""
    warnings = [w for w in trace.meta.get("warnings", []) if not w.startswith(WARNING_PREFIX)]
    unmatched = ", ".join(f"{n} {what}" for what, n in sorted(counts.items()) if n and what != WILDCARDS)
    said = [unmatched + " (a rank's report missing, or a communicator not recorded)"] if unmatched else []
    said += [f"{counts[WILDCARDS]} {WILDCARDS}"] if counts[WILDCARDS] else []
    if said:
        warnings.append(WARNING_PREFIX + "; ".join(said))
    return warnings
