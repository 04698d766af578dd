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
"""

from __future__ import annotations

import sys
from typing import Any

import polars as pl

from di.convert.logs.build import Parts, keep_counted, line_instants
from di.convert.logs.text import ASCII_MODE, all_ascii, own_line_times
from di.convert.logs.training_phases import step_phases

__all__ = ["KEYS", "SNIFF_RE", "parse_training"]

MEGATRON_RE = r"\biteration\s+(\d+)/\s*\d+\s*\|"
KINDS = {
    "megatron": MEGATRON_RE,
    "mllog": r":::MLLOG \{",
    "deepspeed": r"\bstep=\d+, skipped=\d+|SamplesPerSec=|E2E latency=",
    "torchtitan": r"\bstep:\s*\d+\s+loss:",
    "epoch_step": r"^epoch: \d+\|step: \d+\|",
    "hf": r"^\{'\w+': [-+\d.]",
    "jsonl": r"^\{\".*\"(?:loss|train_loss|lm_loss|step|global_step|iteration|lr|learning_rate)\":\s*[-+\d.]",
}
"""Line kinds and the regex that marks each (first match wins)."""
SNIFF_RE = "|".join(f"(?:{r})" for r in KINDS.values())
TAGS_RE = r"^(?:\[[^\]]*\]:?\s*)+"
"""A line's leading ``[...]`` tags (time, level, source, rank): no pair is read in them."""
PAIR_RE = (
    r"[A-Za-z_][\w \-/().]*?['\"]?\s*[:=]\s*\[?(?:[-+]?(?:\d[\d,]*\.?\d*(?:[eE][-+]?\d+)?|nan|inf))"
    r"(?:%|[KMGT]i?B|ms\b|s\b)?"
)
ERROR_RE = (
    r"^(?:[\w.]+\.)?\w*(?:Error|Exception|Interrupt)(?::\s|$)|CUDA out of memory|slurmstepd: error:|ChildFailedError"
    r"|^Traceback \(most recent call last\)|exits with return code = [1-9]|Segmentation fault|core dumped"
)
STEP_KEYS = ("iteration", "global_step", "step", "global_steps", "_step", "train_step", "it")

KEYS: dict[str, tuple[str, str | None]] = {
    "elapsed_time_per_iteration_ms": ("step_time", "ms"),
    "elapsed_time_per_iteration": ("step_time", "ms"),
    "iteration_time": ("step_time", "s"),
    "step_time": ("step_time", "s"),
    "e2e_latency": ("step_time", "s"),
    "learning_rate": ("lr", None),
    "lr": ("lr", None),
    "lm_loss": ("loss", None),
    "lm-loss": ("loss", None),
    "loss": ("loss", None),
    "train_loss": ("loss", None),
    "loss_scale": ("loss_scale", None),
    "grad_norm": ("grad_norm", None),
    "global_batch_size": ("global_batch_size", "samples"),
    "consumed_samples": ("consumed_samples", "samples"),
    "consumed_tokens": ("consumed_tokens", "tokens"),
    "number_of_skipped_iterations": ("skipped_iterations", "count"),
    "number_of_nan_iterations": ("nan_iterations", "count"),
    "skipped": ("skipped_steps", "count"),
    "cursamplespersec": ("samples_per_s", "samples/s"),
    "currsamplespersec": ("samples_per_s", "samples/s"),
    "runningavgsamplespersec": ("samples_per_s_avg", "samples/s"),
    "avgsamplespersec": ("samples_per_s_avg", "samples/s"),
    "samples_per_second": ("samples_per_s", "samples/s"),
    "train_samples_per_second": ("samples_per_s", "samples/s"),
    "train_steps_per_second": ("steps_per_s", "steps/s"),
    "train_runtime": ("train_runtime", "s"),
    "tps": ("tokens_per_s", "tokens/s"),
    "tokens_per_second": ("tokens_per_s", "tokens/s"),
    "tokens_per_sec": ("tokens_per_s", "tokens/s"),
    "wps": ("tokens_per_s", "tokens/s"),
    "tflops": ("tflops", "TFLOP/s"),
    "throughput_per_gpu_tflop_s_gpu": ("tflops", "TFLOP/s"),
    "tflop_s": ("tflops", "TFLOP/s"),
    "mfu": ("mfu", "%"),
    "memallocated": ("memory_allocated", None),
    "maxmemallocated": ("memory_allocated_max", None),
    "memory": ("memory", None),
    "mem_reserved": ("memory_reserved", None),
    "max_memory_allocated": ("memory_allocated_max", None),
    "epoch": ("epoch", None),
}
"""Normalised source key -> (series name, unit; None: the value's suffix or no unit)."""


