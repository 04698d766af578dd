"""Chrome Trace Event JSON writer: hand-built traces whose output is known by construction."""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest

import oracles

import di.convert.chrome.lines as lines
import di.convert.chrome.writer as writer
import di
from conftest import assert_valid
from di.errors import SchemaError
from di.trace import Trace
from di.convert.chrome.writer import us_text, write_chrome

T0 = 1_000_000_000  # ns; the first event of most traces below starts here

LOCATIONS = {  # rank 0: CPU thread + GPU 0 stream 7; rank 1: the same source pid, tid and device
    "loc": [0, 1, 2, 3],
    "rank": [0, 0, 1, 1],
    "pid": [100, 0, 100, 0],
    "tid": [101, 7, 101, 7],
    "kind": ["cpu_thread", "gpu_stream", "cpu_thread", "gpu_stream"],
    "device": [None, 0, None, 0],
    "stream": [None, 7, None, 7],
    "name": ["main", None, "main", None],
    "process": ["python", None, "python", None],
    "source": [0, 0, 0, 0],
}


def _events(rows: list[tuple[Any, ...]], **extra: list[Any]) -> dict[str, list[Any]]:
    """events from (loc, start_ns, end_ns, name[, cat]) rows, already in (loc, start, -end) order."""
    cols: dict[str, list[Any]] = {"loc": [], "start_ns": [], "end_ns": [], "name": [], "cat": []}
    for loc, start, end, name, *cat in rows:
        for key, value in zip(cols, (loc, start, end, name, cat[0] if cat else "user")):
            cols[key].append(value)
    n = len(rows)
    return {**cols, "depth": [0] * n, "instant": [False] * n, **extra}


def _build(events: dict[str, Any] | None = None, **tables: Any) -> Trace:
    trace = Trace.build(meta={"world_size": 2}, locations=LOCATIONS, events=events, **tables)
    trace.validate()
    return trace


def _write(trace: Trace, tmp_path: Path, name: str = "t.json", **kw: Any) -> tuple[dict[str, Any], bytes]:
    path = tmp_path / name
    write_chrome(trace, path, **kw)
    raw = path.read_bytes()
    text = gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw
    return orjson.loads(text), text


def _phase(doc: dict[str, Any], *phases: str) -> list[dict[str, Any]]:
    return [e for e in doc["traceEvents"] if e["ph"] in phases]


def _tracks(doc: dict[str, Any]) -> dict[tuple[int, int], dict[str, Any]]:
    return {(x["pid"], x["tid"]): x for x in doc["diTrace"]["locations"]}


def test_layout_and_one_event_per_line(tmp_path: Path) -> None:
    trace = _build(_events([(0, T0, T0 + 500, "step"), (1, T0 + 100, T0 + 200, "kern", "kernel")]))
    doc, text = _write(trace, tmp_path)
    assert doc["displayTimeUnit"] == "ns"
    assert set(doc) == {"diWriter", "traceEvents", "displayTimeUnit", "diTrace"} and text.startswith(
        b'{"diWriter":"di","traceEvents":[\n'
    )
    assert doc["diTrace"]["schema_version"] == 1
    body = text.split(b"\n")[1 : 1 + len(doc["traceEvents"])]
    assert [orjson.loads(line.rstrip(b",")) for line in body] == doc["traceEvents"]
    assert not _phase(doc, "B", "E")
    # what Perfetto's tokenizer needs: "ts" on all but M events, no array at an event's top level
    assert all("ts" in e for e in doc["traceEvents"] if e["ph"] != "M")
    assert not [e for e in doc["traceEvents"] if any(isinstance(v, list) for v in e.values())]


