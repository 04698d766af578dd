"""The OTF2 connector's numba kernels agree with their pure-Python references on random input."""

from __future__ import annotations

from typing import Any
import json
from pathlib import Path

import numpy as np
import pytest

import oracles

from di.convert.otf2 import records as R
from di.convert.otf2 import timeline as T
from di.convert.otf2.rowids import key_ids

KINDS = [
    R.ENTER,
    R.ENTER,
    R.LEAVE,
    R.LEAVE,
    R.MPI_SEND,
    R.MPI_RECV,
    R.COLL_END,
    R.RMA_PUT,
    R.RMA_GET,
    R.RMA_COMPLETE,
    R.RMA_COMPLETE,
    R.ATTRIBUTE,
    R.METRIC,
    R.METRIC_VALUE,
    R.THREAD_FORK,
    R.LOCK_ACQUIRE,
    R.IO_BEGIN,
    R.IO_BEGIN,
    R.IO_COMPLETE,
    R.IO_COMPLETE,
    R.IO_CANCELLED,
    R.IO_SEEK,
]


def random_records(rng: np.random.Generator, n: int, n_locs: int) -> tuple[np.ndarray, np.ndarray]:
    loc = np.sort(rng.integers(0, n_locs, n))
    rows = np.zeros((n, R.WIDTH), np.int64)
    rows[:, 0] = rng.choice(KINDS, n)
    rows[:, 1] = np.cumsum(rng.integers(0, 3, n))  # time order, ties included
    rows[:, 2] = rng.integers(0, 3, n)  # region / window
    rows[:, 3] = rng.integers(0, 4, n)
    rows[:, 4] = rng.integers(0, 100, n)
    rows[:, 5] = rng.integers(0, 2, n)  # RMA matching ids, I/O bytes
    rows[:, 6] = rng.integers(0, 2, n)  # I/O matching ids
    return rows, loc


@pytest.mark.parametrize("seed", range(20))
def test_timeline_build_matches_reference(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n_locs = int(rng.integers(1, 5))
    rows, loc = random_records(rng, int(rng.integers(0, 300)), n_locs)
    bounds = np.searchsorted(loc, np.arange(n_locs + 1)).astype(np.int64)
    fold_ref = int(rng.integers(-1, 3))  # attribute ref that folds I/O operation records (-1: none)
    fast = T.build(rows, bounds, fold_ref)
    slow = oracles.build_reference(rows, bounds, fold_ref)
    assert len(fast) == len(slow)
    for f, s in zip(fast, slow):
        np.testing.assert_array_equal(np.asarray(f, dtype=np.int64), s)


@pytest.mark.parametrize("seed", range(10))
def test_first_use_ids_match_numpy_unique(seed: int) -> None:
    rng = np.random.default_rng(seed)
    key = rng.integers(0, int(rng.integers(1, 50)), int(rng.integers(0, 2000))).astype(np.int64)
    ids, first = key_ids(key)
    assert (key[first][ids] == key).all()
    assert len(first) == len(np.unique(key))
    assert (np.diff(first) > 0).all()  # numbered in order of first use


def test_key_ids_of_a_wide_key_span_take_the_hash_table() -> None:
    key = np.random.default_rng(7).integers(0, 40, 3000).astype(np.int64) << 40  # span far above the rows
    ids, first = key_ids(key)
    assert (key[first][ids] == key).all()
    assert len(first) == len(np.unique(key))
    assert (np.diff(first) > 0).all()


@pytest.mark.parametrize("seed", range(5))
def test_combined_ids_number_code_tuples_in_order_of_first_use(seed: int) -> None:
    from di.convert.otf2.rowids import combined_ids

    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 500))
    cols = [rng.integers(0, int(rng.integers(1, 30)), n).astype(np.int64) for _ in range(3)] + [rng.random(n) < 0.5]
    seen: dict[tuple[int, ...], int] = {}
    want = np.array(
        [seen.setdefault(t, len(seen)) for t in map(tuple, np.column_stack(cols).astype(np.int64).tolist())]
    )
    ids, first = combined_ids(*cols)
    np.testing.assert_array_equal(ids, want)
    np.testing.assert_array_equal(ids[first], np.arange(len(seen)))
    wide = [cols[0] << 40, *cols[1:]]  # a key span far above the rows: numbered by the hash table
    ids, first = combined_ids(*wide)
    np.testing.assert_array_equal(ids, want)


