"""The C (counter) lines of the Chrome writer: one per finite sample, in samples row order.

``{"ph":"C","pid":..,"name":"power [W]","ts":..,"args":{"power":310.5}}``: a
series is drawn in the process of its location, named ``name [unit]`` (``#series``
appended where two series of one process would share a name). Non-finite values
have no JSON form: they are skipped and counted. Per series (few) Python builds
the line heads; per sample only numpy / polars.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from di.convert.chrome.fragments import Block, Pool, json_text
from di.convert.chrome.lines import CONST, FRAG, TEXT, TIME
from di.convert.chrome.tracks import TrackLayout, locate
from di.trace import Trace

__all__ = ["counter_block"]


def counter_block(trace: Trace, layout: TrackLayout, pool: Pool, t0: int) -> tuple[Block, list[dict[str, Any]], int]:
    """C lines of every finite sample; the series table for diTrace; the number of non-finite samples skipped."""
    series = trace.series.sort("series")
    ids = series.get_column("series").to_numpy().astype(np.int64)
    pids = layout.row_pid[locate(layout.loc_row, series.get_column("loc").to_numpy().astype(np.int64), "series")]
    info, heads, tails, taken = [], [], [], set()
    for row, pid in zip(series.select("series", "loc", "name", "unit").iter_rows(named=True), pids.tolist()):
        counter = f"{row['name']} [{row['unit']}]" if row["unit"] else row["name"]
        if (pid, counter) in taken:
            counter = f"{counter} #{row['series']}"
        taken.add((pid, counter))
        info.append({**row, "pid": pid, "counter": counter, "key": row["name"]})
        heads.append(f'{{"ph":"C","pid":{pid},"name":{json_text(counter)},"ts":')
        tails.append(f',"args":{{{json_text(row["name"])}:')
    lut = np.full(int(ids.max()) + 1 if len(ids) else 0, -1, dtype=np.int64)
    lut[ids] = np.arange(len(ids))
    samples = trace.samples
    srow = locate(lut, samples.get_column("series").to_numpy().astype(np.int64), "samples")
    finite = np.isfinite(samples.get_column("value").to_numpy())
    keep = np.flatnonzero(finite)
    frag = np.stack([pool.add(heads) + srow[keep], pool.add(tails) + srow[keep]]).astype(np.int32)
    times = (samples.get_column("ts_ns").to_numpy()[keep] - t0)[None, :]
    text = samples.get_column("value").filter(pl.Series(finite)).cast(pl.String)
    ops = [(FRAG, 0), (TIME, 0), (FRAG, 1), (TEXT, 0), (CONST, pool.add(["}}"]))]
    return Block(len(keep), ops, frag, times, np.zeros((0, len(keep)), np.int64), text), info, len(finite) - len(keep)