def test_pids_unique_per_rank_and_process(tmp_path: Path) -> None:
    trace = _build(
        _events([(0, T0, T0 + 10, "a"), (1, T0, T0 + 10, "b"), (2, T0, T0 + 10, "c"), (3, T0, T0 + 10, "d")])
    )
    doc, _ = _write(trace, tmp_path)
    names = {e["pid"]: e["args"]["name"] for e in _phase(doc, "M") if e["name"] == "process_name"}
    assert sorted(names.values()) == ["rank 0 / GPU 0", "rank 0 / python", "rank 1 / GPU 0", "rank 1 / python"]
    tracks = doc["diTrace"]["locations"]
    by_rank = {r: {t["pid"] for t in tracks if t["rank"] == r} for r in (0, 1)}
    assert len(by_rank[0]) == len(by_rank[1]) == 2 and not by_rank[0] & by_rank[1]
    tids = [t["tid"] for t in tracks]
    assert len(set(tids)) == len(tids) and not set(tids) & set(names)
    sort_index = {e["pid"]: e["args"]["sort_index"] for e in _phase(doc, "M") if e["name"] == "process_sort_index"}
    ranks = {t["pid"]: t["rank"] for t in tracks}
    assert sorted(sort_index, key=sort_index.get) == sorted(sort_index, key=lambda p: (ranks[p], sort_index[p]))
    slices = {e["name"]: _tracks(doc)[e["pid"], e["tid"]]["loc"] for e in _phase(doc, "X")}
    assert slices == {"a": 0, "b": 1, "c": 2, "d": 3}


def test_timestamps_are_exact_ns_text(tmp_path: Path) -> None:
    big = 1_700_000_000_123_456_789  # unix-epoch ns: too many digits for a float to keep
    trace = Trace.build(
        meta={},
        locations=LOCATIONS,
        events=_events(
            [
                (0, big, big + 1_000_001, "a"),
                (0, big + 123, big + 123, "i"),
                (1, big + 999_999_999, big + 1_000_000_000, "b"),
            ],
        )
        | {"instant": [False, True, False]},
    )
    doc, text = _write(trace, tmp_path)
    assert b'"ts":0.000,"dur":1000.001,' in text and b'"ts":0.123,' in text and b'"ts":999999.999,"dur":0.001,' in text
    assert doc["diTrace"]["meta"]["start_ns"] == big
    (instant,) = _phase(doc, "i")
    assert instant["s"] == "t" and "dur" not in instant
    assert [us_text(v) for v in (0, 5, 123, 1000, 1_234_567, -5, -1234)] == [
        "0.000",
        "0.005",
        "0.123",
        "1.000",
        "1234.567",
        "-0.005",
        "-1.234",
    ]


def test_every_slice_once_in_row_order(tmp_path: Path) -> None:
    rows = [(0, T0 + i * 10, T0 + i * 10 + 5, f"e{i}") for i in range(50)] + [(1, T0, T0 + 1, "g")]
    doc, _ = _write(_build(_events(rows)), tmp_path)
    assert [e["name"] for e in _phase(doc, "X", "i")] == [r[3] for r in rows]
    assert doc["diTrace"]["events"] == len(rows)


def test_non_nested_overlap_goes_to_a_lane(tmp_path: Path) -> None:
    trace = _build(_events([(0, T0, T0 + 100, "a"), (0, T0 + 50, T0 + 150, "b"), (0, T0 + 60, T0 + 70, "c")]))
    doc, _ = _write(trace, tmp_path)
    x = {e["name"]: e for e in _phase(doc, "X")}
    assert x["a"]["pid"] == x["b"]["pid"] and x["a"]["tid"] != x["b"]["tid"] and x["c"]["tid"] == x["a"]["tid"]
    lane = _tracks(doc)[x["b"]["pid"], x["b"]["tid"]]
    assert (lane["loc"], lane["lane"]) == (0, 1)
    names = {e["tid"]: e["args"]["name"] for e in _phase(doc, "M") if e["name"] == "thread_name"}
    assert names[x["a"]["tid"]] == "main" and names[x["b"]["tid"]] == "main (lane 2)"


def test_unsorted_events_still_get_lanes(tmp_path: Path) -> None:
    trace = Trace.build(
        meta={"world_size": 2},
        locations=LOCATIONS,
        events=_events([(0, T0 + 50, T0 + 150, "b"), (0, T0, T0 + 100, "a")]),
    )
    with pytest.raises(SchemaError, match="out of"):
        trace.validate()  # not a valid model, yet the writer copes
    doc, _ = _write(trace, tmp_path)
    assert [e["name"] for e in _phase(doc, "X")] == ["b", "a"]
    assert [_tracks(doc)[e["pid"], e["tid"]]["lane"] for e in _phase(doc, "X")] == [1, 0]


NASTY = ['say "hi"', "back\\slash", "ünïcödé ✓ 🚀", "tab\tnew\nline\x01", "", "</script>", "del\x7f"]


