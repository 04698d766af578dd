"""The ``di.flows_in`` attribute of the OTF2 writer: per destination event, the string ref of its flow list.

A destination's text is the JSON list of the flows that end at it, written in
numba (:func:`flowtext.flow_lists`); a flow's source is named by its output
location and Enter ordinal there (its position in that location's emission
order), which survive lanes. The texts go to the string table where they were written (:meth:`Strings.add_texts`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import polars as pl

from di.convert.jsonstrings import json_strings
from di.convert.otf2 import emit
from di.convert.otf2.flowtext import flow_lists
from di.convert.otf2.rowids import key_ids
from di.convert.otf2.stringtable import Strings
from di.trace import Trace

__all__ = ["plan_flows_in"]


def plan_flows_in(
    trace: Trace, out_of: Callable[[np.ndarray], np.ndarray], order: np.ndarray, bounds: np.ndarray, strings: Strings
) -> np.ndarray:
    """String ref of the ``di.flows_in`` text of every event row (NO_VALUE where no flow ends), empty without flows.

    A flow's source is named by its output location and Enter ordinal there
    (its position in that location's emission order), which survive lanes.
    """
    fl = trace.flows
    if not fl.height:
        return np.zeros(0, np.int64)
    n = trace.events.height
    src = fl["src"].to_numpy()
    src_loc = out_of(src)
    dst_id, first = key_ids(np.array(fl["dst"].to_numpy()), n)  # writable, as the other callers' keys: one signature
    by_dst = np.zeros(0, np.int64) if first.size == fl.height else np.argsort(dst_id, kind="stable")
    cat = fl["src_cat"].unique()  # JSON of each distinct src_cat, as polars writes it ("null" for null)
    cat_json = json_strings(cat)
    cat_code = fl["src_cat"].replace_strict(cat, pl.Series(np.arange(cat.len(), dtype=np.int64)), return_dtype=pl.Int64)
    starts, ends = _destination_runs(dst_id, by_dst, fl.height)
    kinds = fl["kind"]
    data, offsets = flow_lists(
        by_dst if by_dst.size else np.arange(fl.height, dtype=np.int64),
        starts,
        ends,
        src_loc,
        _emission_positions(order, n, src) - bounds[src_loc],
        kinds.to_physical().to_numpy(),
        list(kinds.dtype.categories),
        fl["id"].fill_null(0).to_numpy(),
        fl["id"].is_not_null().to_numpy(),
        cat_code.to_numpy(),
        cat_json.to_list(),
    )
    refs = strings.add_texts(data, offsets)
    dst = fl["dst"].to_numpy()[first]
    out = np.full(n, emit.NO_VALUE, np.int64)
    out[dst] = refs
    return out


def _emission_positions(order: np.ndarray, n: int, rows: np.ndarray) -> np.ndarray:
    """Position in the emission order of each of the event ``rows`` (``order`` empty: the rows' own order)."""
    if not order.size:
        return rows
    emitted = np.empty(n, np.int32 if n < 1 << 31 else np.int64)
    emitted[order] = np.arange(n, dtype=emitted.dtype)
    return emitted[rows].astype(np.int64)


def _destination_runs(dst_id: np.ndarray, by_dst: np.ndarray, n_flows: int) -> tuple[np.ndarray, np.ndarray]:
    """Where each destination's run of flows starts and ends in the ``by_dst`` order (empty: one flow each)."""
    if by_dst.size:  # the flows of one destination back to back, destinations in order of first flow
        run = dst_id[by_dst]
        starts = np.r_[True, run[1:] != run[:-1]]
        ends = np.r_[run[1:] != run[:-1], True]
    else:
        starts = ends = np.ones(n_flows, bool)
    return starts, ends
