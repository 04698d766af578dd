"""nvidia-smi ``--query-gpu`` CSV tables, and the cell readers every nvidia-smi table shares: the import path of
older code, re-exported from the package :mod:`di.convert.logs.smi`.

The tables are read by :mod:`di.convert.logs.smi.query_gpu` (headers: :mod:`di.convert.logs.smi.query_heads`,
samples: :mod:`di.convert.logs.smi.query_samples`, timestamps: :mod:`di.convert.logs.smi.timestamps`), the cells
by :mod:`di.convert.logs.smi.cells`; each name here is the one defined there.
"""

from __future__ import annotations

from di.convert.logs.smi.cells import CAST_FIRST_ROWS as CAST_FIRST_ROWS
from di.convert.logs.smi.cells import NA_CELL_RE as NA_CELL_RE
from di.convert.logs.smi.cells import NUM_RE, distinct_codes, read_numbers, read_once
from di.convert.logs.smi.cells import _ranked_ids as _ranked_ids
from di.convert.logs.smi.cells import _read_matched as _read_matched
from di.convert.logs.smi.query_gpu import SAMPLE_GAP_NS as SAMPLE_GAP_NS
from di.convert.logs.smi.query_gpu import _by_sample as _by_sample
from di.convert.logs.smi.query_gpu import _no_value as _no_value
from di.convert.logs.smi.query_gpu import _repeats as _repeats
from di.convert.logs.smi.query_gpu import parse_query_gpu
from di.convert.logs.smi.query_heads import FIELD as FIELD
from di.convert.logs.smi.query_heads import HEADER_RE, NOHEADER_RE, UNITS
from di.convert.logs.smi.query_heads import _csv_heads as _csv_heads
from di.convert.logs.smi.query_heads import _csv_tables as _csv_tables
from di.convert.logs.smi.query_samples import _csv_samples as _csv_samples
from di.convert.logs.smi.timestamps import PLAIN_TS_RE as PLAIN_TS_RE
from di.convert.logs.smi.timestamps import TS_RE as TS_RE
from di.convert.logs.smi.timestamps import _ts_once as _ts_once
from di.convert.logs.smi.timestamps import epoch_ns
from di.convert.logs.smi.timestamps import timestamps as timestamps

__all__ = [
    "HEADER_RE",
    "NOHEADER_RE",
    "NUM_RE",
    "UNITS",
    "distinct_codes",
    "epoch_ns",
    "parse_query_gpu",
    "read_numbers",
    "read_once",
]
