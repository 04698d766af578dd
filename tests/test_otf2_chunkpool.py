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


def _mapped(address: int) -> bool:
    """Whether ``address`` lies in one of this process's mappings (/proc/self/maps)."""
    with open("/proc/self/maps") as fh:
        spans = (line.split(None, 1)[0].split("-") for line in fh)
        return any(int(lo, 16) <= address < int(hi, 16) for lo, hi in spans)


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="needs /proc/self/maps (Linux)")
def test_chunks_are_mapped_alone_kept_for_the_next_buffers_and_released() -> None:
    """Each chunk is a mapping of its own, whatever malloc's threshold (a block from malloc is not page-aligned: it
    follows malloc's header); a flush keeps the buffer's chunks for its next records; a deleted buffer's chunks
    (resident: the library wrote its end-of-chunk marker over them) take the next buffers' records, up to POOLED
    of them, the others are unmapped; release() unmaps the kept ones."""
    import ctypes

    import numpy as np

    from di.convert.otf2 import chunkpool, writer

    data = chunkpool.callback_data()
    allocate = ctypes.CFUNCTYPE(
        ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint8, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint64
    )(chunkpool.allocate.address)
    free_all = ctypes.CFUNCTYPE(None, ctypes.c_uint64, ctypes.c_uint8, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_bool)(
        chunkpool.free_all.address
    )
    size = writer.CHUNK_EVENTS
    buffers = np.zeros(3, dtype=np.uint64)  # three buffers' perBufferData

    def take(b: int) -> int:
        return allocate(data.ctypes.data, 0, 0, buffers.ctypes.data + 8 * b, size)

    def delete(b: int, final: bool = True) -> None:
        free_all(data.ctypes.data, 0, 0, buffers.ctypes.data + 8 * b, final)

    chunks = [[take(b) for _ in range(chunkpool.CHUNKS)] for b in range(3)]
    assert take(0) == 0  # the buffer holds its limit: the library must flush
    every = [c for cs in chunks for c in cs]
    assert all(c and c % 4096 == 0 for c in every) and len(set(every)) == len(every)
    assert all(_mapped(c) and _mapped(c + size - 1) for c in every)
    assert int(data[chunkpool.CHUNKS_MADE]) == len(every)
    ctypes.memset(chunks[0][0], 0xAB, size)  # the library's records
    delete(0, final=False)  # flushed: the same chunks take the next records
    assert [take(0) for _ in range(chunkpool.CHUNKS)] == chunks[0]
    for b in range(3):  # deleted: the first POOLED chunks are kept, the rest unmapped
        delete(b)
    assert int(buffers[0]) == 0
    kept, unmapped = every[: chunkpool.POOLED], every[chunkpool.POOLED :]
    assert all(_mapped(c) for c in kept) and not any(_mapped(c) or _mapped(c + size - 1) for c in unmapped)
    again = take(1)  # a new buffer takes a kept chunk: no new mapping
    assert again in kept and int(data[chunkpool.CHUNKS_MADE]) == len(every)
    delete(1)
    chunkpool.release(data)
    assert not any(_mapped(c) or _mapped(c + size - 1) for c in every)
