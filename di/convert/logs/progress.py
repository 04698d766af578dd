"""Progress bars (tqdm's, which PyTorch Lightning, HF Trainer, Accelerate and most training scripts print):
the training loop's pace and the metrics in the bar's postfix.

A bar renders as ``Epoch 3:  45%|████▌     | 450/1000 [01:23<01:42,  5.38it/s, v_num=0, train_loss=2.31]``; written
to a file, its updates follow each other on one line, apart by carriage returns, so every segment of a line between
them is read (polars string ops on the lines that name a rate only). What it maps to, on the rank's ``training``
counter timeline:

- ``steps_per_s`` (steps/s) and ``step_time`` (s): the bar's rate (``it/s``, or ``s/it`` for slow loops), which tqdm
  smooths over its last updates (an exponential moving average), not one step's own time;
- ``step`` (count): the bar's position (``450`` of ``450/1000``);
- each numeric ``key=value`` of the postfix as a series named like a training log's key (``train_loss`` ->
  ``loss``, ``lr``), but ``v_num`` (Lightning's run version, no measurement).

Times: the bar's elapsed time (``[01:23<``) from the bar's start; a bar whose position goes back or whose description
changes (the next epoch) is a new bar. Where the log prints timestamps (``sources[].info.progress.time``
``timestamps``), a bar starts at the last one printed at or before its first line (a bar is drawn after the line
that announced it), else it ends at the first printed after it (the summary a trainer prints when the bar is done);
in a log without any, a bar starts where the one before ended, the first at 0 (``elapsed``). Segments that are no whole
bar (a bar cut by the end of the file, another program's print after a carriage return) are counted.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from di.convert.logs.build import Parts
from di.convert.logs.text import ASCII_MODE, all_ascii, ascii_mode

__all__ = ["SNIFF_RE", "parse_progress"]

RATE_LITERALS = ("it/s", "s/it")
SNIFF_RE = r"\d+/(?:\d+|\?) \[(?:\d+:)?\d+:\d+(?:<[^,\]]*)?,\s*(?:[\d.]+|\?)\s*(?:it/s|s/it)"
BAR_RE = (
    r"^(?P<desc>.*?)(?:\d+%\|[^|]*\|)?\s*(?P<n>\d+)/(?P<total>\d+|\?)\s*"
    r"\[(?P<elapsed>(?:\d+:)?\d+:\d+)(?:<[^,\]]*)?,\s*(?P<rate>[\d.]+|\?)\s*(?P<unit>it/s|s/it)(?P<post>[^\]]*)\]"
)
"""One rendering of a bar: its description (before the percentage), position, total, elapsed ``[H:]MM:SS``, rate
and the postfix (``, key=value...``) up to the closing bracket."""
POSTFIX_RE = r"([A-Za-z_][\w./\-]*)=([-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+|nan|inf))"
CUT_BAR_RE = r"\d+/(?:\d+|\?)\s*\["
"""A bar's position and opening bracket: a segment holding them that is no whole bar is a bar cut short."""
SKIPPED_KEYS = ("v_num",)
"""Postfix keys that measure nothing (Lightning's run version)."""
NS = 1_000_000_000


def _elapsed_ns(col: str) -> pl.Expr:
    """tqdm's ``[H:]MM:SS`` as int64 ns."""
    p = pl.col(col).str.split(":")
    h = pl.when(p.list.len() == 3).then(p.list.get(0, null_on_oob=True).cast(pl.Int64, strict=False)).otherwise(0)
    m = p.list.get(-2, null_on_oob=True).cast(pl.Int64, strict=False)
    s = p.list.get(-1, null_on_oob=True).cast(pl.Int64, strict=False)
    return (h * 3600 + m * 60 + s) * NS


AFTER_BAR_RE = (
    r"^\s*(?P<n>\d+)/(?P<total>\d+|\?)\s*\[(?P<elapsed>(?:\d+:)?\d+:\d+)(?:<(?u:[^,\]])*)?,\s*(?P<rate>[\d.]+|\?)\s*"
    r"(?P<unit>it/s|s/it)(?P<post>(?u:[^\]])*)\]"
)
""":data:`BAR_RE` after the bar's last ``|``: a bar holds no ``|``, so splitting there first leaves a short text for an
anchored regex (the whole one's lazy description costs several times as much)."""
GROUPS = ("desc", "n", "total", "elapsed", "rate", "unit", "post")


