"""Canonical Trace -> OTF2 archive (Vampir, otf2-print, Score-P tools).

Layout written:

* system tree ``di`` (machine) -> one ``node`` per host -> one location
  group ``MPI Rank N`` (PROCESS) per rank;
* locations: each timeline's events split into properly nested lanes
  (:mod:`di.convert.lanes`); lane 0 keeps the timeline's name, lane k adds
  `` lane k``. CPU threads -> CPU_THREAD, GPU streams -> GPU, each counter
  timeline with series -> a METRIC location;
* regions: one per (name, cat, src_cat, instant), paradigm and role from
  :func:`categories.region_kind`, description recording di's category;
* events: Enter/Leave (instants as Enter+Leave at one time), attributes
  ``di.bytes``, ``di.corr``, ``di.args`` (the args JSON as a string; when a
  sample shows the texts nearly all distinct, as a PyTorch profile's, each
  event's text is its own string definition, repeats not searched for), and
  one INT64 attribute ``di.<column>`` per optional id column the trace has
  (Kineto's ``ext_id``, ``seq``, ...: :data:`layout.ID_COLUMNS`; defined only
  for those), each on the events whose value is not null;
  messages as MpiSend at the send event's start and MpiRecv at the receive
  event's end, or, where ``send_done`` / ``recv_post`` mark them non-blocking,
  MpiIsend + MpiIsendComplete (end of the ``send_done`` event) and
  MpiIrecvRequest (start of the ``recv_post`` event) + MpiIrecv, one request
  id per message; collectives as MpiCollectiveBegin/End inside their event, with
  ranks given within the communicator; samples as Metric records (DOUBLE);
  I/O events as IoOperationBegin/Complete inside them, with IoParadigm,
  IoRegularFile and IoHandle definitions (:mod:`di.convert.otf2.iolayout`);
* communicators: ``MPI_COMM_WORLD``-style COMM_LOCATIONS group of every
  rank's first CPU location, one COMM_GROUP + Comm per communicator name
  (members from ``collectives.group_ranks`` where known, else the ranks that
  use it);
* clock: resolution 1 ns. ``unix_epoch`` traces: realtime timestamp = global
  offset = the first time; ``relative`` ones: ticks are the ns themselves
  (shifted when negative), so a reader gets every ns back.

Flows have no OTF2 record: each flow is written on the Enter of its
destination event, as the string attribute ``di.flows_in``: a JSON list of
``{"l": source location ref, "k": the source's Enter ordinal on that location,
"t": kind, "i": id, "c": src_cat}`` (:mod:`di.convert.otf2.flowtext`), which di's reader turns back into flow
rows and Vampir shows with the event (with ``di.corr``, the correlation id
that ties a kernel to its launch). A trace that carries di's analysis also
gets the groups and markers of :mod:`di.convert.otf2.analysis_defs`. What OTF2's
definitions cannot say of the locations (host, pid, tid, device, stream, which
OTF2 locations are lanes of one) and the meta go in di's own archive property
(:mod:`di.convert.otf2.ditrace`), so di reads its archives back as they were.
"""

from __future__ import annotations

import ctypes
import errno
import os
import shutil
from pathlib import Path

import numpy as np

from di.convert.columns import readonly
from di.convert.otf2 import chunkpool, clib, emit
from di.convert.otf2.analysis_defs import AnalysisDefs, plan_analysis, write_groups, write_markers
from di.convert.otf2.archive import is_anchor
from di.convert.otf2.iofiles import write_io_file_properties
from di.convert.otf2.iolayout import write_io_definitions
from di.convert.otf2.layout import Layout, plan
from di.convert.otf2.sideprops import set_side_property
from di.convert.otf2.ditrace import set_own_property
from di.errors import FormatError
from di.trace import Trace

__all__ = ["write_otf2", "anchor_for"]

REGION_WRITER = "OTF2_GlobalDefWriter_WriteRegion"
"""The C function that writes a region (:func:`emit.write_definitions`)."""

