"""What Kineto (the PyTorch profiler) means by its categories and args.

- ``cat`` mapping to the canonical vocabulary, from the source category and,
  where the category is not enough, the name (NCCL kernels are ``nccl``,
  ``cudaDeviceSynchronize``-like runtime calls are ``sync``, ``ProfilerStep#N``
  is ``step``).
- ``correlation`` ids -> ``flows`` of kind ``launch`` (API call -> GPU
  activity) or ``sync`` (sync call -> ``cuda_sync`` GPU record), where the
  file's own ``ac2g`` flows did not already give the edge.
- ``Collective name`` args (on NCCL kernels, else on ``record_param_comms``
  CPU ops) -> ``collectives`` rows; bytes = ``In msg nelems`` x dtype size.
"""

from __future__ import annotations

import polars as pl

from di.convert.columns import dense_ids

from di.trace import CATS

COMM_KERNEL = r"(?i)^(nccl|ncclDevKernel|rccl|hccl)|nccl"
SYNC_API = r"(?i)synchronize|StreamWaitEvent|EventQuery|StreamQuery|waitOnEvent"
COMM_CPU = r"^(record_param_comms|c10d::|nccl:|gloo:)"

_DIRECT = {
    "kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset", "cuda_runtime": "cuda_api",
    "cuda_driver": "cuda_api", "cuda_sync": "sync", "cpu_op": "compute", "user_annotation": "user",
    "gpu_user_annotation": "user", "python_function": "python", "cpu_instant_event": "other", "Trace": "other",
    # Meta's MTIA accelerator: its runtime API and the device's command processor events
    "mtia_runtime": "cuda_api", "mtia_ccp_events": "kernel",
}

# bytes per element for the dtype names Kineto writes (c10 ScalarType names) and torch's
DTYPE_BYTES = {
    "Byte": 1, "Char": 1, "Bool": 1, "Short": 2, "Int": 4, "Long": 8, "Half": 2, "Float": 4, "Double": 8,
    "ComplexHalf": 4, "ComplexFloat": 8, "ComplexDouble": 16, "BFloat16": 2, "Float8_e5m2": 1,
    "Float8_e4m3fn": 1, "Float8_e5m2fnuz": 1, "Float8_e4m3fnuz": 1, "UInt16": 2, "UInt32": 4, "UInt64": 8,
    "QInt8": 1, "QUInt8": 1, "QInt32": 4, "uint8": 1, "int8": 1, "int16": 2, "int32": 4, "int64": 8,
    "float16": 2, "float32": 4, "float64": 8, "bfloat16": 2, "bool": 1,
}

OPS = {
    "allreduce": "allreduce", "all_reduce": "allreduce", "broadcast": "broadcast", "reduce": "reduce",
    "allgather": "allgather", "all_gather": "allgather", "_allgather_base": "allgather",
    "allgather_into_tensor_coalesced": "allgather", "allgather_coalesced": "allgather",
    "reduce_scatter": "reduce_scatter", "_reduce_scatter_base": "reduce_scatter",
    "reduce_scatter_tensor_coalesced": "reduce_scatter", "all_to_all": "alltoall", "alltoall": "alltoall",
    "all_to_allv": "alltoall", "alltoall_base": "alltoall", "gather": "gather", "scatter": "scatter",
    "barrier": "barrier", "send": "send", "recv": "recv", "recvAnySource": "recv",
}


def canonical_cat(src_cat: pl.Expr, name: pl.Expr) -> pl.Expr:
    """The canonical category of events from their source category and name."""
    direct = src_cat.replace_strict(_DIRECT, default=None, return_dtype=pl.String)
    own = pl.when(src_cat.is_in(list(CATS))).then(src_cat).otherwise(pl.lit("other"))
    return (
        pl.when((src_cat == "kernel") & name.str.contains(COMM_KERNEL)).then(pl.lit("nccl"))
        .when(src_cat.is_in(["cuda_runtime", "cuda_driver", "mtia_runtime"]) & name.str.contains(SYNC_API)).then(pl.lit("sync"))
        .when((src_cat == "mtia_ccp_events") & name.str.contains("(?i)wait")).then(pl.lit("sync"))
        .when(src_cat.is_in(["cpu_op", "user_annotation"]) & name.str.contains(COMM_CPU)).then(pl.lit("nccl"))
        .when((src_cat == "user_annotation") & name.str.starts_with("ProfilerStep#")).then(pl.lit("step"))
        .otherwise(pl.coalesce(direct, own))
        .cast(pl.Enum(list(CATS)))
    )


def events_table(ev: pl.DataFrame, syms: pl.Series, locations: pl.DataFrame) -> pl.DataFrame:
    """Canonical ``events`` columns from sorted, nested intervals with symbol ids."""
    last = syms.len() - 1
    cats = syms.cast(pl.Categorical)
    ids = ev.select(
        pl.col("name").cast(pl.Int64).replace(-1, last).alias("n"), pl.col("cat").cast(pl.Int64).replace(-1, last).alias("c")
    )
    # the canonical category of each distinct (name, cat), then per event
    combo, first = dense_ids(ids, ["n", "c"])
    combos = ids[first]
    strings = syms.to_list()
    canon = combos.select(canonical_cat(
        pl.Series([None if i == last else strings[i] for i in combos.get_column("c").to_list()], dtype=pl.String),
        pl.Series([strings[i] for i in combos.get_column("n").to_list()], dtype=pl.String),
    )).to_series().gather(combo)
    c = ids.get_column("c")
    return ev.select(
        "loc", "start_ns", "end_ns",
        cats.gather(ids.get_column("n")).alias("name"),
        canon.alias("cat"),
        pl.when(c == last).then(None).otherwise(cats.gather(c)).alias("src_cat"),
        "depth", "parent", "corr", "bytes", "instant", "args",
    )


