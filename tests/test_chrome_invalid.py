"""Bad input for the Chrome/Kineto reader: each case's specific error or drop count,
through ``di.load`` and, where a user would meet it, through ``di convert`` (exit
code 2 and one line on stderr naming the file, never a traceback)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import di
from di.convert.provenance import TRUNCATED_TAIL
from conftest import assert_valid, kineto_file, trace_doc, write_json
from di.cli import main

OK_EVENT = {"ph": "X", "name": "ok", "pid": 1, "tid": 1, "ts": 5, "dur": 1}


def cli_fails(capsys: pytest.CaptureFixture[str], argv: list[str], names: Any) -> str:
    """Run the CLI; assert exit code 2 and a one-line stderr message naming ``names``."""
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert code == 2, (out, err)
    assert len(lines) == 1, err
    assert "Traceback" not in err and lines[0].startswith(f"di {argv[0]}: error:")
    assert str(names) in lines[0]
    return lines[0]


def convert_fails(capsys: pytest.CaptureFixture[str], tmp_path: Path, path: Path) -> str:
    return cli_fails(capsys, ["convert", path, "-o", tmp_path / "out.di"], path)


def dropped(trace: di.Trace) -> dict[str, int]:
    return trace.meta["sources"][0]["dropped"]


def test_truncated_gzip_keeps_what_came_before(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    real = kineto_file("hta_trace_filter/sampled_rank-0.json.gz")
    whole = assert_valid(di.load(real))
    data = real.read_bytes()
    cut = write_json(tmp_path, "cut.json.gz", data[: len(data) // 2])
    t = assert_valid(di.load(cut))
    assert 0 < t.events.height < whole.events.height
    warnings = " ".join(t.meta["warnings"])
    assert "gzip stream truncated" in warnings and "truncated at byte" in warnings and str(cut) in warnings
    assert dropped(t)[TRUNCATED_TAIL] > 0
    assert main(["convert", str(cut), "-o", str(tmp_path / "cut.di")]) == 0
    assert "warning" in capsys.readouterr().out
    stub = write_json(tmp_path, "stub.json.gz", data[:20])
    with pytest.raises(di.FormatError, match="stub.json.gz"):
        di.load(stub)
    convert_fails(capsys, tmp_path, stub)


def test_truncated_before_trace_events_says_truncated(tmp_path: Path) -> None:
    path = write_json(tmp_path, "early.json", '{"schemaVersion": 1, "traceEv')
    with pytest.raises(di.FormatError) as info:
        di.load(path)
    assert "truncated" in info.value.problem  # not in the path: tmp_path holds the test name


def test_invalid_json_in_the_middle(tmp_path: Path) -> None:
    text = json.dumps(trace_doc(OK_EVENT, {**OK_EVENT, "name": "ok2", "ts": 7}))
    bad = text.replace('"ts": 7, "dur": 1}', '"ts": 7, "dur": 1} xx {"ph": "X"}', 1)
    t = assert_valid(di.load(write_json(tmp_path, "bad.json", bad)))
    assert t.events.get_column("name").cast(str).to_list() == ["ok", "ok2"]
    rest = len(bad) - bad.index("xx")
    assert dropped(t) == {TRUNCATED_TAIL: rest}
    assert any(f"invalid JSON at byte {bad.index('xx')}" in w for w in t.meta["warnings"])


def test_json_that_is_not_a_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_json(tmp_path, "foo.json", {"foo": 1})
    with pytest.raises(di.FormatError, match="traceEvents") as info:
        di.load(path)
    assert info.value.path == str(path)
    assert "traceEvents" in convert_fails(capsys, tmp_path, path)


def test_not_json_at_all(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_json(tmp_path, "hello.json", "hello")
    with pytest.raises(di.FormatError, match="not JSON"):
        di.load(path)
    convert_fails(capsys, tmp_path, path)
    other = write_json(tmp_path, "hello.txt", "hello")
    with pytest.raises(di.UnknownFormatError, match="chrome"):  # lists what is installed
        di.load(other)
    convert_fails(capsys, tmp_path, other)


def test_empty_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_json(tmp_path, "empty.json", b"")
    with pytest.raises(di.FormatError, match="empty.json"):
        di.load(path)
    convert_fails(capsys, tmp_path, path)


@pytest.mark.parametrize(
    ("event", "reason"),
    [
        ({"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 5, "dur": -1}, "X event with negative dur"),
        ({"ph": "Z", "name": "a", "pid": 1, "tid": 1, "ts": 5}, "unknown phase 'Z'"),
        ({"ph": "E", "pid": 1, "tid": 1, "ts": 5}, "B/E ends without a begin"),
        ({"ph": "B", "name": "a", "pid": 1, "tid": 1, "ts": 5}, "B/E begins without an end"),
        ({"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": "soon", "dur": 1}, "ts is not a number"),
    ],
    ids=["negative-dur", "unknown-phase", "E-without-B", "B-without-E", "string-ts"],
)
def test_unusable_event_is_dropped_and_counted(tmp_path: Path, event: dict[str, Any], reason: str) -> None:
    t = assert_valid(di.load(write_json(tmp_path, "t.json", trace_doc(event, OK_EVENT))))
    assert t.events.get_column("name").cast(str).to_list() == ["ok"]
    assert dropped(t) == {reason: 1}
    assert any(reason in w for w in t.meta["warnings"])


def test_events_without_ph_are_counted_not_a_syntax_error(tmp_path: Path) -> None:
    t = assert_valid(
        di.load(write_json(tmp_path, "noph.json", trace_doc({"name": "a", "ts": 1}, {}, {"name": "c"}, OK_EVENT)))
    )
    assert t.events.get_column("name").cast(str).to_list() == ["ok"]
    assert dropped(t) == {"event without 'ph'": 3}


def counter(ts: int, args: Any) -> dict[str, Any]:
    return {"ph": "C", "name": "m", "pid": 1, "ts": ts, "args": args}


def test_counter_without_numeric_value_is_counted(tmp_path: Path) -> None:
    t = assert_valid(
        di.load(write_json(tmp_path, "c.json", trace_doc(counter(1, {"a": "x"}), counter(2, {}), counter(3, {"a": 3}))))
    )
    assert t.samples.rows() == [(0, 3000, 3.0)]
    assert dropped(t) == {"counter event without numeric value": 2}


def test_counter_nested_object_is_not_a_series(tmp_path: Path) -> None:
    t = assert_valid(di.load(write_json(tmp_path, "c.json", trace_doc(counter(1, {"a": {"b": 1}, "v": 2})))))
    assert t.series.get_column("name").to_list() == ["m v"]


def test_non_utf8_bytes_in_a_name(tmp_path: Path) -> None:
    raw = b'{"traceEvents":[{"ph":"X","name":"a\xff\xfeb","pid":1,"tid":1,"ts":5,"dur":1}]}'
    t = assert_valid(di.load(write_json(tmp_path, "u.json", raw)))
    assert t.events.get_column("name").cast(str).to_list() == ["a??b"]
    assert dropped(t) == {"non-UTF-8 bytes replaced": 2}
    first = raw.index(b"\xff")
    assert any("2 bytes that are not UTF-8" in w and f"byte {first}" in w for w in t.meta["warnings"])


def test_non_utf8_bytes_only_where_the_reader_skips_are_left_alone(tmp_path: Path) -> None:
    """Bytes that are not UTF-8 in a value no table keeps (an event member the reader does not read) are never
    read again: nothing is repaired or reported, and the events are read as they are."""
    raw = b'{"traceEvents":[{"ph":"X","name":"a","pid":1,"tid":1,"ts":5,"dur":1,"note":"x\xff\xfey","args":{"k":1}}]}'
    t = assert_valid(di.load(write_json(tmp_path, "u.json", raw)))
    assert t.events.get_column("name").cast(str).to_list() == ["a"]
    assert t.events.get_column("args").to_list() == ['{"k":1}']
    assert "non-UTF-8 bytes replaced" not in dropped(t)
    assert not any("UTF-8" in w for w in t.meta["warnings"])


@pytest.mark.parametrize(
    "event, top, where",
    [
        (b'"args":{"k":"v\xfe"}', b"", "args"),
        (b'"args":{"k\xfe":1}', b"", "args"),
        (b'"cat":"c\xfe"', b"", "cat"),
        (b'"args":{"k":1}', b',"traceName":"r\xfe"', "traceName"),
        (b'"args":{"k":1}', b',"tr\xfeceName":1', "top-level key"),
    ],
)
def test_non_utf8_bytes_in_any_kept_text_repair_the_whole_file(
    tmp_path: Path, event: bytes, top: bytes, where: str
) -> None:
    """A text the trace keeps (args, a category, a top-level member) that is not UTF-8 has the whole document
    repaired, every such byte counted with the first one's offset, the skipped value's byte too."""
    raw = (
        b'{"traceEvents":[{"ph":"X","name":"a","pid":1,"tid":1,"ts":5,"dur":1,"note":"\xff",'
        + event
        + b"}]"
        + top
        + b"}"
    )
    t = assert_valid(di.load(write_json(tmp_path, "u.json", raw)))
    assert dropped(t)["non-UTF-8 bytes replaced"] == 2, where
    first = raw.index(b"\xff")
    assert any(f"2 bytes that are not UTF-8 replaced by '?' (first at byte {first})" in w for w in t.meta["warnings"])
    texts = t.events.get_column("args").to_list() + t.events.get_column("src_cat").cast(str).to_list()
    kept = "".join(text for text in texts if text) + json.dumps(t.meta["sources"][0]["info"], ensure_ascii=False)
    assert "\ufffd" not in kept and "\xfe" not in kept
    assert "?" in kept, where


def test_texts_equal_once_repaired_are_one_symbol(tmp_path: Path) -> None:
    """Two process names that differ only in bytes that are not UTF-8 are one process once repaired, as if the
    file had been written so."""
    raw = (
        b'{"traceEvents":[{"ph":"X","name":"a","pid":"p\xff","tid":1,"ts":5,"dur":1},'
        b'{"ph":"X","name":"b","pid":"p\xfe","tid":1,"ts":7,"dur":1}]}'
    )
    t = assert_valid(di.load(write_json(tmp_path, "u.json", raw)))
    assert t.locations.height == 1 and t.locations.get_column("process").to_list() == ["p?"]
    assert t.events.get_column("loc").to_list() == [0, 0]
    assert dropped(t)["non-UTF-8 bytes replaced"] == 2


def test_utf8_beyond_ascii_is_kept_as_written(tmp_path: Path) -> None:
    """Valid UTF-8 outside ASCII (two-, three- and four-byte characters) in names, args and top-level members is
    no damage: kept as written, nothing counted."""
    doc = trace_doc(
        {"ph": "X", "name": "µs 東京 🚀", "cat": "é", "pid": 1, "tid": 1, "ts": 5, "dur": 1, "args": {"unit": "°C"}},
        traceName="naïve",
    )
    path = tmp_path / "u.json"
    path.write_bytes(json.dumps(doc, ensure_ascii=False).encode())
    t = assert_valid(di.load(path))
    assert t.events.get_column("name").cast(str).to_list() == ["µs 東京 🚀"]
    assert t.events.get_column("src_cat").cast(str).to_list() == ["é"]
    assert t.events.get_column("args").to_list() == ['{"unit":"°C"}']
    assert t.meta["sources"][0]["info"]["traceName"] == "naïve"
    assert "non-UTF-8 bytes replaced" not in dropped(t)


def test_ids_beyond_int64(tmp_path: Path) -> None:
    t = assert_valid(di.load(kineto_file("hta_large_integer_trace/rank-70.Mar_25_20_48_12.2861.pt.trace.json.gz")))
    assert t.events.height == 2 and t.ranks == [70]
    assert '{"Comms Id":10159970886766084423}' in t.events.get_column("args").to_list()
    big = 2**64 - 1
    flow = {"cat": "c", "name": "f", "pid": 1}
    t = assert_valid(
        di.load(
            write_json(
                tmp_path,
                "ids.json",
                trace_doc(
                    {"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 5, "dur": 10},
                    {"ph": "X", "name": "b", "pid": 1, "tid": 2, "ts": 20, "dur": 10},
                    {"ph": "s", "id": big, "tid": 1, "ts": 6, **flow},
                    {"ph": "f", "bp": "e", "id": big, "tid": 2, "ts": 21, **flow},
                    {"ph": "s", "id": big - 1, "tid": 1, "ts": 7, **flow},  # a different flow: must not pair
                ),
            )
        )
    )
    assert t.flows.select("src", "dst", "id", "src_cat").rows() == [(0, 1, None, "c")]
    assert dropped(t) == {"flow starts without an end": 1}


def test_ts_beyond_int64_ns(tmp_path: Path) -> None:
    text = json.dumps(trace_doc(OK_EVENT)).replace(
        "]",
        ', {"ph":"X","name":"far","pid":1,"tid":1,"ts":99999999999999999,"dur":1},'
        ' {"ph":"X","name":"long","pid":1,"tid":1,"ts":5,"dur":1e30}]',
    )
    t = assert_valid(di.load(write_json(tmp_path, "far.json", text)))
    assert t.events.get_column("name").cast(str).to_list() == ["ok"]
    assert dropped(t) == {"ts or dur beyond int64 ns": 2}


def test_ts_plus_dur_beyond_int64_ns(tmp_path: Path) -> None:
    doc = trace_doc(OK_EVENT, {"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 9 * 10**15, "dur": 9 * 10**15})
    t = assert_valid(di.load(write_json(tmp_path, "sum.json", doc)))
    assert t.events.get_column("name").cast(str).to_list() == ["ok"]  # never an end_ns that wrapped negative
    ((reason, count),) = dropped(t).items()
    assert "beyond int64 ns" in reason and count == 1


def test_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "nope.json"
    with pytest.raises(FileNotFoundError, match="nope.json"):
        di.load(path)
    convert_fails(capsys, tmp_path, path)
    cli_fails(capsys, ["info", path], path)
    with pytest.raises(FileNotFoundError, match="no file matches"):
        di.load(str(tmp_path / "rank-*.json"))


def test_directory_without_traces(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "empty"
    folder.mkdir()
    (folder / "notes.txt").write_text("no traces here")
    with pytest.raises(di.UnknownFormatError, match="no trace files"):
        di.load(folder)
    convert_fails(capsys, tmp_path, folder)


def test_unknown_output_extension(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = write_json(tmp_path, "ok.json", trace_doc(OK_EVENT))
    out = tmp_path / "out.xyz"
    line = cli_fails(capsys, ["convert", src, "-o", out], out)
    assert "installed" in line and not out.exists()
    with pytest.raises(di.UnknownFormatError):
        di.save(di.load(src), out)


def test_gzip_members_and_a_short_size_trailer_lose_nothing(tmp_path: Path) -> None:
    """Concatenated gzip members (``cat a.gz b.gz``) are one document; the size
    trailer the reader sizes its buffer from is only the last member's, so the
    buffer must grow past it without losing bytes."""
    import gzip

    events = [
        {"ph": "X", "name": f"op{i}", "pid": 1, "tid": 1, "ts": i * 10, "dur": 5, "args": {"pad": "x" * 200}}
        for i in range(20_000)
    ]
    text = json.dumps(trace_doc(*events)).encode()
    cut = len(text) - 10  # the last member holds 10 bytes: its ISIZE says 10
    path = write_json(tmp_path, "members.json.gz", gzip.compress(text[:cut], 1) + gzip.compress(text[cut:]))
    t = assert_valid(di.load(path))
    assert t.events.height == len(events) and not t.meta["warnings"]
    assert t.events.get_column("name").to_list()[-1] == "op19999"


@pytest.mark.parametrize("backend", ["isal", "zlib"])
def test_gunzip_members_truncation_and_corruption_with_either_decompressor(
    backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bytes gunzipping yields, and its warnings, are the same with ISA-L and the
    standard library (where ISA-L is not installed)."""
    import gzip
    import io
    import random
    import sys

    from di.convert.gunzip import gunzip as _gunzip

    if backend == "zlib":
        monkeypatch.setitem(sys.modules, "isal", None)
    rng = random.Random(7)
    a = bytes(rng.getrandbits(8) for _ in range(300_000)) + b"a" * 500_000
    b = b"b" * 2_000_000
    whole = gzip.compress(a) + gzip.compress(b)

    def run(data: bytes) -> tuple[bytes, list[str]]:
        out, warnings = _gunzip(io.BytesIO(data))
        return out.tobytes(), warnings

    assert run(whole) == (a + b, [])
    cut = run(whole[: len(gzip.compress(a)) + 1000])  # the second member ends early
    assert cut[0].startswith(a) and len(cut[0]) < len(a + b)
    assert len(cut[1]) == 1 and "gzip stream truncated" in cut[1][0]
    bad = bytearray(whole)
    bad[len(bad) // 4] ^= 0xFF  # inside the first member's random bytes: its CRC check fails
    out, warnings = run(bytes(bad))
    assert len(out) <= len(a) and sum(x != y for x, y in zip(out, a)) <= 1
    assert len(warnings) == 1 and "gzip data corrupt" in warnings[0]


# Found by fuzzing (tests/test_fuzz.py, bench/fuzz.py): each the smallest input that raised a bare exception.


def test_escapes_orjson_refuses_are_kept_not_a_crash(tmp_path: Path) -> None:
    """A lone surrogate and an invalid escape in a name (fuzz: JSONDecodeError in decode_symbols)."""
    raw = (
        rb'{"traceEvents":[{"ph":"X","name":"a\ud800b","pid":1,"tid":1,"ts":5,"dur":1},'
        rb'{"ph":"X","name":"c\x41","pid":1,"tid":1,"ts":7,"dur":1}]}'
    )
    t = assert_valid(di.load(write_json(tmp_path, "esc.json", raw)))
    assert t.events.get_column("name").cast(str).to_list() == ["a?b", "c\\x41"]


@pytest.fixture
def di_written(tmp_path: Path) -> Path:
    """A 1-rank demo trace written by di's Chrome writer: it has diTrace and di_flow objects."""
    from di.demo import write_kineto_job

    paths = write_kineto_job(tmp_path / "job", ranks=1, steps=1, ops_per_step=3, straggler=None)
    di.save(di.load(paths[0]), tmp_path / "written.json")
    return tmp_path / "written.json"


def test_broken_di_flow_objects_restore_nothing(di_written: Path) -> None:
    """di_flow objects the scanner skips but that are not JSON, or hold a wrong type or a kind outside the
    vocabulary (fuzz: ComputeError / InvalidOperationError in with_di_flow): those flows keep what the
    reader finds itself."""
    text = di_written.read_text()
    whole = di.load(di_written)
    assert text.count('"di_flow":{"kind":"launch","id":') > 3
    for bad in (
        '"kind":"launch","id":4000R',
        '"kind":"launch","id":NaN',
        '"kind":"launch","id":"x"',
        '"kind":"bogus","id":7',
    ):
        text = text.replace('"di_flow":{"kind":"launch","id":', '"di_flow":{' + bad + ',"was":', 1)
    t = assert_valid(di.load(write_json(di_written.parent, "bad_flow.json", text)))
    assert t.flows.height == whole.flows.height and t.flows.get_column("kind").null_count() == 0


@pytest.mark.parametrize(
    "damage",
    [
        ('"locations":[{"pid":', '"locations":[{"pid":0.5,"x":'),  # fuzz: TypeError in ditrace.locations
        ('"series":[]', '"series":1.5'),
        ('"kind":"cpu_thread"', '"kind":"martian"'),
        ('"unit":"ns"', '"unit":"us"'),  # fuzz: an invalid trace (meta.json clock) returned
        ('"rank_source":"distributedInfo"', '"rank_source":7'),
    ],
    ids=["float-pid", "series-not-a-list", "unknown-location-kind", "clock-unit", "rank-source"],
)
def test_damaged_ditrace_is_ignored_and_said(di_written: Path, damage: tuple[str, str]) -> None:
    text = di_written.read_text()
    assert damage[0] in text
    t = assert_valid(di.load(write_json(di_written.parent, "bad.json", text.replace(damage[0], damage[1], 1))))
    assert t.events.height > 0
    assert any("diTrace" in w and "ignored" in w for w in t.meta["warnings"])


def test_sort_index_and_device_beyond_int32(tmp_path: Path) -> None:
    """Metadata with a sort index or a GPU pid no Int32 column holds (fuzz: ComputeError in apply_metadata)."""
    doc = trace_doc(
        {"ph": "M", "name": "thread_sort_index", "pid": 1, "tid": 1, "args": {"sort_index": 2**53 + 1}},
        {"ph": "M", "name": "process_sort_index", "pid": 1, "args": {"sort_index": -(2**40)}},
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 2**40, "tid": 7, "ts": 5, "dur": 1},
        OK_EVENT,
    )
    t = assert_valid(di.load(write_json(tmp_path, "big.json", doc)))
    assert t.events.height == 2 and t.locations.get_column("sort_index").null_count() == t.locations.height


@pytest.mark.parametrize("rank", [-5, 2**40, 1.5, "3"])
def test_distributed_info_rank_that_is_not_a_rank(tmp_path: Path, rank: Any) -> None:
    """fuzz: a negative or huge distributedInfo rank raised ComputeError (rank is an Int32 column)."""
    path = write_json(tmp_path, "rank-4.json", trace_doc(OK_EVENT, distributedInfo={"rank": rank, "world_size": -2}))
    t = assert_valid(di.load(path))
    assert t.ranks == [4] and t.meta["sources"][0]["rank_source"] == "file_name"
    assert any("distributedInfo rank" in w and "ignored" in w for w in t.meta["warnings"])
