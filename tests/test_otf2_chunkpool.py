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


@pytest.mark.parametrize(
    "fixed, default, expected",
    [(None, 1 << 22, 1 << 22), (1 << 20, 1 << 22, 1 << 20), (16 << 20, 1 << 22, 1 << 22), (1 << 20, 1 << 18, 1 << 18)],
)
def test_chunks_are_1_mib_only_where_such_blocks_are_mapped_alone(
    fixed: int | None, default: int, expected: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``di convert`` fixes glibc's mmap threshold at 1 MiB: its archives get 1 MiB chunks. A library caller keeps
    glibc's rising threshold (1 MiB chunks would come from the heap, resident) and the reading commands' 16 MiB
    maps no 1 MiB block alone: both keep 4 MiB; a smaller chunk asked for stays as it is."""
    from di import process
    from di.convert.otf2 import writer

    monkeypatch.setattr(process, "_FIXED_THRESHOLD", [fixed])
    assert writer.chunk_size(default) == expected


def test_di_convert_fixes_the_threshold_it_writes_archives_under(tmp_path: Path) -> None:
    """The CLI records the threshold it fixed, in a process of its own (the setting is process-wide)."""
    import subprocess
    import sys

    code = (
        "import sys; from di.cli import main; from di import process; from di.convert.otf2 import writer\n"
        "main(['convert', sys.argv[1], '-o', sys.argv[2]])\n"
        "print(process._FIXED_THRESHOLD[0], writer.chunk_size(writer.CHUNK_EVENTS))"
    )
    from di.demo import write_kineto_job

    write_kineto_job(tmp_path / "job", ranks=2, steps=2)
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "job"), str(tmp_path / "t.otf2")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert out[-2:] == [str(1 << 20), str(1 << 20)]
    assert di.load(tmp_path / "t.otf2").events.height > 0
