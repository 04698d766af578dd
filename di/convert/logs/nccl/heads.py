"""The heads of NCCL lines: where a line's ``host:pid:tid [cudaDev] NCCL LEVEL`` prefix is, what it gives (level,
host, pid, tid, device, a leading timestamp, TRACE's milliseconds since start) and the message after it. Lines that
repeat whole (a loop's calls) are cut once per distinct text."""

from __future__ import annotations

import polars as pl

from di.convert.logs.text import dense_ids, distinct_ids

SNIFF_RE = r"\S+:\d+:\d+ \[\d+\] (?:[\d.]+ \S+:\d+ )?NCCL (?:INFO|WARN|TRACE)"


def _ts_ns(col: str) -> pl.Expr:
    return (
        pl.col(col)
        .str.replace(",", ".")
        .str.replace("T", " ")
        .str.to_datetime("%Y-%m-%d %H:%M:%S%.f", strict=False, time_unit="ns")
        .dt.epoch("ns")
    )


HEAD_RE = (
    r"(?:\[(?P<ts>\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?)\] ?)?(?P<host>[A-Za-z0-9][\w.\-]*):(?P<pid>\d+):(?P<tid>\d+) "
    r"\[(?P<dev>\d+)\](?: (?P<ms>\d+\.\d+) \S+:\d+)?$"
)
"""What comes before `` NCCL LEVEL `` (found with a literal search, so the regex runs on these few bytes only)."""


LEVELS = ("INFO", "WARN", "TRACE", "ABORT")
LEVEL_HEX = {
    (level + end).encode().hex(): level for level in LEVELS for end in ("", *(" \t\n\v\f\r" if len(level) < 5 else ()))
}
"""The five bytes after `` NCCL `` (hex: they may end inside a character of a garbled line) that name a level: the
level, then whitespace or the line's end."""
KEY_BYTES = len(" NCCL ") + len("ABORT")
"""A line's key: its bytes up to and with the level's (the head, `` NCCL `` and five bytes)."""
RAW_TEXT = pl.col("text").cast(pl.Binary)
"""A line's text as bytes (cut at byte offsets)."""


TRACK = pl.format("NCCL {}:{} dev {}", "host", "pid", "dev")
"""An NCCL event's track: its process and (the communicator's) device."""


HEAD_COLUMNS = ("level", "host", "pid", "tid", "dev", "ts_ns", "ms_ns")
"""What a line's head gives (see :func:`_prefixed`)."""


def _with_heads(df: pl.DataFrame, heads: pl.DataFrame, *extra: str) -> pl.DataFrame:
    """``df`` (rows of :func:`_prefixed`'s lines) with its heads' :data:`HEAD_COLUMNS` (and ``extra`` columns of
    ``heads``): a gather by ``hid``."""
    # ``series[indices]`` gathers without the expression engine (``gather`` builds a query: ~10x the fixed cost)
    at = df.get_column("hid")
    return df.hstack([heads.get_column(name)[at] for name in (*HEAD_COLUMNS, *extra)])


