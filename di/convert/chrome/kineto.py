"""What Kineto (the PyTorch profiler) means by its categories and args.

- ``cat`` mapping to the canonical vocabulary: :mod:`di.convert.categories`,
  which every connector of CUDA-profiler data shares.
- ``correlation`` ids -> ``flows`` of kind ``launch`` (API call -> GPU
  activity) or ``sync`` (sync call -> ``cuda_sync`` GPU record), where the
  file's own ``ac2g`` flows did not already give the edge.
- ``Collective name`` args (on NCCL kernels, else on ``record_param_comms``
  CPU ops) -> ``collectives`` rows; bytes = ``In msg nelems`` x dtype size.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from di.convert.categories import canonical_cat_rows
from di.convert.columns import dense_row_ids, match_rows, packed_key
from di.schema import optional_schema
from di.trace import CATS


# bytes per element for the dtype names Kineto writes (c10 ScalarType names) and torch's
DTYPE_BYTES = {
    "Byte": 1,
    "Char": 1,
    "Bool": 1,
    "Short": 2,
    "Int": 4,
    "Long": 8,
    "Half": 2,
    "Float": 4,
    "Double": 8,
    "ComplexHalf": 4,
    "ComplexFloat": 8,
    "ComplexDouble": 16,
    "BFloat16": 2,
    "Float8_e5m2": 1,
    "Float8_e4m3fn": 1,
    "Float8_e5m2fnuz": 1,
    "Float8_e4m3fnuz": 1,
    "UInt16": 2,
    "UInt32": 4,
    "UInt64": 8,
    "QInt8": 1,
    "QUInt8": 1,
    "QInt32": 4,
    "uint8": 1,
    "int8": 1,
    "int16": 2,
    "int32": 4,
    "int64": 8,
    "float16": 2,
    "float32": 4,
    "float64": 8,
    "bfloat16": 2,
    "bool": 1,
}

OPS = {
    "allreduce": "allreduce",
    "all_reduce": "allreduce",
    "broadcast": "broadcast",
    "reduce": "reduce",
    "allgather": "allgather",
    "all_gather": "allgather",
    "_allgather_base": "allgather",
    "allgather_into_tensor_coalesced": "allgather",
    "allgather_coalesced": "allgather",
    "reduce_scatter": "reduce_scatter",
    "_reduce_scatter_base": "reduce_scatter",
    "reduce_scatter_tensor_coalesced": "reduce_scatter",
    "all_to_all": "alltoall",
    "alltoall": "alltoall",
    "all_to_allv": "alltoall",
    "alltoall_base": "alltoall",
    "gather": "gather",
    "scatter": "scatter",
    "barrier": "barrier",
    "send": "send",
    "recv": "recv",
    "recvAnySource": "recv",
}


def events_table(ev: pl.DataFrame, syms: pl.Series, locations: pl.DataFrame) -> pl.DataFrame:
    """Canonical ``events`` columns from sorted, nested intervals with symbol ids
    (``name``, ``cat``; -1 for none, ``syms``' last entry is the empty string)."""
    last = syms.len() - 1
    # symbol ids -> text: ``name`` takes the empty string for none, ``src_cat`` null
    texts = pl.concat([syms, pl.Series([None], dtype=pl.String)])
    cats = texts.cast(pl.Categorical)
    n = ev.get_column("name").to_numpy()  # int32 ids, kept int32: half the memory to write and to gather by
    n = np.where(n < 0, n.dtype.type(last), n)
    c = ev.get_column("cat").to_numpy()
    c = np.where(c < 0, c.dtype.type(last + 1), c)
    # the canonical category of each distinct (name, cat), then per event
    combo, first = dense_row_ids(_key([n, c]))
    canon = canonical_cat_rows(texts.gather(c[first]), texts.gather(n[first]))
    return ev.select(
        "loc",
        "start_ns",
        "end_ns",
        cats.gather(n).alias("name"),
        canon.gather(combo).alias("cat"),
        cats.gather(c).alias("src_cat"),
        "depth",
        "parent",
        "corr",
        "bytes",
        "instant",
        "args",
        *(c for c in optional_schema("events") if c in ev.columns),
    )


def _key(columns: list[np.ndarray]) -> np.ndarray:
    """The int64 columns as a key for :func:`dense_row_ids`: one word each when their ranges fit
    (:func:`packed_key`), else stacked."""
    packed = packed_key(columns)
    return packed if packed is not None else np.stack(columns)


def _per_loc(locations: pl.DataFrame, values: np.ndarray) -> np.ndarray:
    """``values`` (one per location row) as an array indexed by ``loc``."""
    loc = locations.get_column("loc").to_numpy().astype(np.int64)
    out = np.zeros(int(loc.max()) + 1 if loc.size else 0, dtype=values.dtype)
    out[loc] = values
    return out


def _kind_is(locations: pl.DataFrame, kind: str) -> np.ndarray:
    return _per_loc(locations, (locations.get_column("kind") == kind).to_numpy())


def _cat_code(cat: str) -> int:
    return CATS.index(cat)


def launch_flows(events: pl.DataFrame, locations: pl.DataFrame, known: pl.DataFrame) -> pl.DataFrame:
    """Correlation-id edges CPU API call -> GPU record of the same rank not already in ``known``
    (correlation ids are per process: a merged job file repeats them on every rank).

    Every API call pairs with every GPU record of its (correlation, rank); edges come
    in the order of their source rows, then of their destination rows."""
    corr_col = events.get_column("corr")
    if corr_col.null_count() == events.height:
        return known.clear()
    # the rows with a correlation id, and their fields (no column of every event made)
    rows = np.flatnonzero(corr_col.is_not_null().to_numpy())
    at = events.get_column("loc").to_numpy()[rows].astype(np.int64)
    corr = corr_col.gather(rows).to_numpy()
    cat = events.get_column("cat").to_physical().to_numpy()
    on_cpu = _kind_is(locations, "cpu_thread")[at] & np.isin(cat[rows], [_cat_code("cuda_api"), _cat_code("sync")])
    on_gpu = _kind_is(locations, "gpu_stream")[at]
    cpu, gpu = rows[on_cpu], rows[on_gpu]
    rank = _per_loc(locations, locations.get_column("rank").fill_null(-1).to_numpy().astype(np.int64))
    # the GPU rows of each (correlation, rank), grouped; each API call fans out to its key's group.
    # One numbering of the GPU keys then the API calls' keys: the GPU rows come first, so their
    # groups are the ids first seen among them, and an API call's key has a group when its id is one.
    cpu_corr = corr[on_cpu]
    ids, first = dense_row_ids(
        _key([np.concatenate([corr[on_gpu], cpu_corr]), np.concatenate([rank[at[on_gpu]], rank[at[on_cpu]]])])
    )
    groups = int(np.searchsorted(first, gpu.size))
    gpu_ids, key = ids[: gpu.size], ids[gpu.size :]
    cpu, cpu_corr, key = cpu[key < groups], cpu_corr[key < groups], key[key < groups]
    by_key = gpu[np.argsort(gpu_ids, kind="stable")]
    count = np.bincount(gpu_ids, minlength=groups)
    fan = count[key]
    src, src_corr = np.repeat(cpu, fan), np.repeat(cpu_corr, fan)
    offset = np.arange(src.size) - np.repeat(np.cumsum(fan) - fan, fan)
    dst = by_key[np.repeat((np.cumsum(count) - count)[key], fan) + offset]
    if known.height:
        new = _not_known(known, src, dst, events.height)
        src, dst, src_corr = src[new], dst[new], src_corr[new]
    return pl.DataFrame(
        {
            "src": src.astype(np.int64),
            "dst": dst.astype(np.int64),
            "kind": np.where(cat[dst] == _cat_code("sync"), "sync", "launch") if dst.size else np.zeros(0, dtype=str),
            "id": src_corr.astype(np.int64),
            "src_cat": pl.Series([None] * src.size, dtype=pl.String),
        },
        schema=known.schema,
    )


def _not_known(known: pl.DataFrame, src: np.ndarray, dst: np.ndarray, n_events: int) -> np.ndarray:
    """Which edges (src, dst) are not among the ``known`` flows' (src, dst).

    By destination: an array over the events holds the source of the one known flow into each
    (a pass over the edges, where hashing both sets of pairs took three times as long); only the
    edges into an event that several known flows with different sources enter are looked up
    among the pairs."""
    ks = known.get_column("src").to_numpy()
    kd = known.get_column("dst").to_numpy()
    if (
        known.get_column("src").null_count()
        or known.get_column("dst").null_count()
        or not (0 <= kd.min() and kd.max() < n_events)
    ):
        return match_rows(np.stack([ks, kd]).astype(np.int64), np.stack([src, dst]).astype(np.int64)) < 0
    only = np.full(n_events, -1, dtype=np.int64)
    only[kd] = ks
    only[kd[only[kd] != ks]] = -2  # several known sources: looked up below
    found = only[dst]
    new = found != src
    several = np.flatnonzero(found == -2)
    if several.size:
        pairs = np.stack([ks, kd]).astype(np.int64)
        new[several] = match_rows(pairs, np.stack([src[several], dst[several]]).astype(np.int64)) < 0
    return new


def sync_kinds(flows: pl.DataFrame, events: pl.DataFrame, locations: pl.DataFrame) -> pl.DataFrame:
    """Launch flows by their destination: a device sync record makes a ``sync``
    edge; a record on a CPU thread (MTIA's ac2g flows between host threads) a
    ``user`` edge."""
    dst = flows.get_column("dst").to_numpy()
    on_cpu = _kind_is(locations, "cpu_thread")[events.get_column("loc").to_numpy()[dst]]
    to_sync = events.get_column("cat").to_physical().to_numpy()[dst] == _cat_code("sync")
    launch = pl.col("kind") == "launch"
    return flows.with_columns(
        pl.when(launch & pl.lit(pl.Series(on_cpu)))
        .then(pl.lit("user"))
        .when(launch & pl.lit(pl.Series(to_sync)))
        .then(pl.lit("sync"))
        .otherwise(pl.col("kind"))
        .alias("kind")
    )


def _field(key: str, number: bool) -> pl.Expr:
    value = r"(-?\d+)" if number else r'"((?:[^"\\]|\\.)*)"'
    expr = pl.col("args").str.extract(rf'"{key}"\s*:\s*{value}', 1)
    return expr.cast(pl.Int64, strict=False) if number else expr


def collectives(events: pl.DataFrame, locations: pl.DataFrame, rank: int, flagged: np.ndarray) -> pl.DataFrame:
    """One row per collective call of each rank (a merged job file holds several; ``rank`` where the
    locations name none): its GPU kernels when they carry collective args, else its ``record_param_comms`` CPU ops.

    ``flagged``: the rows of the events whose args have a ``"Collective name"`` member
    (the scanner's ``F_COLL``)."""
    kinds = locations.select(pl.col("loc").cast(pl.UInt32), "kind", pl.col("rank").alias("loc_rank"))
    calls = events.select("loc", "start_ns", "args").with_row_index("event")[flagged]
    rows = calls.join(kinds, on="loc", how="left", maintain_order="left")
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
        (pl.col("nelems") * pl.col("dtype").replace_strict(DTYPE_BYTES, default=None, return_dtype=pl.Int64)).alias(
            "bytes"
        ),
        "dtype",
        "group_size",
        "group_ranks",
    )
