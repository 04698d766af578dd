"""Instants of a training log: fp16 OVERFLOW skips (``overflow skip``) and a failed run's errors, each named after the
error (a Python exception's class, ``CUDA out of memory``, ``slurmstepd: error``, a launcher's child failure), cat
``other``, with the line in args (:func:`~di.convert.logs.build.line_instants`).
"""

from __future__ import annotations

import polars as pl

from di.convert.logs.build import line_instants
from di.convert.logs.training.patterns import ERROR_LITERALS, ERROR_RE


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