def launch_flows(events: pl.DataFrame, locations: pl.DataFrame, known: pl.DataFrame) -> pl.DataFrame:
    """Correlation-id edges CPU API call -> GPU record of the same rank not already in ``known``
    (correlation ids are per process: a merged job file repeats them on every rank)."""
    if events.get_column("corr").null_count() == events.height:
        return known.clear()
    kinds = locations.select(pl.col("loc").cast(pl.UInt32), "kind", "rank")
    rows = events.select("loc", "corr", "cat").with_row_index("row").filter(pl.col("corr").is_not_null()).join(kinds, on="loc")
    cpu = rows.filter((pl.col("kind") == "cpu_thread") & pl.col("cat").is_in(["cuda_api", "sync"]))
    gpu = rows.filter(pl.col("kind") == "gpu_stream")
    pairs = cpu.join(gpu, on=["corr", "rank"], suffix="_gpu").select(
        pl.col("row").cast(pl.Int64).alias("src"),
        pl.col("row_gpu").cast(pl.Int64).alias("dst"),
        pl.when(pl.col("cat_gpu") == "sync").then(pl.lit("sync")).otherwise(pl.lit("launch")).alias("kind"),
        pl.col("corr").alias("id"),
        pl.lit(None, dtype=pl.String).alias("src_cat"),
    )
    return pairs.join(known.select("src", "dst"), on=["src", "dst"], how="anti")


def sync_kinds(flows: pl.DataFrame, events: pl.DataFrame, locations: pl.DataFrame) -> pl.DataFrame:
    """Launch flows by their destination: a device sync record makes a ``sync``
    edge; a record on a CPU thread (MTIA's ac2g flows between host threads) a
    ``user`` edge."""
    dst = flows.get_column("dst")
    dst_cat = events.get_column("cat").gather(dst)
    kind_of = dict(zip(locations.get_column("loc").to_list(), locations.get_column("kind").cast(pl.String).to_list()))
    on_cpu = events.get_column("loc").gather(dst).replace_strict(kind_of, return_dtype=pl.String) == "cpu_thread"
    launch = pl.col("kind") == "launch"
    return flows.with_columns(
        pl.when(launch & on_cpu).then(pl.lit("user"))
        .when(launch & (dst_cat == "sync")).then(pl.lit("sync"))
        .otherwise(pl.col("kind")).alias("kind")
    )


def _field(key: str, number: bool) -> pl.Expr:
    value = r"(-?\d+)" if number else r'"((?:[^"\\]|\\.)*)"'
    expr = pl.col("args").str.extract(rf'"{key}"\s*:\s*{value}', 1)
    return expr.cast(pl.Int64, strict=False) if number else expr


def collectives(events: pl.DataFrame, locations: pl.DataFrame, rank: int) -> pl.DataFrame:
    """One row per collective call of each rank (a merged job file holds several; ``rank`` where the
    locations name none): its GPU kernels when they carry collective args, else its ``record_param_comms`` CPU ops."""
    kinds = locations.select(pl.col("loc").cast(pl.UInt32), "kind", pl.col("rank").alias("loc_rank"))
    rows = (
        events.select("loc", "start_ns", "args").with_row_index("event")
        .filter(pl.col("args").str.contains('"Collective name"', literal=True))
        .join(kinds, on="loc", how="left", maintain_order="left")
    )
    on_gpu = rows.filter(pl.col("kind") == "gpu_stream")
    rows = on_gpu if on_gpu.height else rows
    rows = rows.with_columns(
        _field("Collective name", False).alias("raw_op"),
        _field("In msg nelems", True).alias("nelems"),
        _field("dtype", False).alias("dtype"),
        _field("Group size", True).cast(pl.Int32).alias("group_size"),
        _field("Process Group Name", False).alias("comm"),
        _field("Process Group Ranks", False).alias("group_ranks"),
        _field("Root", True).cast(pl.Int32).alias("root"),
    ).sort("start_ns", maintain_order=True)
    return rows.with_columns(pl.col("loc_rank").fill_null(rank).cast(pl.Int32).alias("rank")).select(
        pl.col("event").cast(pl.Int64),
        "rank",
        "comm",
        pl.int_range(pl.len(), dtype=pl.Int64).over("comm", "rank").alias("seq"),
        pl.col("raw_op").replace_strict(OPS, default="other", return_dtype=pl.String).alias("op"),
        "root",
        (pl.col("nelems") * pl.col("dtype").replace_strict(DTYPE_BYTES, default=None, return_dtype=pl.Int64)).alias("bytes"),
        "dtype", "group_size", "group_ranks",
    )
