"""DCGM's ``dcgmi dmon`` tables as samples.

A table: a ``#Entity  F1  F2 ...`` header (``# Entity`` in older DCGM: :data:`DCGMI_HEADER_RE`), an ``ID`` (``Id``)
line right under it (a unit per field in DCGM 4: ``ID  W  C  MHz``), rows ``GPU 0  v1  v2 ...`` (entities of
:data:`DCGMI_ENTITY`; ``N/A`` skipped, and counted). Series ``dcgm.<field>`` for a GPU, ``dcgm.<field> (<entity>
<id>)`` for other entities, with the unit of :data:`DCGMI_UNITS`, else the value's; one sample per ``-d`` interval
(1 s by default) from 0.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from di.convert.logs.leadbytes import lead_bytes
from di.convert.logs.smi.cells import read_numbers
from di.convert.logs.smi.dmon import DMON_INTERVAL_NS

DCGMI_HEADER_RE = r"^#\s*Entity\s+\S"
DCGMI_ENTITY = r"(?:GPU-CI|GPU-I|GPU|Switch|NvSwitch|Link|CPU|Core)"
"""Entity groups ``dcgmi dmon`` prints (GPUs, MIG instances, NVSwitches and their links, CPUs and cores)."""
DCGMI_UNITS = {
    "POWER": "W",
    "PWR": "W",
    "GTEMP": "C",
    "MMTMP": "C",
    "SMCLK": "MHz",
    "MMCLK": "MHz",
    "GPUTL": "%",
    "MCUTL": "%",
    "FBUSD": "MiB",
    "FBFRE": "MiB",
    "FBTTL": "MiB",
    "PCITX": "B/s",
    "PCIRX": "B/s",
    "NVLTX": "B/s",
    "NVLRX": "B/s",
    "GRACT": "ratio",
    "SMACT": "ratio",
    "SMOCC": "ratio",
    "TENSO": "ratio",
    "DRAMA": "ratio",
    "FP64A": "ratio",
    "FP32A": "ratio",
    "FP16A": "ratio",
    "ENCUT": "%",
    "DECUT": "%",
    "XIDER": "count",
}
"""Units of ``dcgmi dmon``'s field short names (DCGM's field list: activity fields are ratios 0..1, PCIe/NVLink bytes/s)."""


def _dcgmi_headers(hashed: pl.DataFrame) -> pl.DataFrame:
    """The ``dcgmi dmon`` headers among ``hashed`` (the lines that start with ``#``)."""
    # the header's "E" is its first character after the "#" and ASCII whitespace (other whitespace is not ASCII): a
    # line whose first 3 bytes after the "#" say otherwise is not searched
    _, (_, *after) = lead_bytes(hashed.get_column("text"), 4)
    ruled_out = np.zeros(hashed.height, np.bool_)
    decided = np.zeros(hashed.height, np.bool_)
    for byte in after:
        space = (byte == ord(" ")) | ((byte >= 0x09) & (byte <= 0x0D))
        ruled_out |= ~decided & ~space & (byte != ord("E")) & (byte < 0x80)
        decided |= ~space
    hdr = hashed.filter(pl.Series(~ruled_out)).filter(pl.col("text").str.contains("Entity", literal=True))
    return hdr.filter(pl.col("text").str.contains(DCGMI_HEADER_RE))


def _dcgmi_blocks(lines: pl.DataFrame, hdr: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The lines from the first header (``hdr``) on, stripped (``t``), with ``is_h`` (a header) and ``block`` (the
    table, from 1); and each table's ``fields`` and their count ``n``."""
    t = pl.col("text").str.strip_chars()
    df = lines.filter(pl.col("line") >= hdr.get_column("line").min()).with_columns(
        t.alias("t"), pl.col("line").is_in(hdr.get_column("line").implode()).alias("is_h")
    )
    df = df.with_columns(pl.col("is_h").cum_sum().alias("block"))
    heads = (
        df.filter("is_h")
        .select(
            "block",
            pl.col("t")
            .str.replace(r"^#\s*Entity\s+", "")
            .str.split(" ")
            .list.eval(pl.element().filter(pl.element() != ""))
            .alias("fields"),
        )
        .with_columns(pl.col("fields").list.len().alias("n"))
    )
    return df, heads


def _dcgmi_rows(df: pl.DataFrame, heads: pl.DataFrame) -> pl.DataFrame:
    """The rows of the tables among ``df`` (an entity, its id, as many cells as the header: ``raw``), with their
    table's ``fields``."""
    rows = (
        df.filter(pl.col("t").str.contains(rf"^{DCGMI_ENTITY}\s+[0-9]{{1,9}}\s"))  # a longer id, other digits: garbled
        .with_columns(
            pl.col("t")
            .str.extract_groups(rf"^(?P<entity>{DCGMI_ENTITY})\s+(?P<id>[0-9]{{1,9}})\s+(?P<rest>.*)$")
            .alias("g")
        )
        .unnest("g")
    )
    rows = rows.with_columns(
        pl.col("rest").str.split(" ").list.eval(pl.element().filter(pl.element() != "")).alias("raw")
    ).join(heads, on="block")
    return rows.filter(pl.col("raw").list.len() == pl.col("n"))


def _dcgmi_samples(cells: pl.DataFrame) -> pl.DataFrame:
    """The samples of the ``cells`` that hold a number (``value``; ``k``: the row's sample)."""
    name = pl.when(pl.col("entity") == "GPU").then(pl.format("dcgm.{}", "fields"))
    name = name.otherwise(pl.format("dcgm.{} ({} {})", "fields", "entity", "id"))
    return cells.filter(pl.col("value").is_not_null()).select(
        pl.when(pl.col("entity") == "GPU").then(pl.col("id").cast(pl.Int64)).alias("gpu"),
        pl.lit(None, pl.String).alias("host"),
        (pl.col("k") * DMON_INTERVAL_NS).alias("ts"),
        pl.lit(False).alias("abs"),
        name.alias("series"),
        pl.coalesce(pl.col("fields").replace_strict(DCGMI_UNITS, default=None, return_dtype=pl.String), "vunit").alias(
            "unit"
        ),
        "value",
        "line",
    )


def _dcgmi(lines: pl.DataFrame, hashed: pl.DataFrame) -> tuple[pl.DataFrame, int, pl.Series]:
    """``dcgmi dmon`` tables: a ``#Entity  F1  F2 ...`` header (``# Entity`` in older DCGM), an ``ID`` (``Id``) line,
    rows ``GPU 0  v1  v2 ...`` (entities GPU, GPU-I, GPU-CI, ...; ``N/A`` skipped); one sample per ``-d`` interval
    (1 s by default) from 0. Also the count of ``N/A`` cells and the lines read (headers, ID lines and rows, those
    of ``N/A`` only too). ``hashed``: the lines that start with ``#``."""
    hdr = _dcgmi_headers(hashed)
    if not hdr.height:
        return pl.DataFrame(), 0, pl.Series("line", [], pl.UInt32)
    df, heads = _dcgmi_blocks(lines, hdr)
    rows = _dcgmi_rows(df, heads)
    k = pl.col("line").rank("dense").over("block", "entity", "id") - 1
    cells = rows.with_columns(k.cast(pl.Int64).alias("k")).explode(["fields", "raw"])
    na = int((cells.get_column("raw") == "N/A").sum())
    # the header's unit line (``ID``, ``Id``; a unit per field in DCGM 4: ``ID  W  C  MHz``) right under it
    under = df.filter(pl.col("is_h").shift(1).fill_null(False) & pl.col("t").str.contains(r"^I[Dd]\b"))
    read = pl.concat([hdr.get_column("line"), under.get_column("line"), rows.get_column("line")])
    return _dcgmi_samples(read_numbers(cells)), na, read
