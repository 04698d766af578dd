"""The job's string table at ingest: every process's string ids -> one set of global ids.

Global id 0 is "no string"; the others number the distinct texts of the job in the order
they are first met. :class:`StringTable` maps a process's ids with one lookup array per
process (one Python step per distinct string, never per record).
"""

from __future__ import annotations

import numpy as np
import polars as pl

from di.capture import shard


class StringTable:
    """The job's strings (file names, member lists): per-process string ids -> global ids."""

    def __init__(self) -> None:
        self.text: list[str] = [""]
        self._index: dict[str, int] = {"": 0}

    def global_ids(self, p: shard.ProcessShard, ids: np.ndarray) -> np.ndarray:
        """Map one process's string ids (0 = none) to global ids (0 = none), vectorized."""
        top = max(p.strings, default=0)
        lut = np.zeros(top + 2, np.int64)
        for sid, text in p.strings.items():  # one per distinct string, not per record
            lut[sid] = self._index.setdefault(text, len(self.text))
            if lut[sid] == len(self.text):
                self.text.append(text)
        return lut[np.where((ids > 0) & (ids <= top), ids, top + 1)]

    def column(self, ids: np.ndarray, name: str) -> pl.Series:
        """A String column of the texts (null for id 0)."""
        lut = pl.Series(name, [None, *self.text[1:]], dtype=pl.String)
        return lut.gather(ids)