def test_names_and_categories_round_trip(tmp_path: Path) -> None:
    rows = [(0, T0 + i, T0 + i, name) for i, name in enumerate(NASTY)]
    trace = _build(_events(rows, src_cat=NASTY[::-1], instant=[True] * len(rows)))
    doc, text = _write(trace, tmp_path)
    assert [(e["name"], e["cat"]) for e in _phase(doc, "i")] == list(zip(NASTY, NASTY[::-1]))
    assert not any(c < 0x20 or c == 0x7F for c in text.replace(b"\n", b""))  # Perfetto rejects raw control characters


def test_location_names_round_trip(tmp_path: Path) -> None:
    locations = {**LOCATIONS, "name": [NASTY[0], None, NASTY[-1], None], "process": [NASTY[2], None, "p", None]}
    trace = Trace.build(meta={}, locations=locations, events=_events([(0, T0, T0 + 1, "a"), (2, T0, T0 + 1, "b")]))
    doc, text = _write(trace, tmp_path)
    meta = {e["name"]: [] for e in _phase(doc, "M")}
    for e in _phase(doc, "M"):
        meta[e["name"]].append(e["args"].get("name"))
    assert meta["thread_name"] == [NASTY[0], NASTY[-1]] and meta["process_name"] == [
        "rank 0 / " + NASTY[2],
        "rank 1 / p",
    ]
    assert [t["name"] for t in doc["diTrace"]["locations"]] == locations["name"]
    assert b"\x7f" not in text


def test_category_falls_back_to_canonical_cat(tmp_path: Path) -> None:
    trace = _build(
        _events([(0, T0, T0 + 5, "a", "mpi_coll"), (0, T0 + 5, T0 + 9, "b", "io")], src_cat=["cpu_op", None])
    )
    doc, _ = _write(trace, tmp_path)
    assert [e["cat"] for e in _phase(doc, "X")] == ["cpu_op", "io"]
    assert doc["diTrace"]["categories"] == "hJ"  # mpi_coll (cpu_op reads back as compute); io, with no source category
    back = di.load(tmp_path / "t.json")
    assert back.events.get_column("src_cat").to_list() == ["cpu_op", None]
    assert back.events.get_column("cat").to_list() == ["mpi_coll", "io"]


def test_args_gain_correlation_and_bytes(tmp_path: Path) -> None:
    args = [None, '{"correlation": 7, "x": 1}', "{}", ' {\n "k": "v\\u00fc"} ', '{"bytes":9}', '{"a":{"b":[1,2]}}']
    corr = [5, 7, None, 6, None, None]
    nbytes = [None, 64, 32, 8, 9, None]
    rows = [(0, T0 + 10 * i, T0 + 10 * i + 5, f"e{i}") for i in range(len(args))]
    doc, _ = _write(_build(_events(rows, args=args, corr=corr, bytes=nbytes)), tmp_path)
    got = [e.get("args") for e in _phase(doc, "X")]
    assert got == [
        {"correlation": 5},
        {"bytes": 64, "correlation": 7, "x": 1},
        {"bytes": 32},
        {"correlation": 6, "bytes": 8, "k": "vü"},
        {"bytes": 9},
        {"a": {"b": [1, 2]}},
    ]
    assert doc["diTrace"]["args_added"] == "522300"  # 1: correlation, 2: bytes, + 4: there were no args
    # read back, correlation and bytes are in their columns only (lifted out of every text, the ones di put in
    # and the ones the texts had); an event that had no args has none again (whitespace is not kept)
    back = di.load(tmp_path / "t.json")
    texts = back.events.get_column("args").to_list()
    lifted = [{k: v for k, v in orjson.loads(a).items() if k not in ("correlation", "bytes")} for a in args[1:]]
    assert texts[0] is None and [orjson.loads(t) for t in texts[1:]] == lifted
    assert back.events.get_column("corr").to_list() == corr and back.events.get_column("bytes").to_list() == nbytes