CHUNK_EVENTS = 1 << 20
"""OTF2 event chunk size in bytes (1 MiB), each chunk mapped on its own and reused (:mod:`chunkpool`).

The library writes its end-of-chunk marker over the rest of each buffer's chunk when it closes the buffer, whatever
the buffer holds, so a location costs a whole chunk of pages. ``di convert`` of a generated 512-rank job (1,536
locations of about 220 events each, bench/many_ranks.py's) to OTF2, whole process: with 4 MiB chunks 22.6-27.9 CPU-s
(17-22 of them system time, in ``Archive_CloseEvtWriter``/``CloseDefWriter``), with 1 MiB 9.5-10.1, and with the
chunks of closed buffers taking the next ones' records (one location's buffer open at a time) 2.5-2.6, the same
peak RSS (410-430 MB). The real-shaped 1.2 M-event profile of a few locations writes in the same time with 1 or
4 MiB. Smaller chunks gain nothing once chunks are reused, and a chunk bounds the largest record (an args text is
one string definition)."""
CHUNK_DEFS = CHUNK_EVENTS
"""OTF2 definition chunk size in bytes (the local definitions of each location and the global ones)."""


def anchor_for(path: str | os.PathLike[str]) -> Path:
    """The anchor file written for ``path``: itself when it ends with ``.otf2``, else ``path/traces.otf2``."""
    p = Path(path)
    return p if p.name.endswith(".otf2") else p / "traces.otf2"


def is_own_archive(anchor: Path) -> bool:
    """True when ``anchor`` is the anchor file of an OTF2 archive that di wrote
    (the anchor holds the creator string ``di VERSION``, NUL-terminated, and di's description)."""
    with open(anchor, "rb") as fh:
        head = fh.read(4096)
    return is_anchor(head) and b"\x00written by di from " in head


def write_otf2(trace: Trace, path: str | os.PathLike[str]) -> None:
    """Write ``trace`` as an OTF2 archive, replacing one that di wrote.

    The archive is written into a hidden sibling folder, then its parts move into
    place anchor last, under a journal that the next di finishes if this run is
    killed between two moves (:func:`di.output.replace_parts`).

    Args:
        trace: the canonical trace.
        path: the anchor file (``NAME.otf2``: ``NAME.def`` and ``NAME/`` are
            written beside it) or a directory (``traces.otf2`` inside it).

    Raises:
        OutputError: the target holds an archive (or anything else) that di did not write.
        FormatError: the OTF2 library reports an error.
        OSError: the file system refused (full disk, permission, read-only).
    """
    import _otf2

    from di.output import clean_leftovers, make_parent, replace_parts, staged_name

    anchor = anchor_for(path)
    make_parent(anchor)
    clean_leftovers(anchor)
    parts = _check_parts(anchor)
    lay = plan(trace)
    extra = plan_analysis(trace, lay)
    staged = staged_name(anchor)
    staged.mkdir()
    try:
        with clib.collected_errors() as errors:
            try:
                _write_archive(_otf2, staged, anchor, lay, extra)
            except (_otf2.Error, FormatError) as exc:
                raise _write_error(anchor, errors, exc) from None
        replace_parts(staged, anchor.parent, parts)
    except BaseException:
        shutil.rmtree(staged, ignore_errors=True)
        raise


def _write_archive(_otf2: object, staged: Path, anchor: Path, lay: Layout, extra: AnalysisDefs) -> None:
    o = _otf2
    archive = o.Archive_Open(
        str(staged),
        anchor.stem,
        o.FILEMODE_WRITE,
        CHUNK_EVENTS,
        CHUNK_DEFS,
        o.SUBSTRATE_POSIX,
        o.COMPRESSION_NONE,
    )
    pool = chunkpool.callback_data()  # the memory callbacks' data: alive until the archive is closed
    try:
        _check(chunkpool.set_callbacks(clib.library(), clib.handle(archive), pool), anchor, "memory callbacks")
        _write(archive, lay, anchor, extra)
    finally:
        try:
            o.Archive_Close(archive)
        finally:
            chunkpool.release(pool)
    del pool


def _write_error(anchor: Path, codes: list[int], exc: Exception) -> Exception:
    """The OS error the OTF2 library met (a full disk), else a FormatError with its own words."""
    for code in codes:
        name = clib.error_text(code).split(":", 1)[0]
        number = getattr(errno, name, None) if name.startswith("E") else None  # OTF2 names errno codes as errno does
        if isinstance(number, int):
            return OSError(number, os.strerror(number), str(anchor))
    return FormatError(anchor, f"OTF2 library failed writing the archive ({exc})")


