"""nvidia-smi output: ``--query-gpu`` CSV (with or without header and units), ``dmon``/``pmon`` tables, ``-q`` text; DCGM's ``dcgmi dmon`` tables alike.

Every table is found by its own header, so a file that holds several (a capture
script's sections, one ``-l`` log) is read whole; all of it with polars string
ops. What it maps to: one counter timeline per GPU (``GPU <index>``) and one
series per numeric field, named as nvidia-smi names it (``power.draw``,
``utilization.gpu``; dmon/pmon ``dmon.pwr``, ``pmon.sm``; ``-q``
``q.GPU Power Readings.Average Power Draw``; ``dcgmi dmon`` ``dcgm.SMACT``), with its unit from the header
(``power.draw [W]``, dmon's unit line), the value (``22.89 W``) or
:data:`~di.convert.logs.smi.query_heads.UNITS`. ``[N/A]``/``[Not Supported]`` values are skipped (counted in
``info.nvidia_smi.not_available``); text fields (name, uuid, pstate) are not series.

GPU identity: the ``index`` column, dmon's ``gpu`` column, ``-q``'s ``GPU <busId>``
blocks in order; without any (``--format=csv,noheader``) the row's position in
its sample (:mod:`di.convert.logs.smi.query_gpu`).
Times: the ``timestamp`` column or ``-q``'s Timestamp (``unix_epoch``, local time
read as UTC); dmon/pmon without ``-o T``: one second per sample, from 0
(``relative``), as dmon samples by default.

One module per form of output: :mod:`.query_gpu` (with :mod:`.query_heads`, :mod:`.query_samples` and
:mod:`.timestamps`), :mod:`.dmon`, :mod:`.qlog` (``-q``) and :mod:`.dcgmi`; :mod:`.kinds` sorts a log's lines for
them, :mod:`.cells` reads their cells. :func:`parse_smi` puts their samples on one clock and one track per GPU.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import polars as pl

from di.convert.logs.build import Parts
from di.convert.logs.smi.dcgmi import DCGMI_HEADER_RE, _dcgmi
from di.convert.logs.smi.dmon import DMON_RE, _dmon
from di.convert.logs.smi.kinds import _kinds
from di.convert.logs.smi.qlog import QLOG_RE, _qlog
from di.convert.logs.smi.query_gpu import parse_query_gpu
from di.convert.logs.smi.query_heads import HEADER_RE, NOHEADER_RE, UNITS

__all__ = ["UNITS", "parse_smi", "sniff_smi"]

BANNER_RE = r"^(?:# \$ nvidia-smi\b|\| NVIDIA-SMI \d|NVIDIA System Management Interface)"
"""A capture's command banner, the default table's title, ``nvidia-smi -h``'s first line."""
TABLE_COLUMNS = {"gpu": pl.Int64, "host": pl.String, "ts": pl.Int64, "abs": pl.Boolean, "series": pl.String}
TABLE_COLUMNS |= {"unit": pl.String, "value": pl.Float64, "line": pl.UInt32}
"""The columns (and types) of each form's samples, as :func:`parse_smi` puts them together."""


def sniff_smi(lines: list[str]) -> bool:
    """True when the first lines hold an nvidia-smi (or ``dcgmi dmon``) table or report."""
    return any(
        re.match(QLOG_RE, ln)
        or re.match(DCGMI_HEADER_RE, ln)
        or re.match(BANNER_RE, ln)
        or re.match(NOHEADER_RE, ln)
        or re.match(DMON_RE, ln)
        or (re.match(HEADER_RE, ln) and ("." in ln.split(",")[0] or ln.startswith(("timestamp", "index"))))
        for ln in lines
    )


def _tables(lines: pl.DataFrame) -> tuple[dict[str, pl.DataFrame], int, tuple[pl.Series, pl.Series, pl.Series]]:
    """Each form's samples (``query_gpu``, ``dmon_pmon``, ``q``, ``dcgmi_dmon``), the count of cells that say no
    value, and the lines read that make no sample (``dcgmi dmon``'s, dmon/pmon's headers and unit lines, every line
    of ``-q`` reports)."""
    kinds = _kinds(lines)
    csv, na, csv_rows = parse_query_gpu(kinds.comma)
    dcgmi, dcgmi_na, dcgmi_lines = _dcgmi(lines, kinds.hashed)
    dmon, dmon_lines = _dmon(kinds, csv_rows)
    q, q_lines = _qlog(lines, kinds)
    tables = {
        "query_gpu": csv.with_columns(pl.col("ts").is_not_null().alias("abs")) if csv.height else csv,
        "dmon_pmon": dmon,
        "q": q,
        "dcgmi_dmon": dcgmi,
    }
    return tables, na + dcgmi_na, (dcgmi_lines, dmon_lines, q_lines)


