"""Kineto's per-event ids as columns: the Chrome reader lifts ``correlation``, ``bytes`` and the ids of
:func:`di.schema.args_keys` (``External id``, ``Sequence number``, ...) out of each event's args text into
their columns, the writer puts them back first; on real traces each id read agrees with Python's ``json``
reading of the file and the texts left repeat."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

import di
from di.schema import args_keys, optional_schema
from conftest import is_execution_trace, kineto_files, kineto_id, write_json
from test_chrome_reader import doc_events

IDS = {key: col for col, key in args_keys()}
"""args key -> column."""


def _x(name: str, ts: int, args: dict[str, Any] | None, cat: str = "cpu_op", tid: int = 1) -> dict[str, Any]:
    ev = {"ph": "X", "name": name, "cat": cat, "pid": 1, "tid": tid, "ts": ts, "dur": 5}
    if args is not None:
        ev["args"] = args
    return ev


def _load(tmp_path: Path, events: list[dict[str, Any]], name: str = "t.json") -> di.Trace:
    return di.load(write_json(tmp_path, name, {"traceEvents": events}))


def test_ids_become_columns_and_the_texts_repeat(tmp_path: Path) -> None:
    events = []
    for k in range(50):
        events.append(
            _x(
                "aten::mm",
                10 * k,
                {
                    "External id": k,
                    "Sequence number": 3 * k,
                    "Input Dims": [[2, 3]],
                    "Ev Idx": 2 * k,
                    "Record function id": 0,
                },
            )  # fmt: skip
        )
        events.append(_x("cudaLaunchKernel", 10 * k + 1, {"External id": k, "cbid": 211, "correlation": 1000 + k}))
        events.append(
            _x(
                "nn.Module: L",
                10 * k,
                {"Python id": k + 1, "Python parent id": k, "Python thread": 0},
                "python_function",
                2,
            )
        )
    ev = _load(tmp_path, events).events.sort("start_ns", "name")
    mm = ev.filter(pl.col("name") == "aten::mm")
    assert mm.get_column("ext_id").to_list() == list(range(50))
    assert mm.get_column("seq").to_list() == [3 * k for k in range(50)]
    assert mm.get_column("ev_idx").to_list() == [2 * k for k in range(50)]
    assert mm.get_column("rf_id").to_list() == [0] * 50
    assert mm.get_column("args").unique().to_list() == ['{"Input Dims":[[2,3]]}']
    api = ev.filter(pl.col("name") == "cudaLaunchKernel")
    assert api.get_column("corr").to_list() == [1000 + k for k in range(50)]
    assert api.get_column("args").unique().to_list() == ['{"cbid":211}']
    py = ev.filter(pl.col("name") == "nn.Module: L")
    assert py.get_column("py_id").to_list() == [k + 1 for k in range(50)]
    assert py.get_column("py_parent").to_list() == list(range(50))
    assert py.get_column("ext_id").null_count() == 50  # the column is the trace's; these rows have none
    assert ev.get_column("args").n_unique() == 3  # 150 texts distinct in the file, 3 read


def test_a_trace_without_ids_has_no_id_columns(tmp_path: Path) -> None:
    ev = _load(tmp_path, [_x("a", 0, {"x": 1}), _x("b", 10, None)]).events
    assert not set(optional_schema("events")) & set(ev.columns)  # no all-null columns of 8 bytes a row


def test_members_that_cannot_be_lifted_stay_in_the_text(tmp_path: Path) -> None:
    ev = _load(
        tmp_path,
        [
            _x("big", 0, {"External id": 2**64, "y": 1}),  # beyond int64
            _x("str", 10, {"External id": "7"}),  # not a number
            _x("all", 20, {"External id": 5, "correlation": 6}),  # every member lifted: an empty object
            _x("last", 30, {"a": [1, {"b": 2}], "Ev Idx": 9}),  # the comma before a lifted last member goes
            _x("nested", 40, {"a": {"External id": 8}}),  # only top-level members are the event's
        ],
    ).events.sort("start_ns")
    assert [json.loads(t) for t in ev.get_column("args")] == [
        {"External id": 2**64, "y": 1},
        {"External id": "7"},
        {},
        {"a": [1, {"b": 2}]},
        {"a": {"External id": 8}},
    ]
    assert ev.get_column("ext_id").to_list() == [None, None, 5, None, None]
    assert ev.get_column("ev_idx").to_list() == [None, None, None, 9, None]
    assert ev.get_column("corr").to_list() == [None, None, 6, None, None]


def test_counter_and_metadata_args_keep_their_members(tmp_path: Path) -> None:
    """Counter values and metadata are read from their args texts: a member named like a lifted one stays one."""
    trace = _load(
        tmp_path,
        [
            {"ph": "C", "name": "mem", "pid": 1, "ts": 5, "args": {"bytes": 100, "External id": 3, "free": 7}},
            {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "trainer", "correlation": 1}},
            _x("a", 0, {"x": 1}),
        ],
    )
    series = trace.series.join(trace.samples, on="series").sort("name")
    assert dict(zip(series.get_column("name"), series.get_column("value"))) == {
        "mem External id": 3.0,
        "mem bytes": 100.0,
        "mem free": 7.0,
    }


def test_a_begin_end_pair_takes_the_ids_of_both_records(tmp_path: Path) -> None:
    """A B/E pair is one event: the end's lifted members its begin lacks go to the event's columns; one both have
    stays the end's in the args text the pair merges (as the end's other members do)."""
    pair = [
        {"ph": "B", "name": "b", "pid": 1, "tid": 2, "ts": 5, "args": {"External id": 8, "Ev Idx": 1}},
        {"ph": "E", "pid": 1, "tid": 2, "ts": 8, "args": {"correlation": 3, "Ev Idx": 2, "Sequence number": 4, "x": 1}},
    ]
    (ev,) = _load(tmp_path, pair).events.iter_rows(named=True)
    assert (ev["ext_id"], ev["corr"], ev["seq"], ev["ev_idx"]) == (8, 3, 4, 1)
    assert json.loads(ev["args"]) == {"Ev Idx": 2, "x": 1}


def test_chrome_round_trip_puts_the_ids_back_first(tmp_path: Path) -> None:
    events = [
        _x("aten::mm", 0, {"External id": 4, "Input Dims": [[2, 3]], "Sequence number": 9}),
        _x("k", 2, {"queued": 0, "correlation": 12, "External id": 4}, "kernel", 7),
        _x("none", 20, None),
    ]
    first = _load(tmp_path, events)
    out = tmp_path / "out.json"
    di.save(first, out)
    written = {e["name"]: e for e in json.loads(out.read_text())["traceEvents"] if e.get("ph") == "X"}
    assert list(written["aten::mm"]["args"].items()) == [
        ("External id", 4),
        ("Sequence number", 9),
        ("Input Dims", [[2, 3]]),
    ]
    assert list(written["k"]["args"]) == ["correlation", "External id", "queued"]
    assert "args" not in written["none"]
    again = di.load(out)
    assert again.events.drop("src_cat").equals(first.events.drop("src_cat"))
    store = tmp_path / "t.di"
    di.save(first, store)
    assert di.load(store).events.equals(first.events)


def test_an_old_store_whose_texts_hold_the_ids_is_written_without_doubling_them(tmp_path: Path) -> None:
    """A model whose args texts still have the members (read before they were lifted) and their columns too."""
    first = _load(tmp_path, [_x("aten::mm", 0, {"External id": 4, "x": 1})])
    old = replace(first, events=first.events.with_columns(pl.lit('{"External id":4,"x":1}').alias("args")))
    out = tmp_path / "old.json"
    di.save(old, out)
    (written,) = [e for e in json.loads(out.read_text())["traceEvents"] if e.get("ph") == "X"]
    assert written["args"] == {"External id": 4, "x": 1}
    assert out.read_text().count('"External id"') == 1


TRACES = [p for p in kineto_files() if not is_execution_trace(p)]
SLICES = ("X", "i", "I", "B", "b", "n")
"""The phases whose records are events of their own (an end record's args join its begin's text)."""


@pytest.mark.parametrize("path", TRACES or [None], ids=lambda p: kineto_id(p) if p else "no-data")
def test_real_traces_ids_agree_with_json(path: Path | None) -> None:
    """Every lifted member of every event of a real trace is in its column, and no args text holds one (an id
    written as null, as in a trace of ../shared/data, is no integer and stays in the text)."""
    if path is None:
        pytest.skip("shared test data absent")
    _, events = doc_events(path)
    xs = [e for e in events if isinstance(e, dict) and e.get("ph") in SLICES]
    if not xs or not any(isinstance(e.get("args"), dict) for e in xs):
        pytest.skip("no events with args")
    ev = di.load(path).events
    for key, col in IDS.items():
        want = sorted(
            int(e["args"][key])
            for e in xs
            if isinstance(e.get("args"), dict)
            and type(e["args"].get(key)) is int
            and -(2**63) <= e["args"][key] < 2**63
        )
        if col in ("corr", "bytes"):
            continue  # the columns have other sources too (flows, pairing), checked by the reader's own tests
        got = sorted(ev.get_column(col).drop_nulls().to_list()) if col in ev.columns else []
        assert got == want, key
        assert not ev.get_column("args").drop_nulls().str.contains(f'"{key}":-?\\d').any(), key  # null stays


@pytest.mark.parametrize("at_end", [False, True])
def test_args_numbers_are_copied_as_written_at_every_length(tmp_path: Path, at_end: bool) -> None:
    """An args number is copied as its text (no reformatting), whatever its length: those of at most eight bytes
    as one word (the bytes past the number are overwritten by what follows), longer ones and one that ends the
    document within a word by a copy of their bytes."""
    texts = ["0", "-1", "1.5", "12345678", "-1234567", "123456789", "1.000000001", "-12345678901234567890", "1e+30"]
    texts += ["9" * k for k in range(1, 21)] + ["1.25E-7", "31.030303"]
    body = ",".join(
        f'{{"ph":"X","name":"n","pid":1,"tid":1,"ts":{k},"dur":1,"args":{{"v":{t},"w": {t} }}}}'
        for k, t in enumerate(texts)
    )
    if at_end:  # the last number ends the document within a word of its start
        body += ',{"ph":"i","name":"m","pid":1,"tid":1,"ts":99,"s":"t","args":{"v":7}}'
    raw = ('{"traceEvents":[' + body + "]}").encode()
    t = di.load(write_json(tmp_path, "n.json", raw))
    got = t.events.sort("start_ns").get_column("args").to_list()
    want = [f'{{"v":{t},"w":{t}}}' for t in texts] + (['{"v":7}'] if at_end else [])
    assert got == want


def _random_ids(rng: Any, k: int) -> dict[str, int]:
    """A random subset of the lifted members (the ids, ``correlation``, ``bytes``), in a random key order, valued from
    ``k``."""
    chosen = [key for key in IDS if rng.random() < 0.5]
    rng.shuffle(chosen)
    return {key: k * 10 + j for j, key in enumerate(chosen)}


@pytest.mark.parametrize("names", [7, 70_000])
def test_packed_ids_of_any_subset_and_order(tmp_path: Path, names: int) -> None:
    """Each event keeps its own lifted members whatever subset it has and in whatever order its args list them, a
    repeated key keeps its last value, and none is lost or shifted when the scan goes on with a bigger symbol table
    (more distinct names than the first one holds; bigger columns: test_chrome_pairing)."""
    import random

    rng = random.Random(5)
    events, want = [], []
    for k in range(80_000 if names > 7 else 3_000):
        ids = _random_ids(rng, k)
        args: dict[str, Any] = {"x": k % 3, **ids}
        text = json.dumps(args)
        if ids and k % 11 == 0:  # a repeated key: JSON readers take the last value
            key = next(iter(ids))
            text = text[:-1] + f', "{key}": {k * 10 + 9}}}'
            ids[key] = k * 10 + 9
        # the name after the args: a symbol table that fills up there makes the scan read the event's ids again
        events.append(f'{{"ph": "X", "pid": 1, "tid": 1, "ts": {k}, "dur": 1, "args": {text}, "name": "n{k % names}"}}')
        want.append(ids)
    path = tmp_path / "ids.json"
    path.write_text('{"traceEvents": [' + ",\n".join(events) + "]}")
    ev = di.load(path).events.sort("start_ns")
    for key, column in IDS.items():
        assert ev.get_column(column).to_list() == [ids.get(key) for ids in want], column
    assert [json.loads(t) for t in ev.get_column("args").head(50)] == [{"x": k % 3} for k in range(50)]


def test_a_truncated_event_gives_its_ids_back(tmp_path: Path) -> None:
    """A file cut inside an event's args, after some of its ids: the events before it keep theirs, and the scan
    packs none of the dropped event's."""
    from di.convert.chrome import scan as S
    from di.convert.chrome.decode import decode

    events = [_x(f"e{k}", k, {"External id": k, "correlation": 50 + k, "Python id": 100 + k, "y": 1}) for k in range(4)]
    text = json.dumps({"traceEvents": events})
    cut = text.rindex('"Python id"')  # the last event's External id and correlation read, its Python id not
    path = tmp_path / "cut.json"
    path.write_text(text[:cut])
    raw = decode(path)
    rows = np.arange(raw.cols["ph"].size)
    assert rows.size == 3 and raw.packed_values.size == 3 * 3 + 1
    got = raw.lifted(rows, ("ext_id", "corr", "py_id"))
    assert got["ext_id"].tolist() == [0, 1, 2]
    assert got["corr"].tolist() == [50, 51, 52]
    assert got["py_id"].tolist() == [100, 101, 102]
    assert S.lifted(raw.cols, "seq", rows).tolist() == [False] * 3


def test_begin_end_pairs_share_their_ids(tmp_path: Path) -> None:
    """Many B/E pairs, each record with a random subset of ids: the event has the begin's ids and those of the end
    its begin lacks; an id both have stays the end's in the merged args text."""
    import random

    rng = random.Random(11)
    events, want, texts = [], [], []
    for k in range(300):
        b, e = _random_ids(rng, 2 * k), _random_ids(rng, 2 * k + 1)
        events.append({"ph": "B", "name": f"r{k}", "pid": 1, "tid": k, "ts": 10 * k, "args": {"a": k, **b}})
        events.append({"ph": "E", "pid": 1, "tid": k, "ts": 10 * k + 5, "args": e})
        want.append({**e, **b})
        texts.append({"a": k, **{key: v for key, v in e.items() if key in b}})
    ev = _load(tmp_path, events).events.sort("loc")
    for key, column in IDS.items():
        got = ev.get_column(column).to_list() if column in ev.columns else [None] * len(want)
        assert got == [ids.get(key) for ids in want], column
    assert [json.loads(t) for t in ev.get_column("args")] == texts