def _flows_written(doc: dict[str, Any]) -> list[tuple[int, int, dict[str, Any]]]:
    """(src row, dst row, di_flow) of every flow in the output, from bind_id chains and s/f pairs."""
    events = _phase(doc, "X", "i")  # row k of events = k-th X/i line
    chains: dict[int, list[int]] = {}
    for row, e in enumerate(events):
        if "bind_id" in e:
            chains.setdefault(e["bind_id"], []).append(row)
    out = []
    for rows in chains.values():
        rows.sort(key=lambda r: events[r]["ts"])
        assert "flow_in" not in events[rows[0]] and "flow_out" not in events[rows[-1]]
        out += [(a, b, events[b]["di_flow"]) for a, b in zip(rows, rows[1:])]

    def ns(us: float) -> int:
        return round(us * 1000)

    def bound(marker: dict[str, Any]) -> int:  # the innermost event of the track enclosing the marker
        t = ns(marker["ts"])
        inside = [
            (ns(e["ts"]), row)
            for row, e in enumerate(events)
            if (e["pid"], e["tid"]) == (marker["pid"], marker["tid"])
            and ns(e["ts"]) <= t
            and (t < ns(e["ts"]) + ns(e.get("dur", 0)) or t == ns(e["ts"]))
        ]
        return max(inside)[1]

    starts = {e["id"]: e for e in _phase(doc, "s")}
    for f in _phase(doc, "f"):
        s = starts.pop(f["id"])
        assert f["bp"] == "e" and (s["cat"], s["name"]) == (f["cat"], f["name"]) and s["ts"] <= f["ts"]
        out.append((bound(s), bound(f), f["di_flow"]))
    assert not starts
    return out


def test_flows_written_exactly_once(tmp_path: Path) -> None:
    rows = [
        (0, T0, T0 + 10, "launch"),
        (0, T0 + 20, T0 + 30, "launch2"),
        (0, T0 + 40, T0 + 40, "mark"),
        (1, T0 + 15, T0 + 25, "k1"),
        (1, T0 + 26, T0 + 35, "k2"),
        (1, T0 + 50, T0 + 60, "k3"),
        (3, T0 + 1, T0 + 2, "r"),
    ]
    flows = {  # 0->3 binds; 3 fans out to 4 and 2 (an instant); 1 fans out to 4 and 5; 6->0 runs backwards in time
        "src": [0, 3, 1, 1, 3, 6],
        "dst": [3, 4, 4, 5, 2, 0],
        "kind": ["launch", "stream_wait", "launch", "launch", "sync", "user"],
        "id": [11, None, 12, 12, None, 99],
        "src_cat": ["ac2g", None, "ac2g", "ac2g", None, 'we"ird'],
    }
    trace = _build(_events(rows, instant=[False, False, True, False, False, False, False]), flows=flows)
    doc, _ = _write(trace, tmp_path)
    got = sorted((a, b, d["kind"], d.get("id"), d.get("src_cat")) for a, b, d in _flows_written(doc))
    assert got == sorted(zip(flows["src"], flows["dst"], flows["kind"], flows["id"], flows["src_cat"]))
    x = _phase(doc, "X", "i")
    assert x[0]["flow_out"] and x[3]["flow_in"] and "flow_out" not in x[3] and x[0]["bind_id"] == x[3]["bind_id"]
    assert "bind_id" not in x[1] and "bind_id" not in x[4]  # fan-out and fan-in go through s/f
    assert {e["cat"] for e in _phase(doc, "s")} == {"ac2g", "stream_wait", "sync", 'we"ird'}
    assert len({e["id"] for e in _phase(doc, "s")}) == 5 and doc["diTrace"]["flows"] == 6


def test_flow_chain_shares_one_bind_id(tmp_path: Path) -> None:
    rows = [(0, T0, T0 + 10, "a"), (1, T0 + 20, T0 + 30, "b"), (2, T0 + 40, T0 + 50, "c")]
    flows = {"src": [0, 1], "dst": [1, 2], "kind": ["launch", "stream_wait"]}
    doc, _ = _write(_build(_events(rows), flows=flows), tmp_path)
    a, b, c = _phase(doc, "X")
    assert a["bind_id"] == b["bind_id"] == c["bind_id"] >= writer.BIND_ID_BASE
    assert b["flow_in"] and b["flow_out"] and c["flow_in"] and "flow_in" not in a
    assert sorted((s, d) for s, d, _ in _flows_written(doc)) == [(0, 1), (1, 2)]


