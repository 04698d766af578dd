"""``NCCL WARN`` lines and NCCL errors (error codes, watchdog timeouts, IB completion errors) as instant events."""

from __future__ import annotations

import polars as pl

from di.convert.logs.nccl.heads import _with_heads
from di.convert.logs.nccl.messages import _gathered

ERROR_RE = (
    r"(?i)NCCL error|nccl(?:System|Internal|Remote|InvalidUsage|Unhandled\w*)Error|Watchdog caught collective operation timeout"
    r"|IBV_WC_\w+ ERR|ibv_\w+ failed|Call to ibv_\w+ failed|NCCL communicator was aborted"
)


def _instants(p: pl.DataFrame, msgs: pl.Series, heads: pl.DataFrame) -> pl.DataFrame:
    """``NCCL WARN`` lines and errors as instant events (``heads`` with their ``rank``)."""
    warned = heads.get_column("level") == "WARN"  # per head (row hid), and per distinct message: one search each
    errors = msgs.str.contains(ERROR_RE)
    # the few rows gathered (a filter of the frame copies every column of every line)
    warn = p[(_gathered(warned, p.get_column("hid")) | _gathered(errors, p.get_column("mid"))).arg_true()]
    warn = _with_heads(warn, heads, "rank")
    return warn.with_columns(
        pl.when(pl.col("level") == "WARN").then(pl.lit("NCCL WARN")).otherwise(pl.lit("NCCL error")).alias("name"),
        pl.lit("nccl").alias("cat"),
        pl.lit(True).alias("instant"),
        pl.struct("msg", "dev", "tid", "line").struct.json_encode().alias("args"),
    )