def _bars(seg: pl.DataFrame) -> pl.DataFrame:
    """``seg`` with :data:`BAR_RE`'s groups of each ``seg``: read after the bar's last ``|`` (:data:`AFTER_BAR_RE`),
    the description before the first; a segment that does not read so (a bar without its bar) by the whole regex."""
    parts = pl.col("seg").str.split("|")
    rest = seg.select(parts.list.last()).to_series()
    mode = ASCII_MODE if all_ascii(rest) else ""  # the ASCII classes match several times faster
    g = seg.with_columns(
        rest.str.extract_groups(mode + AFTER_BAR_RE).alias("g"),
        # tqdm writes "{desc}: {percentage:3.0f}%|": the description is what precedes the percentage
        parts.list.first().str.strip_chars_end(" 0123456789%").alias("desc"),
    ).unnest("g")
    miss = g.select(pl.col("n").is_null() & pl.col("seg").str.contains_any(list(RATE_LITERALS))).to_series()
    if miss.any():
        rows = miss.arg_true()
        whole = seg[rows].select(pl.col("seg").str.extract_groups(BAR_RE).alias("g")).unnest("g")
        g = g.with_columns(g.get_column(c).scatter(rows, whole.get_column(c)) for c in GROUPS)
    return g


def parse_progress(lines: pl.DataFrame) -> Parts:
    """tqdm progress bars of a log as :class:`Parts` (see the module docstring)."""
    cand = _rate_lines(lines)
    if not cand.height:
        return Parts("progress")
    bars = _bars(_segments(cand))
    ok = pl.col("n").is_not_null()
    if not bars.select(ok.any()).item():
        return Parts("progress")
    dropped: dict[str, int] = {}
    # a bar's start (its position and bracket) without the rest: a bar cut short; other text naming a rate
    # ("throughput 5.2 it/s") is no bar, and the lines' other families read it
    cut = bars.filter(~ok & pl.col("seg").str.contains(CUT_BAR_RE)).height
    if cut:
        dropped["segments naming a rate that are no whole bar"] = cut
    b, timed = _timed(_numbered(bars.filter(ok)))
    samples = _fixed_samples(b)
    post = _postfix_samples(b)
    if post is not None:
        samples = pl.concat([samples, post])
    samples = samples.filter(pl.col("value").is_not_null() & pl.col("ts_ns").is_not_null())
    info: dict[str, Any] = {
        "progress": {
            "bars": int(b.select(pl.struct("rank", "bar").n_unique()).item()),
            "updates": b.height,
            "descriptions": b.get_column("desc").unique(maintain_order=True).head(20).to_list(),
            "time": "timestamps" if timed else "elapsed",
        }
    }
    return Parts(
        "progress",
        samples=samples,
        claimed=cand.get_column("line").cast(pl.UInt32),
        dropped=dropped,
        info=info,
        epoch=timed,
    )


def _rate_lines(lines: pl.DataFrame) -> pl.DataFrame:
    """The lines that name a rate (:data:`RATE_LITERALS`), with ``before`` and ``after``: the times the log printed at
    or before each line, and at or after it."""
    own = pl.col("own_ts") if "own_ts" in lines.columns else pl.lit(None, pl.Int64)
    return lines.with_columns(own.forward_fill().alias("before"), own.backward_fill().alias("after")).filter(
        pl.col("text").str.contains_any(list(RATE_LITERALS))
    )


def _segments(cand: pl.DataFrame) -> pl.DataFrame:
    """The non-blank segments (``seg``) of the lines ``cand`` between carriage returns, with their ``line``,
    ``rank`` (a launcher's prefix, else null), ``before`` and ``after``."""
    rank = pl.col("prefix_rank") if "prefix_rank" in cand.columns else pl.lit(None, pl.Int64)
    return (
        cand.select(
            "line", rank.cast(pl.Int64).alias("rank"), "before", "after", pl.col("text").str.split("\r").alias("seg")
        )
        .explode("seg")
        .filter(pl.col("seg").str.strip_chars() != "")
    )


