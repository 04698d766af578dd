"""``di record``'s io_files split by module as Darshan splits them: stdio calls under STDIO, the others under POSIX.

A real C program (tests/programs/stdio_and_posix.c) writes file A with write() and reads it back with fread(),
writes file B with fwrite() and reads it with read(): each file has a POSIX row and a STDIO row, each holding
exactly the calls the program made through that interface (glibc's stdio reaches the kernel through internal
calls that the shim does not see, so nothing is counted twice).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import polars as pl
import pytest
from capture_helpers import PROGRAMS, di_cmd, run

import di
from di.capture.iostats import SIZE_BINS


def sizes(**counts: int) -> dict[str, int]:
    return {b: counts.get(b, 0) for b in SIZE_BINS}


EXPECTED = {  # (module, file) -> opens, reads, writes, syncs, bytes read, bytes written, read sizes, write sizes
    ("POSIX", "A"): (1, 0, 3, 1, 0, 3 * 4096, sizes(), sizes(**{"1K-10K": 3})),
    ("STDIO", "A"): (1, 2, 0, 0, 2000, 0, sizes(**{"100-1K": 2}), sizes()),
    ("STDIO", "B"): (1, 0, 5, 0, 0, 5 * 200, sizes(), sizes(**{"100-1K": 5})),
    ("POSIX", "B"): (1, 1, 0, 0, 512, 0, sizes(**{"100-1K": 1}), sizes()),
}


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[di.Trace, Path]:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler (cc) to build the test program")
    tmp = tmp_path_factory.mktemp("modules")
    exe = tmp / "stdio_and_posix"
    subprocess.run([cc, "-O1", "-o", str(exe), str(PROGRAMS / "stdio_and_posix.c")], check=True, timeout=120)
    out = tmp / "run.di"
    proc = run(di_cmd("record", "--io", "-o", str(out), "--", str(exe), str(tmp / "A"), str(tmp / "B")), tmp)
    assert proc.returncode == 0, proc.stderr
    return di.load(out), tmp


def test_each_file_has_a_posix_and_a_stdio_row_with_the_calls_made_through_each(recorded) -> None:
    trace, tmp = recorded
    files = trace.io_files.filter(pl.col("file").is_in([str(tmp / "A"), str(tmp / "B")]))
    got = {
        (r["module"], Path(r["file"]).name): (
            r["opens"],
            r["reads"],
            r["writes"],
            r["syncs"],
            r["bytes_read"],
            r["bytes_written"],
            r["read_sizes"],
            r["write_sizes"],
        )
        for r in files.iter_rows(named=True)
    }
    assert got == EXPECTED
    assert (files.get_column("meta_time_ns") > 0).all()  # every row opened and closed its file
    assert files.select(((pl.col("reads") > 0) == (pl.col("read_time_ns") > 0)).all()).item()
    whole = trace.io_files
    assert whole.select("module", "rank", "file").equals(whole.select("module", "rank", "file").sort(pl.all()))


def test_the_split_rows_come_back_from_otf2_and_chrome(recorded, tmp_path: Path) -> None:
    trace, _ = recorded
    for ext in ("otf2", "json"):
        di.save(trace, tmp_path / f"run.{ext}")
        assert di.load(tmp_path / f"run.{ext}").io_files.equals(trace.io_files), ext


def test_an_older_recording_without_modules_still_reads_and_shows(recorded, tmp_path: Path) -> None:
    """A store written before the split holds null modules: it loads, and the report names them "di record"."""
    from di.cli import main

    trace, _ = recorded
    old = trace.__class__.build(
        meta=trace.meta, **{**trace.tables(), "io_files": trace.io_files.with_columns(module=None)}
    )
    di.save(old, tmp_path / "old.di")
    assert di.load(tmp_path / "old.di").io_files.get_column("module").null_count() == trace.io_files.height
    assert main(["report", str(tmp_path / "old.di"), "-o", str(tmp_path / "old.html"), "--no-plugins"]) == 0
    assert ">di record<" in (tmp_path / "old.html").read_text(encoding="utf-8")