_KEYS = pl.DataFrame(
    {"key": list(KEYS), "series": [v[0] for v in KEYS.values()], "unit": [v[1] for v in KEYS.values()]},
    schema={"key": pl.String, "series": pl.String, "unit": pl.String},
)
""":data:`KEYS` as a frame."""


def _norm(col: str) -> pl.Expr:
    return pl.col(col).str.to_lowercase().str.replace_all(r"[^a-z0-9]+", "_").str.strip_chars("_")


HINT_RE = r"iteration|MLLOG|step|SamplesPerSec|E2E latency"
"""Literals one of which every KINDS line holds (or it starts with ``{``): one fast search picks the lines the KINDS
regexes then test (an anchored branch in this alternation would make the search try every position)."""
KIND_HINTS = {
    "megatron": pl.col("text").str.contains("iteration", literal=True),
    "mllog": pl.col("text").str.contains(":::MLLOG {", literal=True),
    "deepspeed": pl.col("text").str.contains("step=|SamplesPerSec=|E2E latency="),
    "torchtitan": pl.col("text").str.contains("loss:", literal=True),
    "epoch_step": pl.col("text").str.starts_with("epoch: "),
    "hf": pl.col("text").str.starts_with("{'"),
    "jsonl": pl.col("text").str.starts_with('{"'),
}
"""Per kind, a literal test that each of its lines passes: its regex runs only on the lines that pass it."""
KIND_SURE = {"deepspeed": ("SamplesPerSec=|E2E latency=", r"\bstep=\d+, skipped=\d+")}
"""Per kind, (literal alternatives of its regex: a line that holds one matches it, with no regex run; the regex's
other alternatives, run on the other lines)."""


ASCII_KINDS = frozenset(("megatron", "mllog", "deepspeed", "torchtitan", "epoch_step", "hf"))
"""The kinds whose regex cannot match a non-ASCII byte (see :data:`~di.convert.logs.text.ASCII_MODE`)."""
RANK_TAG_RE = r"\[Rank (\d+)\]"
"""DeepSpeed's ``[Rank N]`` tag."""


def _marked(lines: pl.DataFrame) -> pl.Series:
    """Per line: whether it holds one of :data:`MARKS_RE`'s literals (one search of the whole text for the kinds, the
    rank tags and the errors; each of their tests then runs on these lines only)."""
    return lines.get_column("text").str.contains(MARKS_RE)


