"""What a training log says about the phases of its steps: Megatron's timers, evaluations and checkpoint saves.

- **Megatron's timers**, printed after each logged interval, in either of its two layouts::

      time (ms) | forward-compute: 302.84 | backward-compute: 246.84 | optimizer: 14.04 | batch-generator: 11.72

      (min, max) time across ranks (ms):
          forward-backward ...............................: (1083.59, 1083.82)
          batch-generator ................................: (0.91, 1.20)

  DeepSpeed's ``wall_clock_breakdown`` prints the first layout too (``[Rank 0] time (ms) | fwd_microstep: 77.03 |
  bwd_microstep: 160.23 | step_microstep: 12.32``). Each timer is a sample of the series ``<name>-time`` (ms, per
  iteration of the interval for Megatron; the name Megatron gives it in TensorBoard), of the across-ranks maximum
  in the second layout (the time the step waited for). A timer line after a step line (Megatron's iteration line,
  DeepSpeed's ``step=N``) is that step's: its samples sit at that step's end, so they fall in it, whatever the
  timer line's own timestamp (setup timers before the first step keep their line's time).
- **Evaluations**: Megatron's ``validation loss at iteration N | lm loss value: X | lm loss PPL: Y`` gives the
  samples ``val_loss`` and ``val_ppl`` and an instant ``evaluation``; HF Trainer's ``***** Running Evaluation *****``
  an instant ``evaluation``.
- **Checkpoint saves**: Megatron's ``saving checkpoint at iteration N``, HF Trainer's and DeepSpeed's ``Saving model
  checkpoint``: an instant ``checkpoint save`` (Megatron's ``successfully saved checkpoint`` line after it is read too).

An instant's time is its line's (the nearest timestamp before it, or the end of the iteration line before it in a log
without timestamps): an evaluation or a save printed after step k's line is at k's end, where step k + 1 begins.
"""

from __future__ import annotations

import polars as pl

from di.convert.logs.build import empty_events, empty_samples, line_instants

__all__ = ["PHASES_RE", "step_phases"]

TIMERS_LINE = "time (ms) |"
TIMERS_HEAD = "(min, max) time across ranks (ms):"
TIMER_ROW_RE = r"^\s+([\w\-/.]+?) \.+: \(([-+\d.eE]+), ([-+\d.eE]+)\)\s*$"
"""A timer of the second layout: its name, then dots, then ``(min, max)``."""
VALIDATION_RE = r"validation loss at iteration\s+\d+\s*\|"
CHECKPOINT_RE = r"\bsaving checkpoint at iteration\b|\bSaving model checkpoint\b"
EVALUATION_RE = r"\*\*\*\*\* Running Evaluation \*\*\*\*\*"
SAVED_RE = r"successfully saved checkpoint at iteration"
"""Megatron's line after a save: read, no second instant."""
PHASES_RE = (
    r"time \(ms\) \||\.\.\.: \(|validation loss at|saving checkpoint at|Saving model checkpoint|Running Evaluation"
    r"|successfully saved checkpoint"
)
"""Literals one of which every line this module reads holds: one search of the whole text finds them."""


def step_phases(lines: pl.DataFrame, steps: pl.DataFrame | None) -> tuple[pl.DataFrame, pl.DataFrame, pl.Series]:
    """The timers' and evaluations' samples, the evaluation and checkpoint instants, and the lines read.

    Args:
        lines: the log's lines with ``line``, ``text``, ``rank``, ``ts`` (ns, as the training parser times them) and
            ``own_ts`` (the line's own timestamp, null where it has none).
        steps: the step events the log's step lines gave (``line``, ``rank``, ``end_ns``: Megatron's iteration
            lines, or DeepSpeed's and the other producers' timestamped step lines), or None.

    Returns:
        (samples: ``rank``, ``track``, ``series``, ``unit``, ``ts_ns``, ``value``; instants: ``rank``, ``start_ns``,
        ``end_ns``, ``name``, ``cat``, ``instant``, ``args``, ``line`` (:func:`~di.convert.logs.build.line_instants`);
        the line numbers read).
    """
    own = pl.col("own_ts") if "own_ts" in lines.columns else pl.lit(None, pl.Int64)
    found = lines.select("line", "rank", "ts", own.alias("own_ts"), "text").filter(
        pl.col("text").str.contains(PHASES_RE)
    )
    if not found.height:
        return empty_samples(), empty_events(), pl.Series("line", [], pl.UInt32)
    found = _after_step(found, steps)
    timers, val = _timers(found), _validations(found)
    samples = (
        pl.concat([timers.select("line", "rank", "ts", "series", "unit", "value"), val])
        .drop_nulls("value")
        .select(
            "rank",
            pl.lit("training").alias("track"),
            "series",
            "unit",
            pl.col("ts").alias("ts_ns"),
            "value",
        )
    )
    events = _phase_instants(found)
    text = pl.col("text")
    read = pl.concat([timers.get_column("line"), val.get_column("line"), events.get_column("line")]).unique()
    heads = found.filter(text.str.contains(TIMERS_HEAD, literal=True) | text.str.contains(SAVED_RE)).get_column("line")
    return samples, events, pl.concat([read, heads]).cast(pl.UInt32).unique().sort()


