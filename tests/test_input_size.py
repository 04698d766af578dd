"""Bounded input: a gzip bomb is refused after its first bytes, with bounded memory and one line;
every reader stops at the input size limit, which a flag or keyword raises."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
import time
import zlib
from pathlib import Path

import pytest

import di
from di.convert import gunzip
from di.inputsize import (
    FALLBACK_LIMIT_BYTES,
    MIN_DEFAULT_LIMIT_BYTES,
    available_bytes,
    default_limit_bytes,
    limit_bytes,
    parse_size,
)
from di.errors import FormatError, InputTooLargeError
from conftest import kineto_file, otf2_archive

REPO = Path(__file__).resolve().parents[1]
RSS_MARGIN_BYTES = 300 << 20
"""Peak RSS a refused bomb may add over refusing a 1 KB file (inflating it whole takes over 1 GB)."""


def _bomb(path: Path, prefix: bytes, filler: bytes, compressed_bytes: int = 1_000_000) -> Path:
    """A gzip file of about ``compressed_bytes`` that inflates about 1000-fold: ``prefix`` then ``filler`` repeated."""
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    out = bytearray(c.compress(prefix))
    block = filler * ((1 << 20) // len(filler))
    while len(out) < compressed_bytes:
        out += c.compress(block)
    path.write_bytes(bytes(out + c.flush()))
    return path


def _run_di(*args: str) -> tuple[int, str, float, int]:
    """``python -m di ARGS`` in a fresh process: exit code, stderr, seconds, and its peak RSS in bytes
    (measured by a wrapper process whose only child it is)."""
    wrapper = (
        "import resource, subprocess, sys, time; t = time.monotonic(); "
        "p = subprocess.run([sys.executable, '-m', 'di', *sys.argv[1:]], capture_output=True, text=True); "
        "sys.stdout.write(f'{p.returncode} {time.monotonic() - t} {resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}\\n'); "
        "sys.stdout.write(p.stderr)"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "400"}
    out = subprocess.run(
        [sys.executable, "-c", wrapper, *args], capture_output=True, text=True, env=env, timeout=300
    ).stdout
    first, _, stderr = out.partition("\n")
    code, seconds, maxrss_kib = first.split()
    return int(code), stderr, float(seconds), int(maxrss_kib) * 1024


def test_sizes_parse_and_the_default_comes_from_meminfo(tmp_path: Path) -> None:
    assert parse_size("4G") == 4 << 30 and parse_size("500M") == 500 << 20 and parse_size("1.5GiB") == 3 << 29
    assert parse_size("64k") == 64 << 10 and parse_size("123") == 123 and parse_size("0") == 0
    for bad in ("", "G", "4X", "-1G", "four"):
        with pytest.raises(ValueError, match="not a size"):
            parse_size(bad)
    assert limit_bytes(0) is None and limit_bytes("0") is None and limit_bytes("2M") == 2 << 20 and limit_bytes(5) == 5
    with pytest.raises(ValueError):
        limit_bytes(-1)
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       32000000 kB\nMemFree:         1000000 kB\nMemAvailable:   20000000 kB\n")
    assert available_bytes(str(meminfo)) == 20000000 * 1024
    assert default_limit_bytes(str(meminfo)) == 10000000 * 1024
    meminfo.write_text("MemAvailable:   1000 kB\n")
    assert default_limit_bytes(str(meminfo)) == MIN_DEFAULT_LIMIT_BYTES
    missing = str(tmp_path / "absent")
    assert available_bytes(missing) is None
    assert (
        MIN_DEFAULT_LIMIT_BYTES
        <= default_limit_bytes(missing)
        <= max(FALLBACK_LIMIT_BYTES, os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    )
    assert limit_bytes(None) == default_limit_bytes()


def test_head_inflates_only_the_first_bytes(tmp_path: Path) -> None:
    bomb = _bomb(tmp_path / "zeros.gz", b"", b"\0")
    assert gunzip.head(bomb, 4096) == bytes(4096)
    plain = tmp_path / "plain.json"
    plain.write_bytes(b"[" + b" " * 10_000)
    assert gunzip.head(plain, 100) == b"[" + b" " * 99
    broken = tmp_path / "broken.gz"
    broken.write_bytes(b"\x1f\x8b" + bytes(50))
    assert gunzip.head(broken) == b""


def test_a_perfetto_file_is_refused_by_its_first_key() -> None:
    from di.convert.perfetto.sniff import first_field_ok

    assert first_field_ok(b"\x0a\x02\x08\x01") and first_field_ok(b"\x10\x05") and first_field_ok(b"")
    for head in (bytes(16), b"\x0b", b"\x0e", b"\x80\x80", b"\xff" * 16):
        assert not first_field_ok(head), head


@pytest.mark.parametrize("name", ["bomb.json.gz", "bomb.pftrace"])
def test_a_gzip_bomb_is_refused_at_once_with_bounded_memory(tmp_path: Path, name: str) -> None:
    """1 MB of gzip that inflates to 1 GB of zeros: before, di inflated all of it (peak RSS
    1.3 GB as .json.gz, 2.1 GB as .pftrace) to find it is no trace."""
    small = _bomb(tmp_path / ("small-" + name), b"", b"\0", compressed_bytes=1000)
    bomb = _bomb(tmp_path / name, b"", b"\0")
    code0, _, _, base = _run_di("info", str(small))
    code, err, seconds, peak = _run_di("info", str(bomb))
    assert code0 == 2 and code == 2, err
    assert len(err.strip().splitlines()) == 1 and str(bomb) in err and "Traceback" not in err, err
    assert peak - base < RSS_MARGIN_BYTES, (peak, base)
    assert seconds < 60, seconds


def test_a_json_bomb_stops_at_the_limit_the_flag_sets(tmp_path: Path) -> None:
    """'[' and 1 GB of spaces starts like JSON: inflating stops at the limit, and says how to raise it."""
    bomb = _bomb(tmp_path / "spaces.json.gz", b"[", b" ")
    small = _bomb(tmp_path / "small.json.gz", b"", b"\0", compressed_bytes=1000)
    _, _, _, base = _run_di("info", str(small))
    code, err, _, peak = _run_di("info", str(bomb), "--max-input-size", "64M")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert str(bomb) in err and "more than 64.0 MiB" in err and "--max-input-size" in err, err
    assert peak - base < RSS_MARGIN_BYTES, (peak, base)
    with pytest.raises(InputTooLargeError, match="decompresses to more than 1.0 MiB") as info:
        di.load(bomb, max_input_size="1M")
    assert info.value.limit_bytes == 1 << 20 and isinstance(info.value, FormatError)
    code, err, _, _ = _run_di("info", str(bomb), "--max-input-size", "lots")
    assert code == 2 and "not a size" in err and "Traceback" not in err


def test_the_flag_and_keyword_raise_the_limit(tmp_path: Path) -> None:
    from di.demo import write_kineto_job

    src = write_kineto_job(tmp_path / "job", ranks=2, steps=2)[0]
    padded = tmp_path / "padded.json.gz"
    padded.write_bytes(gzip.compress(src.read_bytes().rstrip() + b" " * (3 << 20)))
    plain = tmp_path / "padded.json"
    plain.write_bytes(gzip.decompress(padded.read_bytes()))
    expected = di.load(src).events.height
    for path in (padded, plain):
        with pytest.raises(InputTooLargeError, match="more than 1.0 MiB"):
            di.load(path, max_input_size="1M")
        assert di.load(path, max_input_size="8M").events.height == expected
        assert di.load(path, max_input_size=0).events.height == expected
    code, err, _, _ = _run_di("info", str(padded), "--max-input-size", "1M")
    assert code == 2 and "more than 1.0 MiB" in err
    code, err, _, _ = _run_di("info", str(padded), "--max-input-size", "8M")
    assert code == 0, err


def test_perfetto_store_and_otf2_readers_are_bounded(tmp_path: Path) -> None:
    from di.demo import write_kineto_job

    trace = di.load(write_kineto_job(tmp_path / "job", ranks=2, steps=2)[0])
    pf = tmp_path / "job.pftrace"
    di.save(trace, pf)
    gz = tmp_path / "job.pftrace.gz"
    gz.write_bytes(gzip.compress(pf.read_bytes()))
    store = tmp_path / "job.di"
    di.save(trace, store)
    for path in (pf, gz, store):
        with pytest.raises(InputTooLargeError, match="more than 1.0 KiB"):
            di.load(path, max_input_size="1K")
        assert di.load(path).events.height == trace.events.height
    anchor = otf2_archive("pipit_ping-pong-otf2")
    with pytest.raises(InputTooLargeError, match="archive of more than 1.0 KiB"):
        di.load(anchor, max_input_size="1K")


def test_real_traces_load_under_the_default_limit() -> None:
    path = kineto_file("hta_trace_filter/sampled_rank-0.json.gz")
    started = time.monotonic()
    assert di.load(path).events.height > 0
    assert time.monotonic() - started < 120
    assert di.load(otf2_archive("pipit_ping-pong-otf2")).events.height > 0
