"""Samples of a training log: one per numeric pair of a non-step key (:func:`~.pairs._pairs`), at its line's rank and
time, a repeat of one (rank, series, time, value) kept once (HF Trainer prints its metrics once per rank).

In a log without timestamps, the samples of Megatron's iteration lines sit at the end of their iteration (its
cumulative time, :func:`~.steps._megatron_steps`), and the other lines (errors) at the end of the iteration line
before them (:func:`_at_iterations`).
"""

from __future__ import annotations

import polars as pl

from di.convert.logs.training.pairs import _group_ids, _of_key, _of_pair, _of_row


def _samples(
    rows: pl.DataFrame,
    pairs: pl.DataFrame,
    vals: pl.DataFrame,
    keys: pl.DataFrame,
    *,
    scan: bool,
    iteration_ends: pl.DataFrame | None,
) -> pl.DataFrame:
    """The samples of ``rows``' pairs (:func:`~.pairs._pairs`' tables): ``rank``, ``track``, ``series``, ``unit``,
    ``ts_ns``, ``value``. ``scan``: the lines were read by the numba scans (their repeats are found by one too);
    ``iteration_ends``: Megatron's steps, where a log without timestamps times its samples by them, else None."""
    key = _sample_pairs(rows, pairs, vals, keys)
    if iteration_ends is not None:  # no timestamps: Megatron samples sit at their cumulative iteration time
        key = (
            key.with_columns(_of_row(key, rows, "line"))
            .join(iteration_ends.select("line", pl.col("end_ns").alias("mts")), on="line", how="left")
            .with_columns(pl.coalesce("mts", "ts").alias("ts"))
        )
    key = _first_samples(key, rows, vals, keys, scan=scan, by_line=iteration_ends is None)
    return key.select(
        "rank",
        pl.lit("training").alias("track"),
        _of_key(key, keys, "series"),
        pl.coalesce(_of_key(key, keys, "unit"), _of_pair(key, vals, "u")).alias("unit"),
        pl.col("ts").alias("ts_ns"),
        "value",
    )


def _sample_pairs(rows: pl.DataFrame, pairs: pl.DataFrame, vals: pl.DataFrame, keys: pl.DataFrame) -> pl.DataFrame:
    """The pairs that are samples (a non-step key with a value) with their line's ``rank`` and ``ts`` and their
    ``code`` and ``value``."""
    # samples: the pairs of a non-step key with a value, told per distinct pair
    sample = keys.get_column("sample").gather(vals.get_column("code")) & vals.get_column("value").is_not_null()
    key = pairs.filter(sample.gather(pairs.get_column("at")))
    return key.with_columns(
        _of_row(key, rows, "rank"),
        _of_row(key, rows, "ts"),
        _of_pair(key, vals, "code"),
        _of_pair(key, vals, "value"),
    )


def _first_samples(
    key: pl.DataFrame, rows: pl.DataFrame, vals: pl.DataFrame, keys: pl.DataFrame, *, scan: bool, by_line: bool
) -> pl.DataFrame:
    """``key`` (:func:`_sample_pairs`) with the first sample of each (rank, series, time, value) only: by the scan's
    :func:`~di.convert.logs.pairscan.first_samples` where ``scan``, else by ids where ``by_line`` (a sample's rank
    and time are its line's), else by the four columns."""
    # HF prints once per rank: one sample per (rank, series, time, value), by the series' number, not its name
    first = None
    if scan:
        from di.convert.logs.pairscan import first_samples

        first = first_samples(
            key.get_column("rank"), key.get_column("ts"), _of_key(key, keys, "sid"), key.get_column("value")
        )
    if first is not None:
        return key.filter(first)
    if by_line:  # a pair's rank and time are its line's: (rank, time) told per line, (series, value) per distinct
        # pair, then a sample's four are one integer (a hash of four columns per sample costs twice as much)
        _, line_rt = _group_ids(rows.select("rank", "ts"))
        _, pair_sv = _group_ids(pl.DataFrame([keys.get_column("sid").gather(vals.get_column("code")), vals["value"]]))
        both = line_rt.gather(key.get_column("r")).cast(pl.UInt64) * 2**32 + pair_sv.gather(key.get_column("at"))
        return key.filter(both.is_first_distinct())
    return key.with_columns(_of_key(key, keys, "sid")).unique(
        ["rank", "sid", "ts", "value"], keep="first", maintain_order=True
    )


def _at_iterations(inst: pl.DataFrame, iteration_ends: pl.DataFrame) -> pl.DataFrame:
    """The instants ``inst`` of a log without timestamps at the end of the Megatron iteration line before each
    (``iteration_ends``' ``end_ns``; 0 before the first)."""
    # other lines (errors) sit at the time of the iteration line before them
    marks = iteration_ends.select(pl.col("line"), pl.col("end_ns").alias("mts")).sort("line")
    return (
        inst.sort("line")
        .join_asof(marks, on="line", strategy="backward", check_sortedness=False)
        .with_columns(pl.col("mts").fill_null(0).alias("start_ns"), pl.col("mts").fill_null(0).alias("end_ns"))
        .drop("mts")
    )
