"""The values of di's own OTF2 attributes per event (di.convert.otf2.ownvalues), against a plain reading of the
record rows: every ATTRIBUTE row of an event whose ref is one of di's, the later of two on one event kept."""

from __future__ import annotations

import numpy as np
import pytest

from di.convert.otf2.ownvalues import own_values
from di.convert.otf2.recordrows import RecordRows
from di.convert.otf2.records import ATTRIBUTE, MPI_SEND
from di.convert.otf2.values import ref_ids


def _records(kind: np.ndarray, attribute: np.ndarray, types: np.ndarray, raw: np.ndarray, event: np.ndarray):
    m = kind.size
    zeros = np.zeros(m, np.int64)
    return RecordRows(
        kind=kind,
        ts_ns=zeros,
        a=attribute,
        b=types,
        c=raw,
        d=zeros,
        e=zeros,
        loc=zeros,
        rank=np.zeros(m, np.int32),
        event=event,
        row=np.arange(m),
        after=zeros,
        head=np.arange(m),
    )


def _expected(rec: RecordRows, code: np.ndarray, k: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    values, valid = np.zeros((k, n), np.int64), np.zeros((k, n), bool)
    for r in range(len(rec)):
        a, e = int(rec.attribute[r]), int(rec.event[r])
        if rec.kind[r] != ATTRIBUTE or e < 0 or not 0 <= a < code.size or code[a] < 0:
            continue
        values[code[a], e] = ref_ids(rec.attr_type[r : r + 1], rec.attr_value[r : r + 1])[0]
        valid[code[a], e] = True
    return values, valid


@pytest.mark.parametrize("seed", range(4))
def test_each_event_gets_the_value_of_its_last_attribute_of_each_ref(seed: int) -> None:
    rng = np.random.default_rng(seed)
    m, n = 3000, 400  # fewer events than rows: many events carry one attribute twice
    kind = np.where(rng.random(m) < 0.85, ATTRIBUTE, MPI_SEND).astype(np.int64)
    attribute = rng.integers(-2, 12, m)  # negative and beyond the code table too
    types = rng.integers(-3, 40, m)  # out-of-range types are clipped, as ref_ids clips them
    raw = rng.integers(-(2**62), 2**62, m)
    event = rng.integers(-1, n, m)
    code = np.full(9, -1, np.int64)
    code[[1, 4, 5, 8]] = np.arange(4)
    rec = _records(kind, attribute, types, raw, event)
    values, valid = own_values(rec, code, 4, n)
    want_values, want_valid = _expected(rec, code, 4, n)
    assert valid.any() and not valid.all()
    assert np.array_equal(valid, want_valid)
    assert np.array_equal(values[valid], want_values[want_valid])


def test_no_attribute_rows_leave_every_event_without_a_value() -> None:
    empty = np.zeros(0, np.int64)
    values, valid = own_values(_records(empty, empty, empty, empty, empty), np.zeros(3, np.int64), 2, 5)
    assert values.shape == (2, 5) and not valid.any()
