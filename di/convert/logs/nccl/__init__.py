"""NCCL ``NCCL_DEBUG=INFO``/``TRACE`` output (NCCL 2.7 to 2.29, RCCL alike), vectorised.

A line is found by its NCCL prefix ``host:pid:tid [cudaDev] NCCL INFO|WARN|TRACE``
anywhere in it (lines of several ranks glue together; a launcher prefix was
taken off by :mod:`.text`), with an optional leading timestamp
(``NCCL_DEBUG_TIMESTAMP_FORMAT``, ``[%F %T]`` or with fractions) and TRACE's
milliseconds since start. What it maps to:

- ``Init COMPLETE`` (or ``Init START`` where it never completed): one entry of
  ``sources[].info.nccl.comms`` per rank and communicator (comm pointer, commId,
  rank, nranks, host, pid, cudaDev, busId, version) and an instant event
  ``ncclCommInit`` (cat ``nccl``) with the same in args. The communicator of a
  COLL line is the commId where NCCL prints it (2.19+), else ``n<nranks>#<k>``: the
  k-th communicator of that size each process made (ranks create them in one order).
- ``Channel NN[/MM] : a[bus] -> b[bus] [send|receive] via TRANSPORT``: one entry of
  ``info.nccl.links`` (comm, channel, src_rank, dst_rank, transport); ``Channel NN/MM :
  r0 r1 ...`` lines give ``info.nccl.rings`` (comm, channel, nchannels, order) and
  ``Trees [c] a/b/c->me->parent`` lines ``info.nccl.trees`` (comm, channel, rank, parent, children).
- COLL lines (``AllReduce: opCount N sendbuff .. count N datatype D op O root R comm 0x..
  [nranks=N] stream 0x..``): an event (cat ``nccl``) and a ``collectives`` row;
  ``seq`` is the call's position per (rank, comm) in line order, never ``opCount``
  (0 on every call in NCCL 2.26+). The TUNING line after it (``N Bytes -> Algo RING
  proto SIMPLE``) adds algorithm and protocol to its args.
- ``NCCL WARN`` lines and errors (NCCL error codes, watchdog timeouts, IB completion
  errors): instant events ``NCCL WARN``/``NCCL error``.

Times: the line's timestamp where every placed line has one (``unix_epoch``); else
TRACE's ms since start; else the nearest timestamped line of the file (another
library's print: ``unix_epoch``, ``info.time = "nearest_line_timestamp"``, lines of
one second 1 ns apart in line order); else the line number in ns (``relative``,
``info.time = "line_order"``).

One module per concern: :mod:`.heads` (the NCCL prefix of each line, lines that repeat whole read once),
:mod:`.messages` (the distinct messages and their kinds), :mod:`.communicators` (Init lines, ranks, the ``comms``
table), :mod:`.coll_fields` and :mod:`.collectives` (COLL lines), :mod:`.tunings` (TUNING lines),
:mod:`.topology` (rings, trees and connections: ``comm_links``), :mod:`.versions` and :mod:`.instants` (WARN
lines and errors), :mod:`.events` (the events together, on one clock); :func:`parse_nccl` puts their parts together.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from di.convert.logs.build import Parts

# ``import X as X``: names read from this package elsewhere (the reader, the tests), not by parse_nccl
from di.convert.logs.nccl.coll_fields import COLL_TOKENS as COLL_TOKENS
from di.convert.logs.nccl.coll_fields import COLL_WORDS as COLL_WORDS
from di.convert.logs.nccl.coll_fields import _coll_by_regex as _coll_by_regex
from di.convert.logs.nccl.coll_fields import _coll_by_tokens as _coll_by_tokens
from di.convert.logs.nccl.collectives import DTYPES, OPS, _collectives
from di.convert.logs.nccl.collectives import _tuple_ids as _tuple_ids
from di.convert.logs.nccl.communicators import INIT_RE as INIT_RE
from di.convert.logs.nccl.communicators import _comms, _comms_table, _with_ranks
from di.convert.logs.nccl.events import EPOCH_CLOCKS, _init_events, _timed_events
from di.convert.logs.nccl.heads import SNIFF_RE, _prefixed
from di.convert.logs.nccl.instants import _instants
from di.convert.logs.nccl.messages import MESSAGE_TEXTS as MESSAGE_TEXTS
from di.convert.logs.nccl.messages import _matching as _matching
from di.convert.logs.nccl.messages import _message_ids, _message_kinds
from di.convert.logs.nccl.topology import LINK_RE as LINK_RE
from di.convert.logs.nccl.topology import RING_HOP_RE as RING_HOP_RE
from di.convert.logs.nccl.topology import RING_RE as RING_RE
from di.convert.logs.nccl.topology import TOPOLOGY_DROPPED as TOPOLOGY_DROPPED
from di.convert.logs.nccl.topology import TREE_ONE_RE as TREE_ONE_RE
from di.convert.logs.nccl.topology import _comm_links, _topology_lines, _transports
from di.convert.logs.nccl.topology import _link_groups as _link_groups
from di.convert.logs.nccl.tunings import TUNE_RE as TUNE_RE
from di.convert.logs.nccl.versions import VERSION_RE as VERSION_RE
from di.convert.logs.nccl.versions import _version_lines, _versions

__all__ = ["DTYPES", "OPS", "SNIFF_RE", "parse_nccl"]


def parse_nccl(lines: pl.DataFrame) -> Parts:
    """NCCL debug lines of a log (``lines`` from :func:`di.convert.logs.text.read_lines`) as :class:`Parts`."""
    p, heads = _prefixed(lines)
    p, msgs = _message_ids(p)
    kinds = _message_kinds(msgs)
    ver = _version_lines(lines, p, msgs, heads, kinds["version"])
    versions = _versions(ver)
    if not p.height:
        return Parts(
            "nccl",
            claimed=ver.get_column("line"),
            info={"nccl": {"versions": versions}} if versions else {},
        )
    dropped: dict[str, int] = {}
    version = versions[0] if len(versions) == 1 else None
    comms = _comms(p, msgs, heads, version, dropped, kinds)
    comms, heads = _with_ranks(p, heads, comms)
    coll, n_coll_lines = _collectives(p, msgs, heads, comms, kinds)
    ev, clock = _timed_events(lines, coll, _init_events(comms), _instants(p, msgs, heads))
    topology: dict[str, int] = {}  # listed after the COLL lines' reason
    links, nch = _comm_links(_topology_lines(p, kinds["topology"], heads), comms, topology)
    info: dict[str, Any] = {"nccl": {"versions": versions, "time": clock, "transports": _transports(links)}}
    bad_coll = n_coll_lines - coll.height
    if bad_coll:
        dropped["COLL lines in an unknown layout"] = bad_coll
    dropped.update(topology)
    claimed = pl.concat([p.get_column("line"), ver.get_column("line")])
    tables = {"comms": _comms_table(comms, ver, nch), "comm_links": links}
    epoch = clock in EPOCH_CLOCKS
    return Parts("nccl", events=ev, claimed=claimed, dropped=dropped, info=info, epoch=epoch, tables=tables)