def _one_clock(parts: list[pl.DataFrame]) -> tuple[pl.DataFrame, bool, int | None]:
    """The samples of ``parts`` together (:data:`TABLE_COLUMNS`) on one clock, with a GPU number each; whether the
    clock is the epoch's, and where it is relative, the date of its 0 (None: no reading has a date)."""
    cols = TABLE_COLUMNS
    s = pl.concat([p.select(pl.col(c).cast(t) for c, t in cols.items()) for p in parts] or [pl.DataFrame(schema=cols)])
    # one clock per log: absolute where every reading has a date and time (--query-gpu's timestamp, dmon -o DT, -q's
    # Timestamp); else relative, the dated readings from the first of them (dmon without -o DT counts seconds from 0)
    absolute = s.get_column("abs")
    epoch = bool(s.height) and bool(absolute.all())
    base = None if epoch or not absolute.any() else int(s.filter("abs").get_column("ts").min())
    if base is not None:
        s = s.with_columns(pl.when("abs").then(pl.col("ts") - base).otherwise("ts").alias("ts"))
    s = s.with_columns(pl.col("ts").fill_null(pl.col("line").cast(pl.Int64)), pl.col("gpu").fill_null(0))
    return s, epoch, base


def _track(s: pl.DataFrame) -> pl.Expr:
    """Each sample's track, ``GPU <gpu>``: each track's name written once."""
    gpus = s.get_column("gpu").unique()  # each track's name written once
    if not s.height:
        return pl.lit(None, pl.String)  # (keeps String)
    if int(gpus.max()) - int(gpus.min()) < 1 << 16:  # GPU numbers: the names of the range, gathered by number
        low = int(gpus.min())
        names = pl.int_range(low, int(gpus.max()) + 1, eager=True).to_frame("gpu").select(pl.format("GPU {}", "gpu"))
        return pl.lit(names.to_series()).gather(pl.col("gpu") - low)
    return pl.col("gpu").replace_strict(gpus, gpus.to_frame().select(pl.format("GPU {}", "gpu")).to_series())


def _claimed(lines: pl.DataFrame, s: pl.DataFrame, also: tuple[pl.Series, ...]) -> pl.Series:
    """The lines read: those of the samples ``s`` and ``also``, in order, each once."""
    read = np.zeros(int(lines.get_column("line").max()) + 1, np.bool_)
    read[s.get_column("line").to_numpy()] = True
    for lines_read in also:  # headers, unit lines, a report's non-numeric lines
        read[lines_read.to_numpy()] = True
    return pl.Series("line", np.flatnonzero(read), pl.UInt32)


def parse_smi(lines: pl.DataFrame) -> Parts:
    """nvidia-smi tables of a log (``lines`` from :func:`di.convert.logs.text.read_lines`) as :class:`Parts`."""
    lines = lines.select("line", "text")  # the tables' filters and joins carry no other column
    tables, na, also = _tables(lines)
    dcgmi_lines = also[0]
    parts = [f for f in tables.values() if f.height]
    if not parts and not dcgmi_lines.len():
        return Parts("nvidia_smi")
    # a dcgmi table whose every value is N/A (fields DCGM cannot read on that GPU) is read, with no series
    found = [n for n, f in tables.items() if f.height or (n == "dcgmi_dmon" and dcgmi_lines.len())]
    s, epoch, base = _one_clock(parts)
    samples = s.select(
        pl.lit(None, pl.Int64).alias("rank"),
        "host",
        _track(s).alias("track"),
        "series",
        "unit",
        pl.col("ts").alias("ts_ns"),
        "value",
    )
    info: dict[str, Any] = {
        "nvidia_smi": {
            "tables": found,
            "not_available": na,
            "time": "timestamps" if epoch else "relative",
        }
    }
    if base is not None:  # the readings' own dates, for whoever needs them: base + the sample's time
        info["nvidia_smi"]["dated_from_ns"] = base
    claimed = _claimed(lines, s, also)
    return Parts("nvidia_smi", samples=samples, claimed=claimed, info=info, epoch=epoch)
