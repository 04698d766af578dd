"""Training logs: Megatron-LM / Megatron-DeepSpeed, DeepSpeed, HF Trainer, torchtitan, JSON Lines, MLPerf ``:::MLLOG``.

Lines are classified by a few literal markers and their ``key: value`` /
``key=value`` / ``'key': value`` pairs are pulled out with one regex over all of
them (polars ``extract_all``, no Python loop per line); a long ASCII log
(:data:`SCAN_MIN_BYTES`, :data:`SCAN_ALONE_BYTES`) is read by numba scans of its bytes that find the same
(:mod:`~di.convert.logs.linekinds`, :mod:`~di.convert.logs.pairscan`). What it maps to:

- every numeric pair becomes a sample of a series named by :data:`KEYS` (``loss``,
  ``lr``, ``step_time``, ``samples_per_s``, ``tokens_per_s``, ``tflops``, ``mfu``,
  ``memory_allocated``...) with its unit (from the table or the value's suffix:
  ``GB``, ``GiB``, ``%``, ``s``, ``ms``); other keys keep their own (normalised) name;
  the step keys (``iteration``, ``step``, ``global_step``...) index the samples.
- steps become ``step`` events: Megatron's logged interval (its ``elapsed time per
  iteration`` times the iterations since the last line, ending at the line), and
  consecutive timestamped step lines of the other producers; MLPerf epochs and
  blocks from their ``*_start``/``*_stop`` pairs.
- fp16 OVERFLOW skips are instants ``overflow skip``; a failed run's error (a Python
  exception line, CUDA out of memory, ``slurmstepd: error``, a launcher's child
  failure) is an instant named after it, cat ``other``, with the line in args.

Times: the line's own timestamp (DeepSpeed, HF, torchtitan, MLPerf ``time_ms``,
newer Megatron), else the nearest timestamp of the file before (or after) it;
zone-less local times are read as UTC (``info.training.timezone``). A file without
any timestamp gets relative times: Megatron's cumulative iteration times, else
the line number in ns (``info.training.time``).

One module per concern: :mod:`.patterns` (the regexes and literal tests), :mod:`.keys` (the series and units of
the keys, the step keys), :mod:`.kinds` (each line's kind and ``[Rank N]`` tag, by the scans or the regexes),
:mod:`.pairs` (the numeric pairs and their keys), :mod:`.steps` (step events), :mod:`.samples` (samples, a repeat
kept once) and :mod:`.instants` (errors and overflow skips); :func:`parse_training` puts their parts together, with
the phases of the steps (:mod:`~di.convert.logs.training_phases`).
"""

from __future__ import annotations

from typing import Any

import polars as pl

from di.convert.logs.build import Parts
from di.convert.logs.text import own_line_times
from di.convert.logs.training.instants import _instants
from di.convert.logs.training.keys import KEYS
from di.convert.logs.training.kinds import _classify, _marked
from di.convert.logs.training.pairs import _pairs
from di.convert.logs.training.patterns import SNIFF_RE
from di.convert.logs.training.samples import _at_iterations, _samples
from di.convert.logs.training.steps import _megatron_steps, _mllog_steps, _steps_of, _timed_steps
from di.convert.logs.training_phases import step_phases

# ``import X as X``: names read from this package elsewhere (the scans, warmup, the tests), not by parse_training
from di.convert.logs.training.keys import STEP_KEYS as STEP_KEYS
from di.convert.logs.training.kinds import BEYOND_RANK as BEYOND_RANK
from di.convert.logs.training.kinds import SCAN_ALONE_BYTES as SCAN_ALONE_BYTES
from di.convert.logs.training.kinds import SCAN_MIN_BYTES as SCAN_MIN_BYTES
from di.convert.logs.training.kinds import _rank_tags as _rank_tags
from di.convert.logs.training.kinds import _regex_kinds as _regex_kinds
from di.convert.logs.training.kinds import _scans_pay as _scans_pay
from di.convert.logs.training.pairs import _read_values as _read_values
from di.convert.logs.training.pairs import _regex_pairs as _regex_pairs
from di.convert.logs.training.patterns import ERROR_RE as ERROR_RE
from di.convert.logs.training.patterns import KINDS as KINDS
from di.convert.logs.training.patterns import LEVEL_HEAD_RE as LEVEL_HEAD_RE
from di.convert.logs.training.patterns import MEGATRON_RE as MEGATRON_RE
from di.convert.logs.training.patterns import PAIR_RE as PAIR_RE
from di.convert.logs.training.patterns import RANK_TAG_RE as RANK_TAG_RE
from di.convert.logs.training.patterns import TAGS_RE as TAGS_RE

__all__ = ["KEYS", "SNIFF_RE", "parse_training"]