def _timers(found: pl.DataFrame) -> pl.DataFrame:
    """The timers of the lines ``found`` (:func:`_after_step`'s), in either layout: ``line``, ``rank``, ``ts`` (the
    end of the step line before them: :func:`_after_step`'s ``step_ts``), ``step_ts``, ``name``, ``value`` (ms,
    null where unreadable), ``series`` (``<name>-time``) and ``unit``."""
    text = pl.col("text")
    flat = found.filter(text.str.contains(TIMERS_LINE, literal=True)).with_columns(
        text.str.split(TIMERS_LINE).list.last().str.extract_all(r"([\w\-/.]+): ([-+\d.eE]+)").alias("pair")
    )
    flat = flat.explode("pair").drop_nulls("pair")
    flat = flat.select(
        "line",
        "rank",
        "ts",
        "step_ts",
        pl.col("pair").str.extract(r"^([\w\-/.]+):").alias("name"),
        pl.col("pair").str.extract(r": ([-+\d.eE]+)$").cast(pl.Float64, strict=False).alias("value"),
    )
    rows = found.filter(text.str.contains(TIMER_ROW_RE)).select(
        "line",
        "rank",
        "ts",
        "step_ts",
        text.str.extract(TIMER_ROW_RE, 1).alias("name"),
        text.str.extract(TIMER_ROW_RE, 3).cast(pl.Float64, strict=False).alias("value"),
    )
    return pl.concat([flat, rows]).with_columns(
        pl.format("{}-time", "name").alias("series"), pl.lit("ms").alias("unit"), pl.col("step_ts").alias("ts")
    )


def _validations(found: pl.DataFrame) -> pl.DataFrame:
    """Megatron's validation lines among ``found``: a ``val_loss`` and a ``val_ppl`` row each (``line``, ``rank``,
    ``ts``, ``series``, ``unit``, ``value``; null where the line gives none)."""
    text = pl.col("text")
    val = found.filter(text.str.contains(VALIDATION_RE))
    return pl.concat(
        [
            val.select(
                "line",
                "rank",
                "ts",
                pl.lit(s).alias("series"),
                pl.lit(None, pl.String).alias("unit"),
                v.cast(pl.Float64, strict=False).alias("value"),
            )
            for s, v in (
                ("val_loss", text.str.extract(r"loss value:\s*([-+\d.eE]+|nan|inf)")),
                ("val_ppl", text.str.extract(r"PPL:\s*([-+\d.eE]+|nan|inf)")),
            )
        ]
    )


def _phase_instants(found: pl.DataFrame) -> pl.DataFrame:
    """The ``evaluation`` and ``checkpoint save`` instants of the lines ``found``, cat ``user``."""
    text = pl.col("text")
    name = (
        pl.when(text.str.contains(VALIDATION_RE) | text.str.contains(EVALUATION_RE))
        .then(pl.lit("evaluation"))
        .when(text.str.contains(CHECKPOINT_RE))
        .then(pl.lit("checkpoint save"))
    )
    return line_instants(found.with_columns(name.alias("name")).filter(pl.col("name").is_not_null()), "user")


def _after_step(found: pl.DataFrame, steps: pl.DataFrame | None) -> pl.DataFrame:
    """``found`` with ``ts`` its own timestamp, else the end of the step line before it, else the time the training
    parser gave it (where marks are), and ``step_ts`` the end of the step line before it first (where a timer's
    samples are: they report the interval that line closed)."""
    if steps is None or not steps.height:  # ``ts`` is the line's own timestamp where it has one
        return found.with_columns(pl.col("ts").alias("step_ts"))
    by = pl.col("rank").fill_null(-1).alias("by")  # a log without rank tags has null ranks (its file's rank, later)
    ends = steps.select(pl.col("line").cast(pl.Int64).alias("k"), by, pl.col("end_ns").alias("it_ns")).sort("k")
    return (
        found.with_columns(pl.col("line").cast(pl.Int64).alias("k"), by)
        .sort("k")
        .join_asof(ends, on="k", by="by", strategy="backward", check_sortedness=False)
        .with_columns(pl.coalesce("it_ns", "ts").alias("step_ts"), pl.coalesce("own_ts", "it_ns", "ts").alias("ts"))
        .drop("k", "by", "it_ns")
    )