@pytest.mark.parametrize("seed", range(10))
def test_instant_members_match_python_formatting(seed: int) -> None:
    from di.convert.otf2.argtext import INSTANT_FIELDS, instant_members

    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 60))
    kinds = rng.choice(sorted(INSTANT_FIELDS), n)
    a, b, c = (rng.integers(-(2**62), 2**62, n) * (rng.random(n) < 0.7) for _ in range(3))  # zeros and negatives too
    data, offsets = instant_members(kinds, a, b, c)
    got = [bytes(data[offsets[i] : offsets[i + 1]]).decode() for i in range(n)]
    want = [
        "{" + ",".join(f'"{f}":{v}' for f, v in zip(INSTANT_FIELDS[int(k)], (int(a[i]), int(b[i]), int(c[i])))) + "}"
        for i, k in enumerate(kinds)
    ]
    assert got == want


@pytest.mark.parametrize("seed", range(10))
def test_join_members_matches_python_grouping(seed: int) -> None:
    import polars as pl

    from di.convert.columns import utf8_buffers
    from di.convert.otf2.argtext import join_members

    rng = np.random.default_rng(seed)
    n_events = int(rng.integers(1, 40))
    parts, want = [], [[] for _ in range(n_events)]
    for p in range(int(rng.integers(0, 4))):
        event = rng.integers(0, n_events, int(rng.integers(0, 30)))
        texts = [f'"k{p}":"{"é" * int(i % 3)}{i}"' for i in range(event.size)]
        objects = ["{" + t + "}" for t in texts]
        column = (
            pl.Series(["unused", *objects], dtype=pl.String)[1:] if p % 2 else pl.Series(objects, dtype=pl.String)
        )  # sliced too
        parts.append((event, *utf8_buffers(column)))
        for e, t in zip(event.tolist(), texts):
            want[e].append(t)
    expected = [("{" + ",".join(w) + "}") if w else None for w in want]
    assert join_members(n_events, parts).to_list() == expected
    assert (
        join_members(n_events, parts, limit=int(rng.integers(20, 60))).to_list() == expected
    )  # several Arrow data buffers
    assert (
        join_members(n_events + 5000, parts).to_list() == expected + [None] * 5000
    )  # sparse members: sorted, not counted


@pytest.mark.parametrize("seed", range(5))
def test_text_int_members_matches_python(seed: int) -> None:
    from di.convert.otf2.argtext import text_int_members

    rng = np.random.default_rng(seed)
    texts = ['"w\\u00e9"', '"MPI_COMM_WORLD"', "7"][: int(rng.integers(1, 4))]
    n = int(rng.integers(0, 50))
    idx = rng.integers(0, len(texts), n)
    ints = rng.integers(-(2**63), 2**63 - 1, n, dtype=np.int64)
    data, offsets = text_int_members('"window":', texts, idx, ',"remote":', ints)
    got = [bytes(data[offsets[i] : offsets[i + 1]]).decode() for i in range(n)]
    assert got == ['{"window":' + texts[k] + ',"remote":' + str(v) + "}" for k, v in zip(idx.tolist(), ints.tolist())]


@pytest.mark.parametrize("seed", range(5))
def test_run_starts_match_numpy(seed: int) -> None:
    from di.convert.columns import run_starts

    rng = np.random.default_rng(seed)
    key = np.sort(rng.integers(0, int(rng.integers(1, 20)), int(rng.integers(0, 300)))).astype(np.int64)
    want = np.flatnonzero(np.r_[True, key[1:] != key[:-1]]) if key.size else np.zeros(0, np.int64)
    np.testing.assert_array_equal(run_starts(key), want)


def test_as_float_reads_integers_whose_low_bytes_look_like_signalling_nans_without_warning() -> None:
    import warnings

    from di.convert.otf2.values import TYPE_FLOAT, TYPE_UINT64, as_float

    raw = np.array([0x7F800001, 0x3F800000], np.int64)  # a float32 sNaN pattern as a UINT64 value; 1.0f as a FLOAT
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = as_float(np.array([TYPE_UINT64, TYPE_FLOAT]), raw)
    assert got.tolist() == [float(0x7F800001), 1.0]


def _file_args_texts(path: Path) -> Any:
    """The args of a real trace's events as the file writes them (each distinct, by Kineto's per-event ids, which
    ``di.load`` lifts into columns of their own), null where an event has none."""
    import polars as pl
    from test_chrome_reader import doc_events

    _, events = doc_events(path)
    return pl.Series(
        [json.dumps(e["args"], default=str) if "args" in e else None for e in events if isinstance(e, dict)],
        dtype=pl.String,
    )


