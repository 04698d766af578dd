"""nvidia-smi output (filled in below)."""
from __future__ import annotations

import polars as pl

from di.convert.logs.build import Parts


def sniff_smi(lines: list[str]) -> bool:
    return False


def parse_smi(lines: pl.DataFrame) -> Parts:
    return Parts("nvidia_smi")