def _numbered(bars: pl.DataFrame) -> pl.DataFrame:
    """The whole bars' updates (:func:`_bars`) read (``n``, ``elapsed_ns``, ``rate``, ``desc``), each with its
    ``bar`` (numbered per rank) and ``offset`` (the sum of the rank's bars before it: their largest elapsed times)."""
    b = bars.with_columns(
        pl.col("n").cast(pl.Int64, strict=False),
        _elapsed_ns("elapsed").alias("elapsed_ns"),
        pl.col("rate").cast(pl.Float64, strict=False),
        pl.col("desc").str.strip_chars().str.strip_chars_end(":").alias("desc"),
    )
    # a new bar where the position goes back or the description changes, per rank; each bar starts where the last
    # one ended (its largest elapsed time)
    new_bar = (pl.col("n") < pl.col("n").shift(1)) | (pl.col("desc") != pl.col("desc").shift(1))
    b = b.with_columns(new_bar.over("rank").fill_null(True).cum_sum().over("rank").alias("bar"))
    ends = b.group_by("rank", "bar").agg(pl.col("elapsed_ns").max().alias("end")).sort("rank", "bar")
    ends = ends.with_columns((pl.col("end").cum_sum().over("rank") - pl.col("end")).alias("offset"))
    return b.join(ends.select("rank", "bar", "offset"), on=["rank", "bar"], how="left", nulls_equal=True)


def _timed(b: pl.DataFrame) -> tuple[pl.DataFrame, bool]:
    """The updates ``b`` (:func:`_numbered`) with ``start`` and ``ts_ns``, and whether every bar is timed by the log's
    timestamps (else all by their ``offset``)."""
    # a bar starts at the last time the log printed before it, else it ends at the first printed after it
    span = pl.col("elapsed_ns").max().over("rank", "bar")
    before, after = pl.col("before").first().over("rank", "bar"), pl.col("after").last().over("rank", "bar")
    b = b.with_columns(pl.coalesce(before, after - span).alias("start"))
    timed = bool(b.get_column("start").is_not_null().all())
    start = pl.col("start") if timed else pl.col("offset")
    return b.with_columns((start + pl.col("elapsed_ns")).alias("ts_ns")), timed


def _base() -> list[pl.Expr]:
    """A sample's ``rank``, ``host`` and ``track``."""
    return [pl.col("rank"), pl.lit(None, pl.String).alias("host"), pl.lit("training").alias("track")]


def _fixed_samples(b: pl.DataFrame) -> pl.DataFrame:
    """The ``steps_per_s``, ``step_time`` and ``step`` samples of the updates ``b`` (:func:`_timed`)."""
    per_s = pl.when(pl.col("unit") == "it/s").then(pl.col("rate")).otherwise(1 / pl.col("rate"))
    return pl.concat(
        [
            b.select(*_base(), pl.lit(name).alias("series"), pl.lit(unit).alias("unit"), "ts_ns", value.alias("value"))
            for name, unit, value in (
                ("steps_per_s", "steps/s", per_s),
                ("step_time", "s", 1 / per_s),
                ("step", "count", pl.col("n").cast(pl.Float64)),
            )
        ]
    )


def _postfix_samples(b: pl.DataFrame) -> pl.DataFrame | None:
    """The samples of the postfixes' numeric ``key=value`` s of the updates ``b`` (:func:`_timed`), named as a
    training log's keys (:data:`di.convert.logs.training.KEYS`); None where there are none."""
    post = (
        b.select("rank", "ts_ns", pl.col("post").str.extract_all(ascii_mode(POSTFIX_RE, b["post"])).alias("kv"))
        .explode("kv")
        .drop_nulls("kv")
        .with_columns(pl.col("kv").str.split_exact("=", 1).struct.rename_fields(["k", "v"]).alias("g"))
        .unnest("g")
        .filter(~pl.col("k").is_in(list(SKIPPED_KEYS)))
    )
    if not post.height:
        return None
    from di.convert.logs.training import KEYS

    key = pl.col("k").str.to_lowercase()
    names = pl.DataFrame(
        {"k": list(KEYS), "series": [v[0] for v in KEYS.values()], "unit": [v[1] for v in KEYS.values()]}
    )
    post = post.with_columns(key.alias("k")).join(names, on="k", how="left", maintain_order="left")
    return post.select(
        *_base(),
        pl.coalesce("series", "k").alias("series"),
        pl.col("unit").cast(pl.String),
        "ts_ns",
        pl.col("v").cast(pl.Float64, strict=False).alias("value"),
    )
