"""Text logs: inputs on which the fast paths of the log reader once differed from the slow ones.

Each test builds a small file that the real samples do not hold (a text that starts like compressed data, a path
polars reads otherwise than the operating system, a caller's own series) and checks that the fast path reads what
the bytes path reads.
"""

from __future__ import annotations

import os
import zlib
from pathlib import Path

import polars as pl
import pytest

import di
from di.convert.logs.text import _read_bytes_lines, clean_lines, read_lines

TRAINING = "iteration       10/     100 | elapsed time per iteration (ms): 250.5 | lm loss: 6.123E+00 |\n"


def assert_read_as_bytes(path: Path | str) -> None:
    """``read_lines`` gives what the bytes path gives (lines, garbled counts, size)."""
    got, want = read_lines(path), _read_bytes_lines(Path(path), None)
    assert got.lines.equals(want.lines) and got.garbled == want.garbled and got.nbytes == want.nbytes


@pytest.mark.parametrize("start", [b"x^2 + y^2 fit\n", b"x\x01 control byte\n", b"BZh91AY&SY text\n"])
def test_text_that_starts_like_zlib_data_is_read_as_text(start: bytes, tmp_path: Path) -> None:
    """Polars reads a path whose first bytes are a zlib (or zstd) header as compressed data; a text log that starts
    with ``x^`` is read as its lines, not refused with a decompression error."""
    path = tmp_path / "run.log"
    path.write_bytes(start + TRAINING.encode() * 3)
    assert_read_as_bytes(path)
    assert read_lines(path).lines.get_column("text").to_list()[0] == start.decode().rstrip("\n")
    assert di.load(path).samples.height


@pytest.mark.parametrize(
    "compress", [zlib.compress, lambda b: b"\x28\xb5\x2f\xfd" + b"\x00" * 8 + b], ids=["zlib", "zstd"]
)
def test_compressed_data_other_than_gzip_is_not_unpacked(compress, tmp_path: Path) -> None:  # noqa: ANN001
    """Data that is zlib or zstd compressed is read as the bytes it is (garbled), never unpacked past the input
    size limit, which counts the file's own bytes."""
    path = tmp_path / "run.log"
    path.write_bytes(compress(TRAINING.encode() * 1000))
    assert_read_as_bytes(path)


def test_relative_path_starting_with_tilde_is_the_file_there(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A relative path ``~/run.log`` names the file in the folder ``~`` of the working directory (as ``open``
    reads it), not one in the home folder."""
    home, work = tmp_path / "home", tmp_path / "work"
    (home).mkdir()
    (work / "~").mkdir(parents=True)
    (home / "run.log").write_text("in the home folder\n")
    (work / "~" / "run.log").write_text(TRAINING)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(work)
    assert read_lines(Path("~/run.log")).lines.get_column("text").to_list() == [TRAINING.rstrip("\n")]
    assert_read_as_bytes("~/run.log")


def test_file_name_that_is_not_utf8(tmp_path: Path) -> None:
    """A file whose name is not UTF-8 (a str with surrogate escapes) is read like any other."""
    name = os.fsdecode(b"run\xff.log")
    try:
        (tmp_path / name).write_text(TRAINING)
    except (OSError, UnicodeEncodeError):
        pytest.skip("this file system takes no such name")
    assert_read_as_bytes(tmp_path / name)


def test_clean_lines_leaves_its_input_as_it_was() -> None:
    """Escapes are taken off the cleaned copy, not off the caller's series."""
    raw = pl.Series("text", ["\x1b[31mred\x1b[0m", "0: plain"])
    kept = raw.to_list()
    out = clean_lines(raw, whole="\n".join(kept))
    assert out.get_column("text").to_list() == ["red", "plain"] and raw.to_list() == kept


def test_pseudo_file_of_size_zero_is_read_whole() -> None:
    """A file whose size the file system gives as 0 (``/proc``) is read to its end, not as an empty log."""
    path = Path("/proc/self/status")
    if not path.is_file():
        pytest.skip("no /proc here")
    lines = read_lines(path).lines.get_column("text")
    assert lines.len() > 3 and lines.str.starts_with("Name:").any()


def test_dashed_rule_under_a_short_line_in_a_training_log(tmp_path: Path) -> None:
    """A training log that names its Slurm job id and prints a dashed rule under a short line loads its training
    lines (the rule is no sacct table)."""
    path = tmp_path / "run.log"
    path.write_text("SLURM_JOB_ID=4242\nepoch\n----- ----- -----\n" + TRAINING * 3)
    assert di.load(path).samples.height


def test_dashed_table_without_a_job_id_column_in_a_training_log(tmp_path: Path) -> None:
    """A table under a dashed rule whose header names no job id is no Slurm table: the training lines load."""
    path = tmp_path / "run.log"
    path.write_text("SLURM_JOB_ID=4242\nName  Value\n----- -----\n1     2\n" + TRAINING * 3)
    assert di.load(path).samples.height


def test_a_byte_order_mark_does_not_shift_the_first_line(tmp_path: Path) -> None:
    """sacct's fixed-width table saved by a Windows editor (a UTF-8 BOM first) reads as the same table without it,
    on the polars path and on the bytes path (gzip)."""
    import gzip

    table = (
        "JobID           JobName  Partition    Account  AllocCPUS      State ExitCode \n"
        "------------ ---------- ---------- ---------- ---------- ---------- -------- \n"
        "4242              train        gpu       proj         64  COMPLETED      0:0 \n"
    )
    plain = tmp_path / "sacct.txt"
    plain.write_text(table)
    want = di.load(plain)
    for name, data in (
        ("bom.txt", b"\xef\xbb\xbf" + table.encode()),
        ("bom.txt.gz", gzip.compress(b"\xef\xbb\xbf" + table.encode())),
    ):
        path = tmp_path / name
        path.write_bytes(data)
        lines = read_lines(path).lines.get_column("text")
        assert lines[0] == table.splitlines()[0]
        got = di.load(path)
        assert got.events.drop("args").equals(want.events.drop("args"))
        assert got.meta["sources"][0]["info"] == want.meta["sources"][0]["info"]