def test_equal_start_flows_bind_to_the_right_events(tmp_path: Path) -> None:
    rows = [
        (0, T0, T0 + 100, "outer"),
        (0, T0, T0, "zero parent"),
        (0, T0, T0, "zero child"),
        (0, T0 + 10, T0 + 20, "inner"),
        (1, T0, T0, "wait"),
        (1, T0 + 5, T0 + 90, "long"),
        (1, T0 + 30, T0 + 40, "k"),
    ]
    flows = {  # 1->4: equal zero-length starts; 0->6 and 0->5: outer has children from its first ns; 6->0: back in time
        "src": [1, 0, 0, 6],
        "dst": [4, 6, 5, 0],
        "kind": ["sync", "user", "user", "user"],
    }
    doc, _ = _write(_build(_events(rows), flows=flows), tmp_path)
    x = _phase(doc, "X")
    assert x[1]["bind_id"] == x[4]["bind_id"] and "bind_id" not in x[2]  # v2 names the parent, not its twin child
    assert sorted((a, b) for a, b, _ in _flows_written(doc)) == sorted(zip(flows["src"], flows["dst"]))


def test_counters(tmp_path: Path) -> None:
    series = {"series": [0, 1, 2], "loc": [1, 1, 2], "name": ["power", "power", "mem"], "unit": ["W", "W", None]}
    samples = {
        "series": [0, 0, 1, 2, 2],
        "ts_ns": [T0 - 100, T0 + 5, T0 + 5, T0, T0 + 1],
        "value": [300.5, float("nan"), 1e-7, 12.0, 1 / 3],
    }
    doc, text = _write(_build(_events([(0, T0, T0 + 10, "a")]), series=series, samples=samples), tmp_path)
    c = _phase(doc, "C")
    assert [(e["name"], e["args"]) for e in c] == [
        ("power [W]", {"power": 300.5}),
        ("power [W] #1", {"power": 1e-7}),
        ("mem", {"mem": 12.0}),
        ("mem", {"mem": 1 / 3}),
    ]
    assert b'"ts":0.000' in text and doc["diTrace"]["meta"]["start_ns"] == T0 - 100  # samples count for t0
    pids = {t["loc"]: t["pid"] for t in doc["diTrace"]["locations"]}
    assert [e["pid"] for e in c] == [pids[1], pids[1], pids[2], pids[2]]
    assert doc["diTrace"]["nonfinite_samples_skipped"] == 1 and doc["diTrace"]["samples"] == 4
    assert [s["counter"] for s in doc["diTrace"]["series"]] == ["power [W]", "power [W] #1", "mem"]


def test_di_trace_locations_and_meta(tmp_path: Path) -> None:
    trace = _build(_events([(0, T0, T0 + 10, "a")]))
    doc, _ = _write(trace, tmp_path)
    di = doc["diTrace"]
    assert [(t["loc"], t["lane"]) for t in di["locations"]] == [(0, 0), (1, 0), (2, 0), (3, 0)]
    first = di["locations"][0]
    assert {k: first[k] for k in ("rank", "kind", "name", "process", "src_pid", "src_tid")} == {
        "rank": 0,
        "kind": "cpu_thread",
        "name": "main",
        "process": "python",
        "src_pid": 100,
        "src_tid": 101,
    }
    kept = {
        k: v
        for k, v in trace.meta.items()
        if k not in ("format", "schema_version", "di_version", "tables", "ranks", "time_range")
    }
    assert di["meta"] == {**kept, "start_ns": T0} and {"clock", "sources", "world_size"} <= set(kept)


@pytest.mark.parametrize(
    ("name", "compress", "gz"), [("t.json.gz", None, True), ("t.json", True, True), ("t.json.gz", False, False)]
)
def test_gzip(tmp_path: Path, name: str, compress: bool | None, gz: bool) -> None:
    doc, _ = _write(_build(_events([(0, T0, T0 + 10, "a")])), tmp_path, name, compress=compress)
    assert ((tmp_path / name).read_bytes()[:2] == b"\x1f\x8b") == gz
    assert [e["name"] for e in _phase(doc, "X")] == ["a"]
    assert [p.name for p in tmp_path.iterdir()] == [name]  # no temporary file left behind


def test_empty_trace(tmp_path: Path) -> None:
    trace = Trace.build(meta={})
    trace.validate()
    doc, _ = _write(trace, tmp_path)
    assert doc["traceEvents"] == [] and doc["diTrace"]["locations"] == [] and doc["diTrace"]["meta"]["start_ns"] == 0


