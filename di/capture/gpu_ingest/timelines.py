"""Timelines and launch flows of CUPTI events.

:func:`timelines` gives each event of one process its ``loc``: one ``gpu_stream`` location
per (device, stream) of GPU work (stream -1: device-wide synchronization) and one
``cpu_thread`` location ("CUDA API thread TID") per thread that made API calls or NVTX
ranges, GPU streams first. :func:`launch_flows` links each API call to the GPU work with its
correlation id in the same process.
"""

from __future__ import annotations

import polars as pl


def timelines(
    df: pl.DataFrame, rank: int, host: str, pid: int, loc0: int, source: int
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Give each event its loc (per GPU stream, per API thread); the new locations rows."""
    keys = (
        df.select("gpu", "device", "stream", "tid")
        .with_columns(
            device=pl.when(pl.col("gpu")).then(pl.col("device")).otherwise(-1),
            stream=pl.when(pl.col("gpu")).then(pl.col("stream")).otherwise(-1),
            tid=pl.when(pl.col("gpu")).then(0).otherwise(pl.col("tid")),
        )
        .unique()
        .sort("gpu", "device", "stream", "tid", descending=[True, False, False, False])
        .with_row_index("loc", offset=loc0)
    )
    df = df.with_columns(
        device=pl.when(pl.col("gpu")).then(pl.col("device")).otherwise(-1),
        stream=pl.when(pl.col("gpu")).then(pl.col("stream")).otherwise(-1),
        tl_tid=pl.when(pl.col("gpu")).then(0).otherwise(pl.col("tid")),
    )
    df = df.join(keys.rename({"tid": "tl_tid"}), on=["gpu", "device", "stream", "tl_tid"], how="left").drop("tl_tid")
    locs = keys.select(
        "loc",
        rank=pl.lit(rank, pl.Int32),
        host=pl.lit(host),
        pid=pl.lit(pid, pl.Int64),
        tid=pl.when(pl.col("gpu")).then(None).otherwise(pl.col("tid")),
        kind=pl.when(pl.col("gpu")).then(pl.lit("gpu_stream")).otherwise(pl.lit("cpu_thread")),
        device=pl.when(pl.col("gpu")).then(pl.col("device")),
        stream=pl.when(pl.col("gpu") & (pl.col("stream") >= 0)).then(pl.col("stream")),
        name=pl.when(pl.col("gpu") & (pl.col("stream") < 0))
        .then(pl.format("GPU {} device-wide sync", "device"))
        .when(pl.col("gpu"))
        .then(pl.format("GPU {} stream {}", "device", "stream"))
        .otherwise(pl.format("CUDA API thread {}", "tid")),
        process=pl.lit(f"rank {rank}"),
        source=pl.lit(source, pl.Int32),
    )
    return df, locs


def launch_flows(events: pl.DataFrame) -> pl.DataFrame:
    """API call -> GPU work (kernel, copy, memset) with the same correlation id in the same process (rows
    local). A synchronization record shares its API call's id too, but that call waits, it launches nothing.
    Where a runtime call and the driver call inside it share an id, the outer one (least depth) launches."""
    rows = (
        events.select("pid", "corr", "gpu", "cat", "depth").with_row_index("row").filter(pl.col("corr").is_not_null())
    )
    api = rows.filter(~pl.col("gpu")).sort("depth", "row").unique(["pid", "corr"], keep="first", maintain_order=True)
    act = rows.filter(pl.col("gpu") & (pl.col("cat") != "sync"))
    pairs = api.join(act, on=["pid", "corr"], suffix="_gpu")
    return pairs.select(
        src=pl.col("row").cast(pl.Int64),
        dst=pl.col("row_gpu").cast(pl.Int64),
        kind=pl.lit("launch"),
        id=pl.col("corr"),
        src_cat=pl.lit(None, pl.String),
    )