def _prefixed(lines: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The NCCL lines (``line``, ``prefix_rank``, ``hid``, ``msg``: the text after ``NCCL LEVEL``, and ``lid``, the
    line's text id, where the lines repeat: :func:`_repeated_lines`) and their distinct heads (row ``hid`` of the
    second table: :data:`HEAD_COLUMNS`, ``thread``, one id per host, pid and tid, and ``gpu``, one per host, pid and
    device).
    Each part gathers the head columns of the few lines it reads (:func:`_with_heads`): the lines' filters move four
    columns, not ten."""
    pos = pl.col("text").str.find(" NCCL ", literal=True)  # a byte offset
    rows = lines.select("line", "prefix_rank", "text", pos.alias("pos")).filter(pl.col("pos").is_not_null())
    # where whole lines repeat (a loop's calls and their TUNING lines, with no timestamp and opCount 0 or reused
    # buffers), the head and message of each distinct line are cut and read once (``lid``: the line's text id)
    repeated = _repeated_lines(rows.get_column("text"))
    lid = None if repeated is None else repeated[0]
    found = rows if repeated is None else rows[["text", "pos"]][repeated[1]]
    # cut at bytes (str.slice counts characters: a line with non-ASCII text before the prefix was cut wrong); the head
    # and level of a line are read from its key: keys repeat (one per thread and level, or per timestamp), so the cut
    # in two, the regex, host fix-up and casts run once per distinct key
    found = found.with_columns(RAW_TEXT.bin.slice(0, pl.col("pos") + KEY_BYTES).alias("key"))
    kid, firsts = distinct_ids(found.get_column("key"))
    # the key holds its " NCCL " at pos: one pos per key
    heads = _typed_heads(_fixed_hosts(_head_fields(found[["key", "pos"]].gather(firsts))))
    hid, msg = _line_heads(found, heads, kid, len(firsts))
    cols = [hid, msg]
    if lid is not None:
        cols = [col[lid] for col in cols] + [lid]
    p = rows[["line", "prefix_rank"]].hstack(cols)
    if hid.has_nulls():
        p = p.filter(pl.col("hid").is_not_null())
    return p, heads.drop("kid")


def _head_fields(keys: pl.DataFrame) -> pl.DataFrame:
    """The heads of the distinct keys ``keys`` (``key``, ``pos``; row ``kid``): ``kid``, ``head`` (the text before
    `` NCCL ``), ``level`` and :data:`HEAD_RE`'s groups, kept where the level is one of :data:`LEVELS` and the head
    names a host."""
    key = pl.col("key")
    head = key.bin.slice(0, pl.col("pos")).cast(pl.String)
    return (
        keys.select(
            pl.int_range(pl.len(), dtype=pl.UInt32).alias("kid"),
            head.alias("head"),
            key.bin.slice(pl.col("pos") + 6, 5)
            .bin.encode("hex")
            .replace_strict(LEVEL_HEX, default=None)
            .alias("level"),
            head.str.extract_groups(HEAD_RE).alias("g"),
        )
        .unnest("g")
        .filter(pl.col("level").is_in(LEVELS) & pl.col("host").is_not_null())
    )


def _fixed_hosts(heads: pl.DataFrame) -> pl.DataFrame:
    """``heads`` (:func:`_head_fields`) with each unknown host replaced by the longest known host it ends with."""
    # a glued line's host may carry the tail of the line before it ("...N/A   0mew0:..."): the known host it ends with
    known = set(
        heads.filter(pl.col("head").str.starts_with(pl.col("host")) | pl.col("ts").is_not_null())
        .get_column("host")
        .unique()
    )
    fix = {
        h: max((k for k in known if h.endswith(k)), key=len, default=h)
        for h in heads.get_column("host").unique()
        if h not in known
    }
    if fix:
        heads = heads.with_columns(pl.col("host").replace(fix))
    return heads


def _typed_heads(heads: pl.DataFrame) -> pl.DataFrame:
    """``heads`` (:func:`_fixed_hosts`) as :func:`_prefixed`'s second table (still with ``kid``): numbers cast, times
    in ns, heads whose numbers do not fit dropped, then ``hid`` (the row), ``thread`` and ``gpu``."""
    heads = heads.select(
        "kid",
        "level",
        "host",
        *(pl.col(name).cast(pl.Int64, strict=False) for name in ("pid", "tid", "dev")),
        _ts_ns("ts").alias("ts_ns"),
        (pl.col("ms").cast(pl.Float64) * 1e6).round().cast(pl.Int64, strict=False).alias("ms_ns"),
        pl.col("ms").is_not_null().alias("has_ms"),
        pl.col("head").str.contains("CCL version ", literal=True).alias("head_version"),
    )
    # a pid, tid or device past int64, or a TRACE time past int64 ns, is no NCCL head (it stopped the load): its lines
    # are left to the unknown ones
    fits = pl.col("ms_ns").is_not_null() | ~pl.col("has_ms")
    heads = heads.drop_nulls(["pid", "tid", "dev"]).filter(fits).drop("has_ms").with_row_index("hid")
    return heads.with_columns(
        pl.col("hid").min().over("host", "pid", "tid").alias("thread"),  # one id per thread
        pl.col("hid").min().over("host", "pid", "dev").alias("gpu"),  # one id per process and device
    )


def _line_heads(found: pl.DataFrame, heads: pl.DataFrame, kid: pl.Series, n_keys: int) -> tuple[pl.Series, pl.Series]:
    """Each line of ``found`` (``text``, ``pos``)'s head ``hid`` (null where its key ``kid``, one of ``n_keys``, is
    not a head's: those lines are not NCCL's) and its message ``msg``, the text after ``NCCL LEVEL``."""
    hid = pl.repeat(None, n_keys, dtype=pl.UInt32, eager=True)
    hid = hid.scatter(heads.get_column("kid"), heads.get_column("hid"))[kid].rename("hid")
    # the bytes of each line's level
    skip = (7 + heads.get_column("level").str.len_bytes())[hid]
    # the message after "NCCL LEVEL ": one slice of the line (no copy of its rest first); the line's text and the
    # head's strings are not carried through the filters and joins that follow
    msg = found.hstack([skip.alias("skip")]).select(RAW_TEXT.bin.slice(pl.col("pos") + pl.col("skip")).cast(pl.String))
    return hid, msg.to_series().alias("msg")


REPEATED_LINES = 0.3
"""Lines are read once per distinct text where at most this share of a sample of the NCCL lines is distinct."""
REPEAT_SAMPLE = 16384
"""Lines of that sample, spread over the file in :data:`REPEAT_BLOCK`-line runs (a file of more distinct lines is not
hashed whole for nothing)."""
REPEAT_BLOCK = 64
"""Lines of each run of the sample: the lines of a run lie side by side in memory (hashing lines strewn over the file
costs several times more, a cache miss each), and a loop's repeated lines still fall in several runs."""


def _line_sample(text: pl.Series) -> pl.Series:
    """:data:`REPEAT_SAMPLE` of the lines ``text`` in :data:`REPEAT_BLOCK`-line runs evenly spread (all of them where
    they are fewer)."""
    n = text.len()
    if n <= REPEAT_SAMPLE:
        return text
    runs = REPEAT_SAMPLE // REPEAT_BLOCK
    at = pl.int_range(REPEAT_SAMPLE, dtype=pl.Int64, eager=True)
    return text.gather((at // REPEAT_BLOCK) * (n // runs) + at % REPEAT_BLOCK)


def _repeated_lines(text: pl.Series) -> tuple[pl.Series, pl.Series] | None:
    """Each line's text id (``lid``, :func:`~di.convert.logs.text.dense_ids`) and the first line of each, where the lines repeat
    (:data:`REPEATED_LINES`); None where they do not, or two texts share a hash (then each line is read on its
    own)."""
    if not text.len():
        return None
    sample = _line_sample(text)
    if sample.hash().n_unique() > REPEATED_LINES * sample.len():  # equal texts, equal hashes
        return None
    ids, firsts = dense_ids(text.hash())
    if not text[firsts[ids]].eq_missing(text).all():
        return None
    return ids.rename("lid"), firsts