def test_small_chunks_give_the_same_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rows = [(i % 2, T0 + i, T0 + i + 3, f"e{i % 3}") for i in range(40)]
    rows.sort(key=lambda r: (r[0], r[1]))
    trace = _build(
        _events(rows, corr=list(range(40))), flows={"src": [0, 1], "dst": [30, 30], "kind": ["user", "user"]}
    )
    _, whole = _write(trace, tmp_path, "a.json")
    monkeypatch.setattr(writer, "CHUNK_ROWS", 3)
    _, chunked = _write(trace, tmp_path, "b.json")
    assert whole == chunked


def test_bad_references_raise(tmp_path: Path) -> None:
    trace = Trace.build(
        meta={"world_size": 2},
        locations=LOCATIONS,
        events=_events([(0, T0, T0 + 10, "a")]),
        flows={"src": [0], "dst": [5], "kind": ["user"]},
    )
    with pytest.raises(SchemaError, match="flows.dst"):
        trace.validate()
    with pytest.raises(SchemaError, match="flows.dst"):
        write_chrome(trace, tmp_path / "t.json")
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("seed", range(10))
def test_line_kernel_matches_reference(seed: int) -> None:
    rng = np.random.default_rng(seed)
    pieces = ["", "a", '"x":', "{}", "ünï", "}" * 3] + [f"f{i}" * int(rng.integers(0, 4)) for i in range(10)]
    pool = writer._utf8(writer.pl.Series(pieces))
    texts = ["", "{}", ' { "k" : 1 } ', '{"a":[1]}', "plain", "\u00e9"]
    n, lo = int(rng.integers(1, 40)), int(rng.integers(0, 5))
    text = writer._utf8(writer.pl.Series([texts[i] for i in rng.integers(0, len(texts), n)]))
    rows = lo + n
    frag = rng.integers(-1, len(pieces), (3, rows)).astype(np.int32)
    times = rng.integers(-(10**15), 10**15, (2, rows))
    times[rng.random((2, rows)) < 0.2] = lines.NO_TIME
    ints = np.where(rng.random((2, rows)) < 0.5, lines.NO_TIME, rng.integers(-(10**6), 10**12, (2, rows)))
    ops = [
        (lines.FRAG, 0),
        (lines.TIME, 0),
        (lines.CONST, 2),
        (lines.TIME, 1),
        (lines.FRAG, 2),
        (lines.TEXT, 0),
        (lines.ARGS, 1),
        (lines.FRAG, 1),
        (lines.CONST, 0),
    ]
    got = lines.assemble(ops, lo, rows, frag, times, ints, pool, text).tobytes()
    want = oracles.assemble_reference(np.array(ops), lo, rows, frag, times, ints, pool[0], pool[1], *text)
    assert got == want


def test_messages_collectives_and_categories_read_back(tmp_path: Path) -> None:
    """What Chrome events cannot hold travels in diTrace: MPI messages and collectives, and the
    category of events whose written ``cat`` (their source's ``mpi``) would read back as 'other'."""
    rows = [
        (0, T0, T0 + 5, "MPI_Send", "mpi_p2p"),
        (0, T0 + 6, T0 + 9, "MPI_Allreduce", "mpi_coll"),
        (0, T0 + 9, T0 + 12, "MPI_Init", "other"),
        (2, T0 + 1, T0 + 7, "MPI_Recv", "mpi_p2p"),
        (2, T0 + 8, T0 + 9, "MPI_Allreduce", "mpi_coll"),
        (2, T0 + 10, T0 + 11, "cudaDeviceSynchronize", "sync"),
    ]
    trace = _build(
        _events(rows, src_cat=["mpi", "mpi", "mpi", "mpi", "mpi", "cuda_runtime"]),
        messages={"send": [0], "recv": [3], "bytes": [64], "tag": [7], "comm": ["MPI_COMM_WORLD"]},
        collectives={
            "instance": [0, 0],
            "event": [1, 4],
            "rank": [0, 1],
            "comm": ["MPI_COMM_WORLD"] * 2,
            "seq": [0, 0],
            "op": ["allreduce"] * 2,
            "bytes": [8, 8],
        },
    )
    for name in ("t.json", "t.json.gz"):
        path = tmp_path / name
        write_chrome(trace, path)
        back = assert_valid(di.load(path))
        assert back.events.get_column("cat").to_list() == trace.events.get_column("cat").to_list()
        assert back.messages.select("send", "recv", "bytes", "tag", "comm").rows() == [(0, 3, 64, 7, "MPI_COMM_WORLD")]
        assert back.collectives.select("instance", "event", "rank", "op", "bytes").rows() == [
            (0, 1, 0, "allreduce", 8),
            (0, 4, 1, "allreduce", 8),
        ]
        assert not back.meta["warnings"]
    doc, _ = _write(trace, tmp_path)
    assert doc["diTrace"]["categories"] == "ghnghf"  # a + index in the vocabulary, one per events row