def _ms_to_ns(digits: pl.Expr) -> pl.Expr:
    """Milliseconds (digits) as int64 ns; null where they are beyond it (a garbled ``time_ms``)."""
    ms = digits.cast(pl.Int64, strict=False)
    return pl.when(ms < (2**63 - 1) // 1_000_000).then(ms * 1_000_000)


def parse_training(lines: pl.DataFrame, *, scan_min_bytes: int | None = None) -> Parts:
    """Training-log lines (from :func:`di.convert.logs.text.read_lines`) as :class:`Parts` (see the module docstring).
    ``scan_min_bytes``: the bytes of marked lines from which the numba scans read them, None for :func:`_scans_pay`'s
    choice (the same tables either way)."""
    if "own_ts" not in lines.columns:  # read_log found them already
        lines = lines.with_columns(own_line_times(lines))
    marked = _marked(lines)
    lines, ascii, scan = _classify(lines, marked, scan_min_bytes)  # the lines the parts below read are marked ones
    mllog = (lines.get_column("kind") == "mllog").any()  # else no line's time is read again
    lines, epoch = _placed(lines, mllog)
    rows = lines.filter(pl.col("kind").is_not_null())
    inst = _instants(lines, marked)
    if not rows.height and not inst.filter(pl.col("name") != "overflow skip").height:
        return Parts("training")
    # HF Trainer prints the same metrics dict once per rank: keep its first print
    if (rows.get_column("kind") == "hf").any():
        rows = rows.filter((pl.col("kind") != "hf") | pl.col("text").is_first_distinct())
    pairs, vals, keys = _pairs(rows, ascii, scan)
    megatron = rows.get_column("kind") == "megatron"
    dropped: dict[str, int] = {}
    meg = _megatron_steps(rows, pairs, vals, keys, epoch, dropped) if megatron.any() else None
    if meg is None or not meg.height:  # the step numbers serve the timed steps only (Megatron's are its intervals)
        rows = rows.join(_steps_of(pairs, vals, keys, rows), on="line", how="left")
    mg_time = epoch or meg is None or not megatron.gather(pairs.get_column("r")).any()
    iteration_ends = None if mg_time else meg  # no timestamps: Megatron's lines are timed by their iterations
    samples = _samples(rows, pairs, vals, keys, scan=scan, iteration_ends=iteration_ends)
    if iteration_ends is not None:
        inst = _at_iterations(inst, iteration_ends)
    timed = _timed_steps(rows) if meg is None or not meg.height else None
    ph_samples, ph_events, ph_lines = step_phases(lines, meg if timed is None else timed)
    samples = pl.concat([samples, ph_samples], how="diagonal_relaxed") if ph_samples.height else samples
    ev = pl.concat(
        [f for f in (meg, timed, _mllog_steps(rows) if mllog else None, inst, ph_events) if f is not None],
        how="diagonal_relaxed",
    ).with_columns(pl.lit("training").alias("track"))
    info = _info(rows, inst, epoch=epoch, timed=timed)
    claimed = pl.concat([rows.get_column("line"), inst.get_column("line"), ph_lines])
    return Parts("training", events=ev, samples=samples, claimed=claimed, dropped=dropped, info=info, epoch=bool(epoch))


def _placed(lines: pl.DataFrame, mllog: bool) -> tuple[pl.DataFrame, bool]:
    """``lines`` (:func:`~.kinds._classify`'s) with ``own_ts`` MLPerf's ``time_ms`` on its lines (``mllog``: there
    are some), ``rank`` (a launcher's prefix, else a ``[Rank N]`` tag, else the lowest of the file) and ``ts`` (the
    nearest own time before, else after; the line number where no line has one); and whether one has one."""
    if mllog:
        lines = lines.with_columns(
            pl.when(pl.col("kind") == "mllog")
            .then(_ms_to_ns(pl.col("text").str.extract(r"\"time_ms\":\s*(\d+)")))
            .otherwise(pl.col("line_ts"))
            .alias("own_ts")
        )
    epoch = lines.get_column("own_ts").is_not_null().any()
    filled = pl.col("own_ts").forward_fill().backward_fill() if epoch else pl.col("line").cast(pl.Int64)
    rank = pl.coalesce("prefix_rank", "tag_rank")
    # lines without a rank tag (DeepSpeed's timer, Megatron) come from the rank that tags the others (rank 0 logs)
    lines = lines.with_columns(rank.fill_null(rank.min()).alias("rank"), filled.alias("ts")).drop("tag_rank")
    return lines, epoch


def _info(rows: pl.DataFrame, inst: pl.DataFrame, *, epoch: bool, timed: pl.DataFrame | None) -> dict[str, Any]:
    """``info.training``: the step lines per producer, how times were found and the first errors' names."""
    kinds = rows.group_by("kind").len().sort("kind")
    return {
        "training": {
            "producers": dict(zip(kinds.get_column("kind").to_list(), kinds.get_column("len").to_list())),
            "time": "timestamps" if epoch else ("megatron_cumulative" if timed is None else "line_order"),
            "timezone": "local time of the log, read as UTC" if epoch else None,
            "errors": inst.filter(pl.col("name") != "overflow skip").get_column("name").to_list()[:20],
        }
    }