def _check_parts(anchor: Path) -> list[str]:
    """The archive's part names (events, definitions, markers), anchor last; refuses parts of an archive di did not write."""
    from di.errors import OutputError

    parts = [anchor.stem, anchor.stem + ".def", anchor.stem + ".marker", anchor.name]
    if anchor.exists() and not is_own_archive(anchor):
        raise OutputError(anchor, "exists and is not an OTF2 archive di wrote; choose another output path")
    evt_dir = anchor.with_suffix("")
    if evt_dir.is_dir() and any(not f.name.endswith((".evt", ".def")) for f in evt_dir.iterdir()):
        raise OutputError(evt_dir, "holds files other than OTF2 .evt/.def; not replacing it")
    if not anchor.exists() and (evt_dir.exists() or anchor.with_suffix(".def").exists()):
        raise OutputError(
            anchor.parent, f"holds parts of an OTF2 archive named {anchor.stem} without its anchor; not replacing them"
        )
    return parts


def _check(code: int, anchor: Path, what: str) -> None:
    if code:
        raise FormatError(anchor, f"OTF2 library failed writing {what}: {clib.error_text(code)}")


def _write(archive: object, lay: Layout, anchor: Path, extra: AnalysisDefs) -> None:
    import _otf2

    from di import __version__

    lib = clib.library()
    handle = clib.handle(archive)
    flush = (ctypes.c_void_p * 2)(emit.pre_flush.address, None)
    lib.OTF2_Archive_SetFlushCallbacks.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    _check(lib.OTF2_Archive_SetFlushCallbacks(handle, ctypes.addressof(flush), None), anchor, "flush callbacks")
    _otf2.Archive_SetSerialCollectiveCallbacks(archive)
    _otf2.Archive_SetCreator(archive, f"di {__version__}")
    _otf2.Archive_SetDescription(archive, lay.description)
    _otf2.Archive_OpenEvtFiles(archive)
    n_out = len(lay.out_locations)
    fns = np.array(clib.addresses(*emit.FN_NAMES), dtype=np.int64)
    lib.OTF2_AttributeList_New.restype = ctypes.c_void_p
    alist = lib.OTF2_AttributeList_New()
    order, start_t, end_t, region, nbytes, ids, id_valid, id_cols, id_refs, args_ref, flows_ref, att = (
        readonly(a)  # whether polars copied them or not: one signature
        for a in (
            lay.order,
            lay.start_t,
            lay.end_t,
            lay.region,
            lay.nbytes,
            lay.ids,
            lay.id_valid,
            lay.id_cols,
            lay.id_refs,
            lay.args_ref,
            lay.flows_ref,
            lay.att,
        )
    )
    bounds, att_bounds, metric_bounds = (readonly(a) for a in (lay.bounds, lay.att_bounds, lay.metric_bounds))
    metrics = tuple(readonly(a) for a in (lay.metric_ts, lay.metric_ref, lay.metric_values))
    metric_of = np.full(n_out, -1, dtype=np.int64)
    metric_of[lay.metric_writers] = np.arange(lay.metric_writers.size)
    stack = emit.stack_for(lay.bounds)
    try:
        # one location's buffer at a time: the chunks of each one closed take the next one's records
        # (chunkpool), where all open at once each faulted in a chunk of fresh pages
        for ref in range(n_out):
            w = _otf2.Archive_GetEvtWriter(archive, ref)
            at = np.array([clib.handle(w)], dtype=np.int64)
            one, att_one = bounds[ref : ref + 2], att_bounds[ref : ref + 2]
            code = emit.emit_events(
                fns, at, alist, lay.attr_refs, order, one, start_t, end_t, region, nbytes, ids, id_valid, id_cols,
                id_refs, args_ref, flows_ref, att, att_one, stack,
            )  # fmt: skip
            _check(code, anchor, "events")
            m = int(metric_of[ref])
            if m >= 0 and metric_bounds[m + 1] > metric_bounds[m]:  # not compiled for the traces without counters
                _check(
                    emit.emit_metrics(fns, at, metric_bounds[m : m + 2], *metrics, readonly(emit.DOUBLE_TYPE_IDS)),
                    anchor,
                    "metrics",
                )
            _otf2.Archive_CloseEvtWriter(archive, w)
    finally:
        lib.OTF2_AttributeList_Delete.argtypes = [ctypes.c_void_p]
        lib.OTF2_AttributeList_Delete(alist)
    _otf2.Archive_CloseEvtFiles(archive)
    _otf2.Archive_OpenDefFiles(archive)
    for ref in range(n_out):
        _otf2.Archive_CloseDefWriter(archive, _otf2.Archive_GetDefWriter(archive, ref))
    _otf2.Archive_CloseDefFiles(archive)
    _global_definitions(_otf2, archive, lay, fns, anchor, extra)
    write_markers(_otf2, archive, extra)
    set_side_property(_otf2, archive, lay.side_text)
    set_own_property(_otf2, archive, lay.own_text)


