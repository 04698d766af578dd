"""Step events of a training log: Megatron's logged intervals, the timestamped step lines of the other producers and
MLPerf's ``*_start``/``*_stop`` pairs (see the package docstring), and each step line's step number.

The step events are read from the lines with a kind (``rows``) and :func:`~.pairs._pairs`' tables, with
``rank``, ``start_ns``, ``end_ns``, ``name``, ``cat`` (``step``), ``instant``, ``args`` and ``line``.
"""

from __future__ import annotations

import polars as pl

from di.convert.logs.build import keep_counted
from di.convert.logs.training.pairs import _of_pair
from di.convert.logs.training.patterns import MEGATRON_RE


def _steps_of(pairs: pl.DataFrame, vals: pl.DataFrame, keys: pl.DataFrame, rows: pl.DataFrame) -> pl.DataFrame:
    """Per line that has a step key: its step number (the first step key it has, in :data:`STEP_KEYS`' order)."""
    o = keys.get_column("o").gather(vals.get_column("code"))
    st = pairs.select("r", _of_pair(pairs, vals, "value"), o.gather(pairs.get_column("at")))
    st = st.drop_nulls("o").sort("r", "o").unique("r", keep="first")
    step = st.get_column("value").cast(pl.Int64, strict=False)  # beyond int64 (a garbled 1e23): the line has no step
    return pl.DataFrame({"line": rows.get_column("line").gather(st.get_column("r")), "step": step}).drop_nulls("step")


def _megatron_steps(
    rows: pl.DataFrame,
    pairs: pl.DataFrame,
    vals: pl.DataFrame,
    keys: pl.DataFrame,
    epoch: bool,
    dropped: dict[str, int],
) -> pl.DataFrame:
    """Megatron's iteration lines as ``step`` events: each ends at its line's time (or, with no timestamps, at the
    cumulative elapsed time of its rank) and lasts its elapsed time per iteration times the iterations since the
    last line. A line whose iteration or time is beyond int64 ns, or whose time is negative, is counted in
    ``dropped`` and left out."""
    elapsed = keys.get_column("key").str.starts_with("elapsed_time_per_iteration").arg_true().cast(pl.Int64)
    el = pairs.filter((rows.get_column("kind") == "megatron").gather(pairs.get_column("r")))  # Megatron lines' pairs
    el = el.filter(_of_pair(el, vals, "code").is_in(elapsed.implode()))  # then those of these few keys
    mg = rows.select(pl.col("line", "rank", "ts", "text").gather(el.get_column("r"))).with_columns(
        _of_pair(el, vals, "value")
    )
    mg = mg.with_columns(pl.col("text").str.extract(MEGATRON_RE).cast(pl.Int64, strict=False).alias("it"))
    mg = mg.with_columns((pl.col("it") - pl.col("it").shift(1).over("rank").fill_null(0)).clip(1).alias("n"))
    ns = pl.col("value") * pl.col("n") * 1e6
    # a time beyond int64 ns, alone or summed over the rank's lines before it (no timestamps), or a negative one
    reason = "Megatron iteration lines with a negative time or one beyond int64 ns"
    mg = keep_counted(mg, (ns >= 0) & (ns < 2.0**62), dropped, reason)
    if not epoch:
        mg = keep_counted(mg, ns.cum_sum().over("rank") < 2.0**62, dropped, reason)
    dur = ns.round().cast(pl.Int64)
    end = pl.col("ts") if epoch else dur.cum_sum().over("rank")
    return mg.with_columns(end.alias("end_ns")).select(
        "rank",
        (pl.col("end_ns") - dur).alias("start_ns"),
        "end_ns",
        pl.format("iteration {}", "it").alias("name"),
        pl.lit("step").alias("cat"),
        pl.lit(False).alias("instant"),
        pl.struct(
            pl.col("it").alias("iteration"),
            pl.col("n").alias("iterations"),
            pl.col("value").alias("ms_per_iteration"),
            "line",
        )
        .struct.json_encode()
        .alias("args"),
        "line",
    )


def _timed_steps(rows: pl.DataFrame) -> pl.DataFrame:
    """Step k ends at its line; it starts where the step line before it (same rank and producer) ended."""
    s = (
        rows.filter(
            pl.col("kind").is_in(["deepspeed", "torchtitan", "jsonl"])
            & pl.col("step").is_not_null()
            & pl.col("own_ts").is_not_null()
        )
        .unique(["rank", "kind", "step"], keep="first")
        .sort("line")
    )
    s = s.with_columns(pl.col("own_ts").shift(1).over("rank", "kind").alias("prev"))
    return s.filter(pl.col("prev").is_not_null() & (pl.col("prev") <= pl.col("own_ts"))).select(
        "rank",
        pl.col("prev").alias("start_ns"),
        pl.col("own_ts").alias("end_ns"),
        pl.format("step {}", "step").alias("name"),
        pl.lit("step").alias("cat"),
        pl.lit(False).alias("instant"),
        pl.struct("step", "kind", "line").struct.json_encode().alias("args"),
        "line",
    )


def _mllog_steps(rows: pl.DataFrame) -> pl.DataFrame:
    """MLPerf's ``<what>_start`` and ``<what>_stop`` lines of one rank, ``what`` and epoch or block number as a
    ``step`` event from the first start to its stop (one that stops before it starts is left out)."""
    ml = (
        rows.filter(pl.col("kind") == "mllog")
        .with_columns(
            pl.col("text").str.extract(r"\"key\":\s*\"(\w+)_(?:start|stop)\"").alias("what"),
            pl.col("text").str.extract(r"\"key\":\s*\"\w+_(start|stop)\"").alias("edge"),
            pl.col("text").str.extract(r"\"(?:epoch_num|block_num|first_epoch_num)\":\s*(\d+)").alias("num"),
        )
        .drop_nulls("what")
    )
    starts = ml.filter(pl.col("edge") == "start").select("rank", "what", "num", pl.col("ts").alias("start_ns"), "line")
    stops = ml.filter(pl.col("edge") == "stop").select("rank", "what", "num", pl.col("ts").alias("end_ns"))
    j = starts.join(stops, on=["rank", "what", "num"], how="inner", nulls_equal=True).unique(
        ["rank", "what", "num"], keep="first"
    )
    return j.filter(pl.col("end_ns") >= pl.col("start_ns")).select(
        "rank",
        "start_ns",
        "end_ns",
        pl.format("{} {}", "what", pl.col("num").fill_null("")).str.strip_chars().alias("name"),
        pl.lit("step").alias("cat"),
        pl.lit(False).alias("instant"),
        pl.struct("what", "num", "line").struct.json_encode().alias("args"),
        "line",
    )