@pytest.mark.parametrize("repeats", [1, 3])
def test_string_table_refs_give_back_each_text_whether_or_not_the_column_is_searched_for_repeats(repeats: int) -> None:
    """A real Kineto trace's args (45 k texts, all distinct): the writer's string table gives every row a ref of its
    own without hashing; the same column three times over (a third distinct) is numbered by hash and repeats share a
    ref. Either way the text of each row's ref is the row's text and nulls have none."""
    import polars as pl
    from conftest import kineto_file

    from di.convert.columns import utf8_buffers
    from di.convert.otf2 import emit
    from di.convert.otf2.layout import Strings, mostly_distinct

    args = _file_args_texts(kineto_file("hta_ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"))
    column = pl.concat([args] * repeats + [pl.Series([None, "é" * 9], dtype=pl.String)])
    data, offsets = utf8_buffers(column)
    assert mostly_distinct(column, column.is_not_null().to_numpy()) == (repeats == 1)
    table = Strings()
    table.ref("x")
    refs = table.add_many(column)
    texts = [
        bytes(d[lo[r] : hi[r]]).decode() for d, lo, hi, rows in table.chunks() for r in rows
    ]  # every string in ref order
    got = [None if ref == emit.NO_VALUE else texts[ref] for ref in refs.tolist()]
    assert got == column.to_list()
    distinct_refs = np.unique(refs[refs != emit.NO_VALUE]).size
    assert distinct_refs == (column.drop_nulls().len() if repeats == 1 else column.drop_nulls().n_unique())


def test_text_spans_read_each_rows_text_in_place() -> None:
    """Each row's span is its text, an empty one for a null, and it lies in the column's own memory: a long text in
    its chunk's data buffer, a short one in its view, over a column of two chunks (as a store's row groups load): no text is copied."""
    import polars as pl
    from conftest import kineto_file

    from di.convert.columns import text_spans

    args = _file_args_texts(kineto_file("hta_ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"))
    short = pl.Series(["", None, "a", "é" * 9, "x" * 13], dtype=pl.String)
    both = pl.concat([args.head(100), short], rechunk=False)
    merged = pl.concat([args.head(100), short], rechunk=True)  # one chunk, two data buffers and held texts
    assert len(merged.to_arrow(compat_level=pl.CompatLevel.newest()).buffers()) == 4
    full = pl.concat([args.drop_nulls().head(50), pl.Series(["a", "x" * 13])], rechunk=False)  # no empty text
    for column in (args, short, both, merged, full):
        data, starts, ends = text_spans(column)
        assert not data.flags.writeable
        got = [None if t is None else bytes(data[a:b]).decode() for t, a, b in zip(column, starts, ends)]
        assert got == column.to_list()
        assert all(a == b for t, a, b in zip(column, starts, ends) if t is None)
    data, starts, _ = text_spans(both)
    held = both.to_arrow(compat_level=pl.CompatLevel.newest()).buffers()[2:]  # polars shares its text buffers
    assert any(b.address <= data.ctypes.data + starts[0] < b.address + b.size for b in held)
    empty = text_spans(pl.Series([None, ""], dtype=pl.String))
    assert empty[0].size == 0 and (empty[1] == 0).all() and (empty[2] == 0).all()


def test_attachment_table_passes_each_otf2_function_its_own_parameters() -> None:
    """emit writes every attachment record through one call of eight integers (writer, attribute list, time, five
    columns): each type's row must name the function's parameters after the first three, in order, and only
    zeros past them (the names are those of the otf2 package's wrappers of the same C functions)."""
    import inspect

    import _otf2

    from di.convert.otf2 import emit

    column_of = {
        "receiver": emit.COL_PEER,
        "sender": emit.COL_PEER,
        "communicator": emit.COL_COMM,
        "msgTag": emit.COL_TAG,
        "msgLength": emit.COL_BYTES,
        "requestID": emit.COL_REQUEST,
        "collectiveOp": emit.COL_OP,
        "root": emit.COL_ROOT,
        "sizeSent": emit.COL_SENT,
        "sizeReceived": emit.COL_RECEIVED,
        "handle": emit.COL_HANDLE,
        "mode": emit.COL_MODE,
        "operationFlags": emit.COL_FLAGS,
        "bytesRequest": emit.COL_BYTES,
        "bytesResult": emit.COL_BYTES,
        "matchingId": emit.COL_MATCHING,
    }
    kinds = [k for k in range(emit.ATT_CALLS.shape[0]) if k >= emit.ATT_SEND]
    assert len(kinds) == 11
    for kind in kinds:
        fn, *cols = emit.ATT_CALLS[kind].tolist()
        wrapper = getattr(_otf2, emit.FN_NAMES[fn].removeprefix("OTF2_"))
        params = list(inspect.signature(wrapper).parameters)
        assert params[:3] == ["writer", "attributeList", "time"], params
        want = [column_of[p] for p in params[3:]]
        assert cols == want + [-1] * (len(cols) - len(want)), (emit.FN_NAMES[fn], cols, want)