def _global_definitions(
    _otf2: object, archive: object, lay: Layout, fns: np.ndarray, anchor: Path, extra: AnalysisDefs
) -> None:
    o = _otf2
    g = o.Archive_GetGlobalDefWriter(archive)
    o.GlobalDefWriter_WriteClockProperties(g, 10**9, lay.global_offset, lay.trace_length, lay.realtime)
    first_ref = 0
    for data, starts, ends, rows in lay.strings.chunks():
        scratch = emit.scratch_for(starts, ends, rows)
        _check(
            emit.write_strings(fns, clib.handle(g), np.int64(first_ref), data, starts, ends, rows, scratch),
            anchor,
            "strings",
        )
        first_ref += rows.size
    s = lay.strings.ref
    undefined = o.UNDEFINED_UINT32
    o.GlobalDefWriter_WriteSystemTreeNode(g, 0, s("di"), s("machine"), undefined)
    for i, host in enumerate(lay.hosts, start=1):
        o.GlobalDefWriter_WriteSystemTreeNode(g, i, s(host), s("node"), 0)
    for i, (rank, host_index) in enumerate(lay.groups):
        o.GlobalDefWriter_WriteLocationGroup(
            g, i, s(f"MPI Rank {rank}"), o.LOCATION_GROUP_TYPE_PROCESS, host_index + 1, undefined
        )
    types = {"gpu_stream": o.LOCATION_TYPE_ACCELERATOR_STREAM, "counter": o.LOCATION_TYPE_METRIC}
    for ref, loc in enumerate(lay.out_locations):
        o.GlobalDefWriter_WriteLocation(
            g, ref, s(loc["name"]), types.get(loc["kind"], o.LOCATION_TYPE_CPU_THREAD), loc["records"], loc["group"]
        )
    _check(
        emit.write_definitions(np.int64(clib.address(REGION_WRITER)), clib.handle(g), lay.regions), anchor, "regions"
    )
    for ref, (name, typ) in enumerate(lay.attributes):
        o.GlobalDefWriter_WriteAttribute(g, ref, s(name), 0, getattr(o, f"TYPE_{typ}"))
    o.GlobalDefWriter_WriteGroup(
        g, 0, 0, o.GROUP_TYPE_COMM_LOCATIONS, o.PARADIGM_MPI, o.GROUP_FLAG_NONE, lay.rank_locations
    )
    for ref, comm in enumerate(lay.comms, start=1):
        o.GlobalDefWriter_WriteGroup(
            g, ref, s(comm["group_name"]), o.GROUP_TYPE_COMM_GROUP, o.PARADIGM_MPI, o.GROUP_FLAG_NONE, comm["members"]
        )
        o.GlobalDefWriter_WriteComm(g, ref - 1, s(comm["name"]), ref, undefined, o.COMM_FLAG_NONE)
    write_groups(o, g, extra, len(lay.comms) + 1, s)
    write_io_definitions(o, g, lay.io, s)
    write_io_file_properties(g, lay.io_file_props, anchor)
    for ref, m in enumerate(lay.metric_members):
        o.GlobalDefWriter_WriteMetricMember(
            g,
            ref,
            s(m["name"]),
            0,
            o.METRIC_TYPE_OTHER,
            o.METRIC_ABSOLUTE_POINT,
            o.TYPE_DOUBLE,
            o.BASE_DECIMAL,
            0,
            s(m["unit"] or ""),
        )
        o.GlobalDefWriter_WriteMetricClass(g, ref, [ref], o.METRIC_ASYNCHRONOUS, o.RECORDER_KIND_ABSTRACT)
    lay.strings.check_frozen()
