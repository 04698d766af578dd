"""The boundary every reader crosses: the meta that says where a trace came from and what was lost.

Every connector (Chrome/Kineto, Perfetto, OTF2, Nsight Systems, text logs) ends
by describing its input in one shape, the ``meta`` of :class:`di.trace.Trace`:

``clock``
    ``{"unit": "ns", "domain": "unix_epoch" | "relative", "sync": None | how}``:
    ``unix_epoch`` when the input's times are absolute (ns since 1970-01-01 UTC),
    ``relative`` when they count from an unknown origin.
``sources``
    one entry per input file: ``path``, ``format``, ``rank`` and ``rank_source``
    (where the rank came from: ``option``, ``metadata``, ``file_name``,
    ``position``...), ``events`` (events read), ``dropped`` (reason -> count)
    and ``info`` (what else the format says of itself).
``warnings``
    one line per problem, each starting with the input's path.
``world_size``
    the job's rank count when the input states it, else None.

Drop reasons are one vocabulary: a short lowercase phrase naming what was
dropped (or repaired), counted per reason; each becomes the warning
``PATH: dropped REASON (N)``. Reasons met by more than one reader are the
constants below, so one question ("how many flows lost an end?") has one
answer whatever the input format.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

FLOW_START_WITHOUT_END = "flow starts without an end"
FLOW_END_WITHOUT_START = "flow ends without a start"
FLOW_WITHOUT_BOTH_ENDS = "flows without both ends"
BEGIN_WITHOUT_END = "begins without an end"
END_WITHOUT_BEGIN = "ends without a begin"
END_BEFORE_START = "events that end before they start"
END_BEFORE_START_REPAIRED = "events that end before they start (end set to start)"
TRUNCATED_TAIL = "bytes after the last complete record (truncated or corrupt)"
UNSUPPORTED_RECORD = "records of an unsupported type"
UNKNOWN_REFERENCE = "records that refer to an undefined definition"
ROW_OF_UNLOADED_EVENT = "rows whose event was not loaded"


def clock(epoch: bool, sync: str | None = None) -> dict[str, Any]:
    """The ``clock`` entry: ns, on the Unix epoch or relative, and how ranks were synchronised."""
    return {"unit": "ns", "domain": "unix_epoch" if epoch else "relative", "sync": sync}


def drop_warnings(path: Path | str, dropped: Mapping[str, int]) -> list[str]:
    """One warning per drop reason with a count above zero: ``PATH: dropped REASON (N)``."""
    return [f"{path}: dropped {reason} ({n})" for reason, n in sorted(dropped.items()) if n]


def source(
    path: Path | str,
    fmt: str,
    *,
    rank: int,
    rank_source: str,
    events: int,
    dropped: Mapping[str, int],
    info: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One ``sources`` entry (see the module docstring)."""
    entry: dict[str, Any] = {
        "path": str(path),
        "format": fmt,
        "rank": rank,
        "rank_source": rank_source,
        "events": events,
        "dropped": {k: int(n) for k, n in sorted(dropped.items()) if n},
    }
    if info is not None:
        entry["info"] = info
    return entry


def reader_meta(
    path: Path | str,
    fmt: str,
    *,
    epoch: bool,
    rank: int,
    rank_source: str,
    events: int,
    dropped: Mapping[str, int],
    info: dict[str, Any] | None = None,
    warnings: Iterable[str] = (),
    world_size: int | None = None,
    sync: str | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """The whole meta of a trace read from one file: its clock, its one source, the
    reader's ``warnings`` followed by one per drop reason, its world size, and any
    ``extra`` fields the format knows (``command``, ``hosts``...)."""
    return {
        "clock": clock(epoch, sync),
        "sources": [source(path, fmt, rank=rank, rank_source=rank_source, events=events, dropped=dropped, info=info)],
        "warnings": [*warnings, *drop_warnings(path, dropped)],
        "world_size": world_size,
        **extra,
    }
