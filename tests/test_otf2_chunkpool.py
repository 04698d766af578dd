"""The OTF2 writer's memory callbacks (di.convert.otf2.chunkpool): each buffer reuses its few chunks after every flush,
and what is written reads back the same."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

import di

pytest.importorskip("otf2")


def test_buffers_reuse_their_chunks_and_the_archive_reads_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With OTF2's smallest chunks (256 KiB), a string per event of 4 kB makes the global definitions several
    times what a buffer may hold, and a location's events more than one buffer: the library flushes and reuses the
    chunks (fewer chunks made than the bytes written need), and every event and args text comes back."""
    from di.convert.otf2 import chunkpool, writer
    from di.demo import write_kineto_job

    chunk = 256 * 1024
    monkeypatch.setattr(writer, "CHUNK_EVENTS", chunk)
    monkeypatch.setattr(writer, "CHUNK_DEFS", chunk)
    pools: list = []
    made_by = chunkpool.callback_data

    def kept() -> object:
        pools.append(made_by())
        return pools[-1]

    monkeypatch.setattr(chunkpool, "callback_data", kept)
    write_kineto_job(tmp_path / "job", ranks=2, steps=24)
    trace = di.load(tmp_path / "job")
    events = trace.events.with_columns(
        pl.format('{{"External id":{},"pad":"{}"}}', pl.int_range(pl.len()), pl.lit("x" * 4000)).alias("args")
    )
    trace = di.Trace.build(meta=trace.meta, **{**trace.tables(), "events": events})
    di.save(trace, tmp_path / "t.otf2")
    written = sum(f.stat().st_size for f in tmp_path.rglob("*") if f.is_file() and "job" not in f.parts)
    made = int(pools[0][chunkpool.CHUNKS_MADE])
    locations = trace.locations.height
    assert 0 < made <= chunkpool.CHUNKS * (2 * locations + 4)  # event and local definition buffers, global, anchor
    assert written > 3 * made * chunk  # the same chunks took the records again and again
    back = di.load(tmp_path / "t.otf2")
    key = ["start_ns", "end_ns", "name"]
    assert back.events.height == events.height
    assert back.events.sort(key).get_column("args").to_list() == events.sort(key).get_column("args").to_list()
