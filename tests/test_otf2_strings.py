"""OTF2 String definitions: read by a cfunc into one buffer, resolved by ref column by column (issue 16)."""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from conftest import otf2_archives

import di
from di.convert.otf2 import clib
from di.convert.otf2.globaldefs import read_global_definitions
from di.convert.otf2.stringdefs import StringBuffer, StringDefs, _string

otf2 = pytest.importorskip("otf2")
ARCHIVES = otf2_archives()


def _define(buf: StringBuffer, ref: int, text: bytes | None) -> None:
    """Call the String callback as the OTF2 library does."""
    keep = ctypes.create_string_buffer(text) if text is not None else None
    _string.ctypes(ctypes.c_void_p(buf.address), ref, ctypes.addressof(keep) if keep is not None else 0)


def test_the_callback_stores_texts_nulls_and_counts_what_does_not_fit() -> None:
    buf = StringBuffer(4, 16)
    for ref, text in ((7, b"alpha"), (3, None), (9, b""), (7, b"beta"), (11, b"does not fit in 16")):
        _define(buf, ref, text)
    assert buf.overflow() == (5, 9 + 18)  # five definitions, 27 bytes in all
    table = buf.table()
    assert table.gather(np.array([7, 3, 9, 11, 0])).to_list() == ["beta", None, "", None, None]  # 7: the last
    assert len(table) == 3


def test_bytes_that_are_not_utf8_become_replacement_characters() -> None:
    buf = StringBuffer(3, 64)
    for ref, text in ((0, b"ok"), (1, b"bad \xff\xfe end"), (2, "caf\u00e9".encode())):
        _define(buf, ref, text)
    assert buf.table().gather(np.arange(3)).to_list() == ["ok", "bad \ufffd\ufffd end", "caf\u00e9"]


def test_sparse_refs_and_python_tables() -> None:
    table = StringDefs.of({4_000_000_000: "far", 1: "near"})
    assert table.gather(np.array([1, 4_000_000_000, 2, -1])).to_list() == ["near", "far", None, None]
    assert StringDefs.of({}).gather(np.array([0, 1])).to_list() == [None, None]


@pytest.mark.skipif(not ARCHIVES, reason="shared test data absent: ../shared/data/otf2 not found")
@pytest.mark.parametrize("anchor", ARCHIVES, ids=[p.parent.name for p in ARCHIVES])
def test_strings_equal_the_official_reader_also_when_read_twice(anchor: Path) -> None:
    """Every string as the official reader gives it; with room for 8 bytes only, the second read finds them all."""
    with otf2.reader.open(str(anchor)) as tr:
        want = {s._ref: s.name for s in tr.definitions.strings}
    import _otf2

    for room in (anchor.with_suffix(".def").stat().st_size, 8):
        handle = _otf2.Reader_Open(str(anchor))
        try:
            got = read_global_definitions(clib.handle(handle), room).strings
        finally:
            _otf2.Reader_Close(handle)
        refs = np.array(sorted(want), np.int64)
        assert len(got) == len(want) and got.gather(refs).to_list() == [want[int(r)] for r in refs]


def test_a_string_per_event_round_trips(tmp_path: Path) -> None:
    """A trace whose every event has its own args text (as Kineto's): OTF2 and back, args equal."""
    from di.demo import write_kineto_job

    write_kineto_job(tmp_path / "job", ranks=2, steps=3)
    trace = di.load(tmp_path / "job")
    events = trace.events.with_columns(
        pl.format('{{"External id":{},"note":"caf\u00e9 \\"{}\\""}}', pl.int_range(pl.len()), pl.col("name")).alias(
            "args"
        )
    )
    assert events.get_column("args").n_unique() == events.height > 1000
    trace = di.Trace.build(meta=trace.meta, **{**trace.tables(), "events": events})
    di.save(trace, tmp_path / "t.otf2")
    back = di.load(tmp_path / "t.otf2")
    key = ["start_ns", "end_ns", "name"]
    assert back.events.sort(key).get_column("args").to_list() == events.sort(key).get_column("args").to_list()


def test_the_region_callback_stores_rows_and_counts_what_does_not_fit() -> None:
    from di.convert.otf2.regiondefs import RegionBuffer, _region
    from di.convert.otf2.stringdefs import OTHER

    strings, regions = StringBuffer(1, 8), RegionBuffer(2)
    strings.array[OTHER] = regions.address
    for ref in (5, 6, 7):  # ref, name, canonical name, description, role, paradigm, flags, source, begin, end
        _region.ctypes(ctypes.c_void_p(strings.address), ref, 10 + ref, 0, 20 + ref, 3, 4, 0, 0, 0, 0)
    assert regions.overflow() == 3
    assert regions.rows().tolist() == [[5, 15, 25, 3, 4], [6, 16, 26, 3, 4]]
    assert RegionBuffer(3).overflow() is None


@pytest.mark.skipif(not ARCHIVES, reason="shared test data absent: ../shared/data/otf2 not found")
def test_regions_past_the_counted_room_are_read_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """An archive counting fewer definitions than its regions: the second read has room for all of them."""
    import _otf2

    from di.convert.otf2 import regiondefs

    anchor = ARCHIVES[0]
    handle = _otf2.Reader_Open(str(anchor))
    try:
        want = read_global_definitions(clib.handle(handle), anchor.with_suffix(".def").stat().st_size).regions
    finally:
        _otf2.Reader_Close(handle)
    assert want.height > 1
    made = []

    class OneFirst(regiondefs.RegionBuffer):
        def __init__(self, regions: int) -> None:
            made.append(regions)
            super().__init__(1 if len(made) == 1 else regions)

    monkeypatch.setattr(regiondefs, "RegionBuffer", OneFirst)
    handle = _otf2.Reader_Open(str(anchor))
    try:
        got = read_global_definitions(clib.handle(handle), anchor.with_suffix(".def").stat().st_size).regions
    finally:
        _otf2.Reader_Close(handle)
    assert len(made) == 2 and got.equals(want)