def test_categories_the_written_cat_gives_back_are_not_repeated(tmp_path: Path) -> None:
    trace = _build(_events([(0, T0, T0 + 5, "aten::mm", "compute")], src_cat=["cpu_op"]))
    doc, _ = _write(trace, tmp_path)
    assert "categories" not in doc["diTrace"] and "messages" not in doc["diTrace"]


def test_a_ditrace_message_whose_event_is_missing_is_dropped_and_counted(tmp_path: Path) -> None:
    rows = [(0, T0, T0 + 5, "MPI_Send", "mpi_p2p"), (2, T0 + 1, T0 + 7, "MPI_Recv", "mpi_p2p")]
    trace = _build(_events(rows, src_cat=["mpi", "mpi"]), messages={"send": [0, 0], "recv": [1, 1], "bytes": [8, 16]})
    doc, _ = _write(trace, tmp_path)
    doc["diTrace"]["messages"]["recv"] = [1, 99]
    doc["diTrace"]["categories"] = "gg" + "x"  # one letter too many: ignored, with a warning
    path = tmp_path / "edited.json"
    path.write_bytes(orjson.dumps(doc))
    back = assert_valid(di.load(path))
    assert back.messages.select("send", "recv", "bytes").rows() == [(0, 1, 8)]
    assert back.meta["sources"][0]["dropped"] == {"messages rows whose event was not loaded": 1}
    assert any("diTrace categories ignored" in w for w in back.meta["warnings"])
    assert back.events.get_column("cat").to_list() == ["other", "other"]


def test_messages_are_drawn_as_flows_that_read_back_as_messages_only(tmp_path: Path) -> None:
    rows = [
        (0, T0, T0 + 5, "MPI_Send", "mpi_p2p"),
        (2, T0 + 1, T0 + 7, "MPI_Recv", "mpi_p2p"),
        (2, T0 + 8, T0 + 9, "k", "kernel"),
    ]
    trace = _build(
        _events(rows, src_cat=["mpi", "mpi", None]),
        messages={"send": [0], "recv": [1], "bytes": [8]},
        flows={"src": [1], "dst": [2], "kind": ["user"]},
    )
    doc, _ = _write(trace, tmp_path)
    lines = doc["traceEvents"]
    kinds = sorted(e["di_flow"]["kind"] for e in lines if "di_flow" in e)
    assert kinds == ["message", "user"]
    back = assert_valid(di.load(tmp_path / "t.json"))
    assert back.flows.select("src", "dst", "kind").rows() == [(1, 2, "user")]
    assert back.messages.select("send", "recv", "bytes").rows() == [(0, 1, 8)]


def test_locations_keep_their_own_columns(tmp_path: Path) -> None:
    """A connector's location columns beyond the schema's (Nsight's gpu_model) ride in diTrace and come back;
    a damaged set of them is said and left out."""
    trace = Trace.build(
        meta={"world_size": 2},
        locations={**LOCATIONS, "gpu_model": [None, "H100", None, "A100"]},
        events=_events([(0, T0, T0 + 10, "a"), (1, T0 + 1, T0 + 5, "k", "kernel")]),
    )
    doc, text = _write(trace, tmp_path)
    assert doc["diTrace"]["location_columns"]["columns"] == {
        "loc": [0, 1, 2, 3],
        "gpu_model": [None, "H100", None, "A100"],
    }
    back = di.load(tmp_path / "t.json")
    assert back.locations.get_column("gpu_model").to_list() == [None, "H100", None, "A100"]
    (tmp_path / "t.json").write_bytes(text.replace(b'"gpu_model":[null,"H100"', b'"gpu_model":[null,"H100",7'))
    damaged = di.load(tmp_path / "t.json")
    assert "gpu_model" not in damaged.locations.columns
    assert any("location_columns ignored" in w for w in damaged.meta["warnings"])
