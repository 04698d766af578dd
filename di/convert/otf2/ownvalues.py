"""The values of the attributes di's writer puts on Enter records (:data:`di.convert.otf2.events.OWN_ATTRIBUTES`),
as one int64 row per attribute over the events, in one numba pass over the record rows.

A real-shaped archive has 4.2 M such attribute rows among 4.5 M: grouping them by attribute and gathering their
fields with numpy (a sort, four gathers, a scatter per column) took 0.44 CPU-s; the pass reads each row once and
writes its value straight into its event's slot.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from di.convert.otf2.recordrows import RecordRows
from di.convert.otf2.records import ATTRIBUTE
from di.convert.otf2.values import REF_MASKS
from di.jitpipeline import ScalarKernelCompiler

_ATTRIBUTE = np.int64(ATTRIBUTE)
_LAST_TYPE = np.int64(REF_MASKS.size - 1)
_NO_TYPE = np.int64(0)


@njit(cache=True, _nrt=False, no_cfunc_wrapper=True, pipeline_class=ScalarKernelCompiler)
def _fill(kind, attribute, types, raw, event, code, masks, values, valid, n):
    """For each ATTRIBUTE row of an event whose attribute ref has a ``code`` (>= 0): ``values[code * n + event]``
    = its value as a reference (the bytes beyond its type's width cleared, :func:`di.convert.otf2.values.ref_ids`)
    and ``valid`` there True; rows in record order, so the later of two on one event stays. (Flat arrays: a
    (k, n) one compiled in 0.17 CPU-s instead of 0.12.)"""
    top = code.size
    for r in range(kind.size):
        e = event[r]
        a = attribute[r]
        if kind[r] == _ATTRIBUTE and e >= 0 and a >= 0 and a < top:
            j = code[a]
            if j >= 0:
                t = types[r]
                t = _NO_TYPE if t < _NO_TYPE else (_LAST_TYPE if t > _LAST_TYPE else t)
                at = j * n + e
                values[at] = raw[r] & masks[t]
                valid[at] = True


def own_values(rec: RecordRows, code: np.ndarray, k: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(values, valid): (k, n) int64 and bool, row ``code[attribute ref]`` of each attribute di's writer adds, over
    the ``n`` events; a value is defined only where ``valid``. ``code``: int64 per attribute ref, -1 for the others."""
    values = np.empty((k, n), np.int64)
    valid = np.zeros((k, n), np.bool_)
    columns = (rec.kind, rec.attribute, rec.attr_type, rec.attr_value, rec.event)
    _fill(
        *(np.ascontiguousarray(c, np.int64) for c in columns),
        code,
        REF_MASKS,
        values.reshape(-1),
        valid.reshape(-1),
        np.int64(n),
    )
    return values, valid