@pytest.mark.parametrize("seed", [0, 1])
def test_flow_lists_match_python_formatting_and_fit_their_buffer(seed: int) -> None:
    """The ``di.flows_in`` texts against Python's formatting, at the sizes that fill the kernel's unchecked buffer:
    lists of one flow, int64 extremes, null ids (the longest fixed pieces), long kinds and category texts."""
    import json

    from di.convert.otf2.flowtext import flow_lists

    rng = np.random.default_rng(seed)
    n = 500
    kinds = ["launch", "k" * 40]
    cats = ["null", json.dumps("c" * 70 + '"\\')]
    extremes = np.array([np.iinfo(np.int64).min, np.iinfo(np.int64).max, 0, -1], np.int64)
    loc, ordinal, ids = (extremes[rng.integers(0, 4, n)] for _ in range(3))
    kind, cat = rng.integers(0, 2, n), rng.integers(0, 2, n)
    has_id = rng.random(n) < 0.5
    order = rng.permutation(n).astype(np.int64)
    last = rng.random(n) < (0.9 if seed else 1.0)
    last[-1] = True
    first = np.r_[True, last[:-1]]
    data, offsets = flow_lists(order, first, last, loc, ordinal, kind, kinds, ids, has_id, cat, cats)
    want, item = [], []
    for j, f in enumerate(order):
        i = int(ids[f]) if has_id[f] else "null"
        item.append(f'{{"l":{loc[f]},"k":{ordinal[f]},"t":"{kinds[kind[f]]}","i":{i},"c":{cats[cat[f]]}}}')
        if last[j]:
            want.append("[" + ",".join(item) + "]")
            item = []
    got = [bytes(data[a:b]).decode() for a, b in zip(offsets[:-1], offsets[1:])]
    assert got == want
    assert [json.loads(t)[0]["c"] for t in got[:3]] == [json.loads(w)[0]["c"] for w in want[:3]]


def test_flow_lists_read_back_as_json_reads_them_and_other_texts_are_left_to_json() -> None:
    """``read_flow_lists`` gives the items JSON gives for texts of the writer's form (ids and categories null or not,
    negative and 12-digit integers, an escaped quote, UTF-8) and flags every other text for the JSON reader: null,
    truncated, a leading zero, another key order, a trailing space, an integer too long, an empty list."""
    import polars as pl

    from di.convert.otf2.flowtext import read_flow_lists

    regular = [
        '[{"l":3,"k":17,"t":"launch","i":null,"c":"cuda_api"}]',
        '[{"l":0,"k":-5,"t":"user","i":123456789012,"c":null},{"l":1,"k":2,"t":"launch","i":-7,"c":"a\\"b"}]',
        '[{"l":3,"k":1,"t":"é","i":5,"c":"\\u00e9"}]',
    ]
    other = [
        None,
        '[{"l":3,"k":17,"t":"launch","i":null,"c":"cuda_api"}',
        '[{"l":3,"k":017,"t":"launch","i":null,"c":"x"}]',
        '[{"k":1,"l":3,"t":"launch","i":null,"c":"x"}]',
        '[{"l":3,"k":1,"t":"launch","i":null,"c":"x"}] ',
        '[{"l":99999999999999999999,"k":1,"t":"launch","i":null,"c":"x"}]',
        "[]",
    ]
    texts = pl.Series([*regular[:1], *other, *regular[1:]], dtype=pl.String)
    frame, rest = read_flow_lists(texts)
    assert rest.tolist() == list(range(1, 1 + len(other)))
    item = pl.Struct({"l": pl.Int64, "k": pl.Int64, "t": pl.String, "i": pl.Int64, "c": pl.String})
    read = [i for i in range(texts.len()) if i not in set(rest.tolist())]
    expected = (
        pl.DataFrame({"text": read, "j": texts.gather(read).str.json_decode(pl.List(item))}).explode("j").unnest("j")
    )
    assert frame.equals(expected.with_columns(pl.col("text").cast(pl.Int64)))
    assert frame.height == 4 and frame["c"].to_list() == ["cuda_api", None, 'a"b', "é"]
