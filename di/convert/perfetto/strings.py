"""The strings the event kernel interns (:mod:`di.convert.perfetto.encode`): their table, and each event's by code.

An event's name and ``src_cat`` are read as the column's codes (polars' physical Categorical codes, in place) and a
table from code to row of ``strings``: no column of n is made (the codes numbered densely per row, then shifted to
rows, were two passes and 19 MB of fresh memory on 1.2 M events).
"""

from __future__ import annotations

import numpy as np
import polars as pl

from di.convert.columns import code_index, readonly, utf8_buffers
from di.convert.perfetto import encode
from di.trace import CATS


def string_table(name_values: pl.Series, src_values: pl.Series) -> tuple[np.ndarray, np.ndarray]:
    """The kernel's ``strings`` rows and their UTF-8 bytes: the annotation names, the categories (canonical,
    then the distinct ``src_cat`` values), then the event names."""
    groups = (
        (pl.Series(encode.ANNOTATION_NAMES, dtype=pl.String), encode.T_I_ANN),
        (pl.concat([pl.Series(CATS, dtype=pl.String), src_values]), encode.T_I_CATS),
        (name_values, encode.T_I_NAMES),
    )
    string_bytes, off = utf8_buffers(pl.concat([texts for texts, _ in groups]))
    strings = np.empty((len(encode.STRING_ROWS), len(off)), dtype=np.int64)
    strings[encode.STR_OFF] = off
    strings[encode.STR_IID, :-1] = np.concatenate([np.arange(1, len(texts) + 1) for texts, _ in groups])
    strings[encode.STR_FIELD, :-1] = np.repeat([field for _, field in groups], [len(texts) for texts, _ in groups])
    strings[encode.STR_SEEN] = -1
    return strings, readonly(string_bytes)


def event_strings(ev: pl.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``strings``, ``string_bytes``, per event the codes of its name and of its ``src_cat``, and ``code_row``: the
    row of ``strings`` of each code, a name's in row ``CODE_NAME``, a ``src_cat``'s in row ``CODE_SRC`` (-1: null),
    as :func:`~di.convert.perfetto.encode.encode_events` takes them."""
    name_of, name_index, name_values = code_index(ev.get_column("name"))
    src_of, src_index, src_values = code_index(ev.get_column("src_cat"))
    strings, string_bytes = string_table(name_values, src_values)
    first_src = encode.FIRST_CAT + len(CATS)
    code_row = np.full((2, max(len(name_index), len(src_index))), -1, dtype=np.int64)
    code_row[encode.CODE_NAME, : len(name_index)] = name_index + (first_src + len(src_values))  # null: the row before
    code_row[encode.CODE_SRC, : len(src_index)] = np.where(src_index >= 0, src_index + first_src, -1)
    return strings, string_bytes, name_of, src_of, readonly(code_row)
