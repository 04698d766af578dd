"""The NCCL events of a log together: the collectives (:mod:`.collectives`), one ``ncclCommInit`` instant per
communicator and rank, and the WARN lines and errors (:mod:`.instants`), each at the time of the one clock every
event has (:func:`_clock`: the lines' timestamps, TRACE's milliseconds since start, the nearest timestamped line of
the file, or the line order) and on its track."""

from __future__ import annotations

import polars as pl

from di.convert.logs.nccl.heads import TRACK

EVENT_COLS = ["rank", "host", "pid", "dev", "line", "ts_ns", "ms_ns", "name", "cat", "instant", "args"]
"""The columns every NCCL event has before its time and track."""
COLL_COLS = ["op", "comm", "seq", "instance_key", "root", "dtype", "group_size", "bytes"]
"""The columns a collective has besides :data:`EVENT_COLS`."""
EPOCH_CLOCKS = ("timestamps", "nearest_line_timestamp")
"""The clocks (:func:`_clock`) whose times are ns since the Unix epoch."""


def _init_events(comms: pl.DataFrame) -> pl.DataFrame:
    """One ``ncclCommInit`` instant per row of ``comms`` (with its ``grank``), the communicator in its args."""
    return comms.with_columns(
        pl.lit("ncclCommInit").alias("name"),
        pl.lit("nccl").alias("cat"),
        pl.lit(True).alias("instant"),
        pl.col("grank").alias("rank"),
        pl.struct(
            pl.col("comm_key").alias("comm"),
            pl.col("comm").alias("comm_ptr"),
            pl.col("crank").alias("comm_rank"),
            "nranks",
            "cudadev",
            "busid",
            "version",
            "state",
            "line",
        )
        .struct.json_encode()
        .alias("args"),
    )


def _clock(ev: pl.DataFrame, lines: pl.DataFrame) -> str:
    """The clock of the events ``ev`` (``info.nccl.time``): ``timestamps`` where every event's line has one, else
    ``trace_ms_since_start`` where every one has TRACE's milliseconds, else ``nearest_line_timestamp`` where some
    line of the file has a time (``line_ts``), else ``line_order``."""
    if ev.get_column("ts_ns").is_not_null().all():
        return "timestamps"
    if ev.get_column("ms_ns").is_not_null().all():
        return "trace_ms_since_start"
    # the time of the nearest timestamped line of the file (another library's, a training log's), kept in line order
    if "line_ts" in lines.columns and lines.get_column("line_ts").is_not_null().any():
        return "nearest_line_timestamp"
    return "line_order"


def _timed_events(
    lines: pl.DataFrame, coll: pl.DataFrame, inits: pl.DataFrame, inst: pl.DataFrame
) -> tuple[pl.DataFrame, str]:
    """The collectives ``coll``, ``ncclCommInit`` instants ``inits`` and WARN lines and errors ``inst`` as one table
    with ``start_ns``, ``end_ns`` and ``track``, and their clock (:func:`_clock`)."""
    ev = pl.concat([coll[EVENT_COLS + COLL_COLS], inits[EVENT_COLS], inst[EVENT_COLS]], how="diagonal_relaxed")
    clock = _clock(ev, lines)
    if clock == "nearest_line_timestamp":
        ev = ev.join(lines[["line", "line_ts"]], on="line", how="left")
        t = pl.col("line_ts") + (pl.col("line").cast(pl.Int64) - pl.col("line").cast(pl.Int64).min().over("line_ts"))
        return ev.with_columns(t.alias("start_ns"), t.alias("end_ns"), TRACK.alias("track")), clock
    if clock == "timestamps":
        t = pl.col("ts_ns")
    else:
        t = pl.col("ms_ns") if clock == "trace_ms_since_start" else pl.col("line").cast(pl.Int64)
    # the collectives' tracks were formatted once per kind of COLL line, in the rows' order
    track = pl.concat([coll.get_column("track"), inits.select(TRACK).to_series(), inst.select(TRACK).to_series()])
    return ev.with_columns(t.alias("start_ns"), t.alias("end_ns"), track.alias("track")), clock
