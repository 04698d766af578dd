"""Training logs (filled in below)."""
from __future__ import annotations

import polars as pl

from di.convert.logs.build import Parts

SNIFF_RE = r"(?!)"


def parse_training(lines: pl.DataFrame) -> Parts:
    return Parts("training")