def _ms_to_ns(digits: pl.Expr) -> pl.Expr:
    """Milliseconds (digits) as int64 ns; null where they are beyond it (a garbled ``time_ms``)."""
    ms = digits.cast(pl.Int64, strict=False)
    return pl.when(ms < (2**63 - 1) // 1_000_000).then(ms * 1_000_000)


BEYOND_RANK = 2**62
"""The rank of a ``[Rank N]`` tag whose N is beyond int64: no rank a trace holds, so the trace's build drops the line's
rows and counts them (:data:`di.convert.logs.build.MAX_RANK`)."""


def _tag_number(digits: pl.Series) -> pl.Series:
    """A tag's digits as an Int64 (null: no tag), :data:`BEYOND_RANK` where they are too many for one."""
    n = digits.cast(pl.Int64, strict=False)
    return n.zip_with(n.is_not_null() | digits.is_null(), pl.Series([BEYOND_RANK], dtype=pl.Int64))


def _rank_tags(text: pl.Series, ascii: bool) -> pl.Series:
    """Per line of ``text``: the N of its first :data:`RANK_TAG_RE` (null for none). On ASCII text the digits after
    the first ``[Rank `` are read from a short slice, and only a line where they are not a whole tag (or too long for
    the slice) is searched by the regex."""
    pos = text.str.find("[Rank ", literal=True)
    tagged = pos.is_not_null().arg_true()
    if not tagged.len():
        return pl.Series("tag_rank", [], pl.Int64).extend_constant(None, text.len())
    if not ascii:  # str.find gives a byte offset, str.slice counts characters
        rank = _tag_number(text.gather(tagged).str.extract(RANK_TAG_RE))
        return pl.Series("tag_rank", [], pl.Int64).extend_constant(None, text.len()).scatter(tagged, rank)
    rank = (
        pl.DataFrame({"text": text.gather(tagged), "pos": pos.gather(tagged)})
        .select(pl.col("text").str.slice(pl.col("pos") + len("[Rank "), 12).str.extract(ASCII_MODE + r"^(\d+)\]"))
        .to_series()
        .cast(pl.Int64, strict=False)  # too many digits: null, then read by the regex below
    )
    again = rank.is_null().arg_true()
    if again.len():
        rank = rank.scatter(again, _tag_number(text.gather(tagged.gather(again)).str.extract(RANK_TAG_RE)))
    return pl.Series("tag_rank", [], pl.Int64).extend_constant(None, text.len()).scatter(tagged, rank)


SCAN_MIN_BYTES = 4 << 20
"""The bytes of marked lines (:func:`_marked`, about half a training log's) from which ASCII text is read by the numba
scans (:mod:`~di.convert.logs.linekinds`, :mod:`~di.convert.logs.pairscan`) rather than by polars regexes and
hashing, in a process that runs numba already (``di convert`` and ``di analyze`` of a job with traces, a program that
loaded a trace). The scans read about twice as fast (some 6 CPU ms less per MB of log) and cost the loading of their
kernels (about 30 ms) and, on a cold cache, their compiles (about 5.5 CPU s, once): they win from about 8 MB."""
SCAN_ALONE_BYTES = 64 << 20
"""The same where numba has not been imported yet (``di info`` of a log): its start costs 0.6-1 CPU s more, which the
scans win back from about 75 MB; a smaller log never imports numba here."""


def _scans_pay(nbytes: int, scan_min_bytes: int | None) -> bool:
    """Whether ``nbytes`` of marked ASCII lines are read by the scans: ``scan_min_bytes`` when given, else
    :data:`SCAN_MIN_BYTES` with numba imported already and :data:`SCAN_ALONE_BYTES` without."""
    if scan_min_bytes is None:
        scan_min_bytes = SCAN_MIN_BYTES if "numba" in sys.modules else SCAN_ALONE_BYTES
    return nbytes >= scan_min_bytes


def _classify(lines: pl.DataFrame, marked: pl.Series, scan_min_bytes: int | None) -> tuple[pl.DataFrame, bool, bool]:
    """``lines`` with ``kind`` (the first :data:`KINDS` name whose regex matches, null for none), ``line_ts`` the
    line's own time and ``tag_rank`` (a ``[Rank N]`` tag's N); whether the ``marked`` lines (:func:`_marked`) are
    all ASCII, and whether they are read by the scans (ASCII and long enough: :func:`_scans_pay`), else by the regexes (:func:`_regex_kinds`). Results are put back by row."""
    at = marked.arg_true()
    text = lines.get_column("text").gather(at)
    ascii = all_ascii(text)
    scan = ascii and _scans_pay(text.str.len_bytes().sum(), scan_min_bytes)
    n = lines.height
    if scan:
        from di.convert.logs.linekinds import line_kinds

        found, ranks = line_kinds(text)
    else:
        found, ranks = _regex_kinds(text, ascii), _rank_tags(text, ascii)
    kind = pl.Series("kind", [], pl.String).extend_constant(None, n).scatter(at, found)
    tag_rank = pl.Series("tag_rank", [], pl.Int64).extend_constant(None, n).scatter(at, ranks)
    return lines.with_columns(kind, tag_rank, pl.col("own_ts").alias("line_ts")), ascii, scan


def _regex_kinds(text: pl.Series, ascii: bool) -> pl.Series:
    """Per line of ``text``: the first :data:`KINDS` name whose regex matches, null for none (``ascii``: every line
    is ASCII). Each regex runs on the lines a literal test picked; the results are put back by row."""
    hints = pl.DataFrame({"text": text}).select(**KIND_HINTS)  # one pass, no copy of the lines per kind
    at = pl.int_range(0, text.len(), dtype=pl.UInt32, eager=True)
    kind = pl.Series("kind", [], pl.String).extend_constant(None, text.len())
    for name, rx in reversed(KINDS.items()):  # the first kind that matches is set last
        hinted = hints.get_column(name)
        if not hinted.any():
            continue
        sub, rows = text.filter(hinted), at.filter(hinted)
        if name in KIND_SURE:  # the lines a literal alternative of the regex finds need no regex
            literals, rx = KIND_SURE[name]
            sure = sub.str.contains(literals)
            kind = kind.scatter(rows.filter(sure), name)
            sub, rows = sub.filter(~sure), rows.filter(~sure)
        rx = ASCII_MODE + rx if ascii and name in ASCII_KINDS else rx  # \b in ASCII: the DFA runs
        kind = kind.scatter(rows.filter(sub.str.contains(rx)), name)
    return kind


def _group_ids(df: pl.DataFrame) -> tuple[pl.DataFrame, pl.Series]:
    """The distinct rows of ``df`` (in no order) and each row's place among them (u32), from one hash grouping (an
    Enum of thousands of strings, or a unique() then a join, costs a second and slower lookup per row)."""
    groups = df.with_row_index("_i").group_by(df.columns).agg("_i")
    members = groups.select(pl.int_range(0, pl.len(), dtype=pl.UInt32).alias("g"), "_i").explode("_i")
    ids = pl.Series("g", [], pl.UInt32).extend_constant(0, df.height).scatter(members["_i"], members["g"])
    return groups.drop("_i"), ids


LEVEL_HEAD_RE = " - (?:INFO|WARNING) - "
"""Python logging's level between its logger's name and the message: what comes before it holds no pair."""


def _regex_pairs(
    text: pl.Series, kind: pl.Series, level_heads: bool, ascii: bool
) -> tuple[pl.DataFrame, pl.DataFrame, pl.Series]:
    """:func:`~di.convert.logs.pairscan.line_pairs` by polars regexes (``ascii``: every line is ASCII), as (pairs:
    ``r``, ``at``; distinct pairs: ``rest``, ``code``; keys as written)."""
    body = text.str.replace(TAGS_RE, "")
    if level_heads:
        body = body.str.replace(r"^.*?" + LEVEL_HEAD_RE, "")
    other = pl.DataFrame({"r": pl.int_range(0, text.len(), dtype=pl.UInt32, eager=True), "pair": body})
    mllog = kind == "mllog"
    if mllog.any():
        other = other.filter(~mllog)
    # the row number is the only column copied to each of a line's pairs
    p = other.select("r", pl.col("pair").str.extract_all(ASCII_MODE + PAIR_RE if ascii else PAIR_RE)).explode("pair")
    p = p.drop_nulls("pair")
    # pairs repeat ("skipped=0,", a memory reading, a constant lr: a third to a half are distinct in real logs): each
    # distinct pair is cut and read once, and every pair gathers its key code, value and unit by its row among them
    d, at = _group_ids(p.select("pair"))
    # a pair matched PAIR_RE: cut it at its first ':' or '=' (no capturing regex), the unit is what follows the
    # number; one column per step: an expression reused inside another would be evaluated again (no
    # common-subexpression elimination in eager frames)
    d = d.with_columns(pl.col("pair").str.find("[:=]").alias("pos"))
    if ascii:  # str.find gives a byte offset, str.slice counts characters: the same on ASCII text
        key, rest = pl.col("pair").str.head(pl.col("pos")), pl.col("pair").str.slice(pl.col("pos") + 1)
    else:  # cut at bytes (a non-ASCII key would shift the value)
        pair = pl.col("pair").cast(pl.Binary)
        key = pair.bin.slice(0, pl.col("pos")).cast(pl.String)
        rest = pair.bin.slice(pl.col("pos") + 1).cast(pl.String)
    d = d.select(key.alias("k"), rest.alias("rest"))
    ks = d.get_column("k").unique()  # in any order: a code is only a row of the table
    code = d.get_column("k").cast(pl.Enum(ks)).to_physical().cast(pl.Int64).alias("code")
    return pl.DataFrame([p.get_column("r"), at.cast(pl.UInt32).alias("at")]), pl.DataFrame([d["rest"], code]), ks


def _read_values(rest: pl.Series) -> tuple[pl.Series, pl.Series]:
    """Per pair's text after its ``:`` or ``=`` (``rest``): its value (f64, null where it reads as no number) and
    unit (the suffix after the number, null for none)."""
    # most values are a bare number; the others (spaces or '[' before, a ',' in, a unit after) are cut on their
    # own rows: a bare number holds none of the characters cut, and none of the others casts (nor one with a ',')
    value = rest.cast(pl.Float64, strict=False)
    again = value.is_null().arg_true()
    u = pl.Series("u", [], pl.String).extend_constant(None, rest.len())
    if again.len():
        cut_rest = rest.gather(again).str.strip_chars_start(" [")
        v = cut_rest.str.strip_chars_end("%KMGTiBms")  # "1,024", "0," (a ',' after a number is taken by [\d,]*)
        value = value.scatter(again, v.str.replace_all(",", "", literal=True).cast(pl.Float64, strict=False))
        cut = cut_rest.str.len_bytes() != v.str.len_bytes()
        if cut.any():
            u = u.scatter(again.filter(cut), cut_rest.filter(cut).str.strip_prefix(v.filter(cut)))
    return value, u


def _pairs(rows: pl.DataFrame, ascii: bool, scan: bool) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """The numeric pairs of ``rows``, their distinct pairs' values and the table of their distinct keys.

    Pairs: one row per pair, in line order (MLPerf lines after the others): ``r`` (the row of ``rows`` it is on) and
    ``at`` (its row of the values); a pair's line, rank, kind and time are its row's (:func:`_of_row`), its code,
    value and unit its value row's (:func:`_of_pair`), gathered where needed. Values: one row per distinct pair (the
    scan: per pair that does not repeat its key's last value) and per MLPerf line: ``code`` (its key's row in the table, null for an MLPerf line without a key), ``value`` (float,
    null when unreadable) and ``u`` (the value's own unit suffix, null for none). Keys: per code, ``key``
    (normalised; MLPerf keys as written), ``series`` (from :data:`KEYS`, else the key), ``unit`` (from :data:`KEYS`,
    null: the value's suffix), ``o`` (the key's place in :data:`STEP_KEYS`, null for a non-step key), ``sample``
    (the key is no step key: its pairs are samples) and ``sid`` (the series' number). Pairs repeat a few dozen keys:
    each is normalised and looked up once, and the values carry its integer code, not the string. ``ascii``: every
    line of ``rows`` is ASCII; ``scan``: they are read by :func:`~di.convert.logs.pairscan.line_pairs`, else by
    :func:`_regex_pairs`."""
    text = rows.get_column("text")
    kind = rows.get_column("kind")
    level_heads = bool(text.str.contains(LEVEL_HEAD_RE).any())  # Python logging's "name - LEVEL - ": only where it is
    ml_rows = (kind == "mllog").arg_true()
    if scan:
        from di.convert.logs.pairscan import line_pairs

        found = line_pairs(text, kind == "mllog", level_heads=level_heads)
        p = pl.DataFrame([found.row, found.at])
        value, u, ks, code = found.value, found.unit, found.keys, found.key_code
    else:
        p, d, ks = _regex_pairs(text, kind, level_heads, ascii)
        value, u = _read_values(d.get_column("rest"))
        code = d.get_column("code")
    keys = pl.DataFrame({"k": ks}).select(pl.col("k").str.strip_chars(" '\"").alias("key"))
    keys = keys.select(_norm("key").alias("key"))
    vals = pl.DataFrame([code.alias("code"), value.alias("value"), u.alias("u")])
    if ml_rows.len():  # MLPerf keys as written, after the others
        ml_text = text.gather(ml_rows)
        ml = pl.DataFrame(
            {
                "r": ml_rows,
                "key": ml_text.str.extract(r"\"key\":\s*\"([^\"]+)\""),
                "value": ml_text.str.extract(r"\"value\":\s*([-+]?\d[\d.]*(?:[eE][-+]?\d+)?)").cast(
                    pl.Float64, strict=False
                ),
                "u": pl.Series([], dtype=pl.String).extend_constant(None, ml_rows.len()),
            }
        )
        mk = ml.select(pl.col("key").drop_nulls().unique(maintain_order=True))
        mk = mk.with_row_index("code", offset=keys.height).with_columns(pl.col("code").cast(pl.Int64))
        keys = pl.concat([keys, mk.select("key")])
        ml = ml.join(mk, on="key", how="left", maintain_order="left")
        at = pl.int_range(vals.height, vals.height + ml.height, dtype=pl.UInt32, eager=True)
        vals = pl.concat([vals, ml.select(vals.columns)])
        p = pl.concat([p, pl.DataFrame([ml.get_column("r"), at.alias("at")])])
    keys = keys.join(_KEYS, on="key", how="left", maintain_order="left").select(
        "key",
        pl.coalesce("series", "key").alias("series"),
        "unit",
        pl.col("key")
        .replace_strict({k: i for i, k in enumerate(STEP_KEYS)}, default=None, return_dtype=pl.Int32)
        .alias("o"),
        (~pl.col("key").is_in(STEP_KEYS)).alias("sample"),
    )
    keys = keys.with_columns(pl.col("series").rank("dense").cast(pl.Int64).alias("sid"))
    return p, vals, keys


def _of_key(pairs: pl.DataFrame, keys: pl.DataFrame, column: str) -> pl.Series:
    """Per pair: ``column`` of its key (:func:`_pairs`' table)."""
    return keys.get_column(column).gather(pairs.get_column("code"))


def _of_pair(pairs: pl.DataFrame, vals: pl.DataFrame, column: str) -> pl.Series:
    """Per pair: ``column`` of its distinct pair (the row ``at`` of ``vals``, :func:`_pairs`)."""
    return vals.get_column(column).gather(pairs.get_column("at"))


def _of_row(pairs: pl.DataFrame, rows: pl.DataFrame, column: str) -> pl.Series:
    """Per pair: ``column`` of its line (the row ``r`` of ``rows``, :func:`_pairs`)."""
    return rows.get_column(column).gather(pairs.get_column("r"))


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


ERROR_LITERALS = (
    r"Error|Exception|Interrupt|CUDA out of memory|slurmstepd|Traceback|return code|Segmentation fault|core dumped"
    r"|OVERFLOW"
)
"""Literals one of which every :data:`ERROR_RE` line (and overflow line) holds: a fast first search."""


MARKS_RE = rf"{HINT_RE}|{ERROR_LITERALS}|\[Rank " + "|\\{'|\\{\""
"""The literals of :data:`HINT_RE`, :data:`ERROR_LITERALS` and the ``[Rank N]`` tag, and the ``{'`` and ``{"`` that
HF and JSON Lines lines start with (a literal ``{`` alone would make the search stop at every brace)."""


def _instants(lines: pl.DataFrame, marked: pl.Series) -> pl.DataFrame:
    """Errors and overflow skips, among the ``marked`` lines (:func:`_marked`). An overflow line is named at once;
    the error regexes run on the other lines only."""
    cand = lines.select("line", "rank", "ts", "text").filter(marked).filter(pl.col("text").str.contains(ERROR_LITERALS))
    name = pl.Series("name", [], pl.String).extend_constant(None, cand.height)
    if cand.height:
        text = cand.get_column("text")
        overflow = text.str.contains("OVERFLOW! Rank", literal=True)
        name = name.scatter(overflow.arg_true(), "overflow skip")
        other = (~overflow).arg_true()
        errs = other.filter(text.gather(other).str.contains(ERROR_RE))
        if errs.len():
            err_name = pl.DataFrame({"text": text.gather(errs)}).select(
                pl.coalesce(
                    pl.col("text").str.extract(r"^(?:[\w.]+\.)?(\w*(?:Error|Exception|Interrupt))\b"),
                    pl.col("text").str.extract(
                        r"(CUDA out of memory|slurmstepd: error|ChildFailedError|Traceback"
                        r"|Segmentation fault|exits with return code)"
                    ),
                    pl.lit("error"),
                )
            )
            name = name.scatter(errs, err_name.to_series())
    return line_instants(cand.with_columns(name).filter(pl.col("name").is_not_null()), "other")


def parse_training(lines: pl.DataFrame, *, scan_min_bytes: int | None = None) -> Parts:
    """Training-log lines (from :func:`di.convert.logs.text.read_lines`) as :class:`Parts` (see the module docstring).
    ``scan_min_bytes``: the bytes of marked lines from which the numba scans read them, None for :func:`_scans_pay`'s
    choice (the same tables either way)."""
    if "own_ts" not in lines.columns:  # read_log found them already
        lines = lines.with_columns(own_line_times(lines))
    marked = _marked(lines)
    lines, ascii, scan = _classify(lines, marked, scan_min_bytes)  # the lines the parts below read are marked ones
    mllog = (lines.get_column("kind") == "mllog").any()  # else no line's time is read again
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
    # samples: the pairs of a non-step key with a value, told per distinct pair
    sample = keys.get_column("sample").gather(vals.get_column("code")) & vals.get_column("value").is_not_null()
    key = pairs.filter(sample.gather(pairs.get_column("at")))
    mg_time = epoch or meg is None or not megatron.gather(pairs.get_column("r")).any()
    key = key.with_columns(
        _of_row(key, rows, "rank"),
        _of_row(key, rows, "ts"),
        _of_pair(key, vals, "code"),
        _of_pair(key, vals, "value"),
    )
    if not mg_time:  # no timestamps: Megatron samples sit at their cumulative iteration time
        key = (
            key.with_columns(_of_row(key, rows, "line"))
            .join(meg.select("line", pl.col("end_ns").alias("mts")), on="line", how="left")
            .with_columns(pl.coalesce("mts", "ts").alias("ts"))
        )
        # other lines (errors) sit at the time of the iteration line before them
        marks = meg.select(pl.col("line"), pl.col("end_ns").alias("mts")).sort("line")
        inst = (
            inst.sort("line")
            .join_asof(marks, on="line", strategy="backward", check_sortedness=False)
            .with_columns(pl.col("mts").fill_null(0).alias("start_ns"), pl.col("mts").fill_null(0).alias("end_ns"))
            .drop("mts")
        )
    # HF prints once per rank: one sample per (rank, series, time, value), by the series' number, not its name
    first = None
    if scan:
        from di.convert.logs.pairscan import first_samples

        first = first_samples(
            key.get_column("rank"), key.get_column("ts"), _of_key(key, keys, "sid"), key.get_column("value")
        )
    if first is not None:
        key = key.filter(first)
    elif mg_time:  # a pair's rank and time are its line's: (rank, time) told per line, (series, value) per distinct
        # pair, then a sample's four are one integer (a hash of four columns per sample costs twice as much)
        _, line_rt = _group_ids(rows.select("rank", "ts"))
        _, pair_sv = _group_ids(pl.DataFrame([keys.get_column("sid").gather(vals.get_column("code")), vals["value"]]))
        both = line_rt.gather(key.get_column("r")).cast(pl.UInt64) * 2**32 + pair_sv.gather(key.get_column("at"))
        key = key.filter(both.is_first_distinct())
    else:
        key = key.with_columns(_of_key(key, keys, "sid")).unique(
            ["rank", "sid", "ts", "value"], keep="first", maintain_order=True
        )
    samples = key.select(
        "rank",
        pl.lit("training").alias("track"),
        _of_key(key, keys, "series"),
        pl.coalesce(_of_key(key, keys, "unit"), _of_pair(key, vals, "u")).alias("unit"),
        pl.col("ts").alias("ts_ns"),
        "value",
    )
    timed = _timed_steps(rows) if meg is None or not meg.height else None
    ph_samples, ph_events, ph_lines = step_phases(lines, meg if timed is None else timed)
    samples = pl.concat([samples, ph_samples], how="diagonal_relaxed") if ph_samples.height else samples
    ev = pl.concat(
        [f for f in (meg, timed, _mllog_steps(rows) if mllog else None, inst, ph_events) if f is not None],
        how="diagonal_relaxed",
    ).with_columns(pl.lit("training").alias("track"))
    kinds = rows.group_by("kind").len().sort("kind")
    info: dict[str, Any] = {
        "training": {
            "producers": dict(zip(kinds.get_column("kind").to_list(), kinds.get_column("len").to_list())),
            "time": "timestamps" if epoch else ("megatron_cumulative" if timed is None else "line_order"),
            "timezone": "local time of the log, read as UTC" if epoch else None,
            "errors": inst.filter(pl.col("name") != "overflow skip").get_column("name").to_list()[:20],
        }
    }
    claimed = pl.concat([rows.get_column("line"), inst.get_column("line"), ph_lines])
    return Parts("training", events=ev, samples=samples, claimed=claimed, dropped=dropped, info=info, epoch=bool(epoch))
