"""NVTX_EVENTS -> event rows: push/pop ranges on their thread, start/end ranges on an async track per
(process, domain), marks as instants.

A range's or mark's text is ``text`` (inline) or ``textId`` (a registered
string); its domain is named by the NvtxDomainCreate record of (process,
domain id). cat ``nccl`` in the NCCL domain, ``step`` for step-like texts
(:data:`STEP_TEXT`: ProfilerStep#N, "step N", ...), else ``user``. Ranges
without an end and records that are neither ranges nor marks are counted in
``dropped``.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import polars as pl

from di.convert.jsonstrings import json_strings
from di.convert.nsys.activity.rows import base, frame, json_object, num
from di.convert.nsys.activity.tables import NVTX
from di.convert.nsys.report import Report, pid_of, tid_of

__all__ = ["STEP_TEXT", "nvtx"]

NVTX_MARK, NVTX_PUSHPOP, NVTX_STARTEND, NVTX_DOMAIN = 34, 59, 60, 75
"""ENUM_NSYS_EVENT_TYPE: NvtxMark, NvtxPushPopRange, NvtxStartEndRange, NvtxDomainCreate."""
NVTX_MARKS, NVTX_PUSHPOPS, NVTX_STARTENDS = (34, 65), (59, 70), (60, 71)
"""With the NVTXT (text-file NVTX) variants: NvtxtMark 65, NvtxtPushPopRange 70, NvtxtStartEndRange 71."""
STEP_TEXT = r"(?i)^(ProfilerStep#\d+|(train[ _-]?)?(step|iteration|iter)[ #_:-]*\d+)$"
UNIT_SEPARATOR = "\x1f"


def _inline_text(report: Report, n: int, null: np.ndarray) -> pl.Series:
    """NVTX_EVENTS.text (registered strings are in textId instead; null where ``null``), in table order: one
    ``group_concat`` text split by polars, not a Python string per row (per row only when a text holds the
    separator, U+001F)."""
    if null.all():
        return pl.Series([], dtype=pl.String).extend_constant(None, n)
    query = f"SELECT group_concat(coalesce(CAST(text AS TEXT), ''), char(31)) FROM \"{NVTX}\""
    joined = report.con.execute(query).fetchone()[0] or ""
    parts = pl.Series([joined], dtype=pl.String).str.split(UNIT_SEPARATOR).explode()
    if parts.len() != n:
        parts = pl.Series(
            [r[0] for r in report.con.execute(f'SELECT CAST(text AS TEXT) FROM "{NVTX}"')], dtype=pl.String
        )
    return parts.set(pl.Series(null), None) if null.any() else parts


def _nvtx_columns(report: Report) -> dict[str, np.ndarray]:
    return report.ints(
        NVTX,
        {
            "start": "start",
            "end": "end",
            "type": "eventType",
            "gtid": "globalTid",
            "text_id": "textId",
            "domain": "domainId",
            "range": "rangeId",
            "category": "category",
            "no_text": '"text" IS NULL' if "text" in report.columns(NVTX) else None,
        },
    )


def _domains(c: dict[str, np.ndarray], pid: np.ndarray, is_domain: np.ndarray, text: pl.Series) -> pl.Series:
    """The domain name of each record (null: the default domain, or none recorded)."""
    dom = c["domain"]
    # domain ids are per process: the NvtxDomainCreate record of (process, id) names it
    names = pl.DataFrame({"pid": pid[is_domain], "id": dom[is_domain], "d": text.filter(pl.Series(is_domain))}).unique(
        ["pid", "id"], keep="last"
    )
    domain = (
        pl.DataFrame({"pid": pid, "id": dom})
        .join(names, on=["pid", "id"], how="left", maintain_order="left")
        .get_column("d")
    )
    return domain.set(pl.Series(c["domain_null"] | (dom == 0)), None)


def _kept(
    c: dict[str, np.ndarray], t: np.ndarray, is_domain: np.ndarray, dropped: Counter[str]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(mark, start/end range, kept) masks; open ranges and other records counted in ``dropped``."""
    mark = np.isin(t, NVTX_MARKS)
    pushpop, startend = np.isin(t, NVTX_PUSHPOPS), np.isin(t, NVTX_STARTENDS)
    ranges = pushpop | startend
    open_end = ranges & c["end_null"]
    if open_end.any():
        dropped["NVTX ranges without an end"] += int(open_end.sum())
    other = ~(mark | ranges | is_domain)
    if other.any():
        dropped["NVTX records that are not ranges or marks (categories, names)"] += int(other.sum())
    return mark, startend, (mark | ranges) & ~open_end


def _cats(text: pl.Series, domain: pl.Series) -> pl.Series:
    return (
        pl.DataFrame({"t": text.fill_null(""), "d": domain})
        .select(
            pl.when(pl.col("d") == "NCCL")
            .then(pl.lit("nccl"))
            .when(pl.col("t").str.contains(STEP_TEXT))
            .then(pl.lit("step"))
            .otherwise(pl.lit("user"))
        )
        .to_series()
    )


def _args(c: dict[str, np.ndarray], domain: pl.Series) -> pl.Series:
    return json_object(
        {
            "domain": json_strings(domain),
            "category": num(c["category"], c["category_null"]),
            "range id": num(c["range"], c["range_null"]),
        }
    )


def nvtx(report: Report, dropped: Counter[str]) -> pl.DataFrame:
    """Push/pop ranges on their thread, start/end ranges on an async track per (process, domain), marks as instants."""
    c = _nvtx_columns(report)
    inline = _inline_text(report, c["start"].size, (c["no_text"] != 0) | c["no_text_null"])
    text = inline.fill_null(report.text(c["text_id"], c["text_id_null"]))
    t = (
        c["type"] if not c["type_null"].all() else np.where(c["end_null"], NVTX_MARK, NVTX_PUSHPOP)
    )  # no eventType: by the end
    pid = pid_of(c["gtid"])
    is_domain = t == NVTX_DOMAIN
    domain = _domains(c, pid, is_domain, text)
    mark, startend, keep = _kept(c, t, is_domain, dropped)
    end = np.where(mark, c["start"], c["end"])
    kind = pl.select(
        pl.when(pl.lit(pl.Series(startend))).then(pl.lit("async")).otherwise(pl.lit("cpu_thread"))
    ).to_series()
    rows = frame(
        c["start"].size,
        base(
            c["start"].size,
            kind=kind,
            pid=pid,
            tid=np.where(startend, -1, tid_of(c["gtid"])),
            start_ns=c["start"],
            end_ns=end,
            name=text.fill_null(""),
            src_cat="nvtx",
            cat=_cats(text, domain),
            instant=mark,
            args=_args(c, domain),
            domain=domain,
        ),
    )
    return rows.filter(pl.Series(keep))
