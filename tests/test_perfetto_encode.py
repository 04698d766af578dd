"""The Perfetto writer's pieces that other tests reach only through whole traces: the eight-bytes-per-step
copy of the encoder and the di packet's column JSON written without a Python object per value."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import orjson
import polars as pl
import pytest
from numba import njit

from di.convert.perfetto.ditrace import _columns
from di.convert.bytewords import copy_bytes
from di.trace import Trace


@njit
def _copy(out: np.ndarray, pos: int, src: np.ndarray, a: int, b: int) -> int:
    """The encoder's copy of the args texts and interned names (an intrinsic: callable only from a kernel)."""
    return copy_bytes(out, pos, src, a, b)


def test_the_encoders_byte_copy_copies_every_length_at_every_offset() -> None:
    src = np.arange(1, 64, dtype=np.uint8)
    for length in range(0, 41):
        for a in range(0, 10):
            for pos in range(0, 10):
                out = np.zeros(64, dtype=np.uint8)
                end = _copy(out, pos, src, a, a + length)
                assert end == pos + length
                assert out[pos:end].tobytes() == src[a : a + length].tobytes()
                assert not out[:pos].any() and not out[end:].any(), (length, a, pos)


def test_di_packet_columns_are_the_json_orjson_writes_of_the_values() -> None:
    kinds = pl.Enum(["launch", "sync"])
    df = pl.DataFrame(
        {
            "id": pl.Series([1, 2, 3**30, -4], dtype=pl.Int64),
            "small": pl.Series([1, 2, 3, 4], dtype=pl.UInt8),
            "maybe": pl.Series([1, None, 3, None], dtype=pl.Int64),
            "text": pl.Series(['a"b\\c', None, "é\u2028😀", "\x01\n\t"], dtype=pl.String),
            "cat": pl.Series(["x", "y", None, "x"], dtype=pl.Categorical),
            "kind": pl.Series(["sync", "launch", "sync", None], dtype=kinds),
            "value": pl.Series([0.5, None, 1e300, -2.0], dtype=pl.Float64),
            "flag": pl.Series([True, False, None, True], dtype=pl.Boolean),
        }
    )
    expected = {
        c: df.get_column(c).cast(pl.String).to_list() if c in ("cat", "kind") else df.get_column(c).to_list()
        for c in df.columns
    }
    assert orjson.dumps(_columns(df), option=orjson.OPT_SERIALIZE_NUMPY) == orjson.dumps(expected)
    empty = df.head(0)
    assert orjson.loads(orjson.dumps(_columns(empty), option=orjson.OPT_SERIALIZE_NUMPY)) == {c: [] for c in df.columns}


def test_an_event_larger_than_the_buffer_grows_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The kernel stops on a packet that cannot fit in an empty buffer and says how much it needs."""
    from di.convert.perfetto import writer
    from tests.test_perfetto_roundtrip import _small, assert_same, round_trip

    monkeypatch.setattr(writer, "BUFFER_BYTES", 4096)
    t = _small([(0, 0, 1_000, "small"), (0, 2_000, 3_000, "huge"), (1, 0, 5_000, "x" * 9_000)])
    big_args = '{"text":"' + "é" * 20_000 + '"}'
    t = Trace.build(
        meta={},
        locations=t.locations,
        events=t.events.with_columns(args=pl.when(pl.col("name") == "huge").then(pl.lit(big_args))),
    )
    back = round_trip(t, tmp_path)
    assert_same(t, back)
    assert back.events.filter(pl.col("name") == "huge").get_column("args").to_list() == [big_args]


@pytest.mark.parametrize("buffer_bytes", [4096, 5000, 1 << 16])
def test_small_write_buffers_give_the_same_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, buffer_bytes: int
) -> None:
    """Buffers smaller than the di packet, of an odd size, or holding many packets: the file is the same, and reads back."""
    import di
    from di.convert.perfetto import writer
    from tests.perfetto_cases import generated_job

    trace = generated_job(tmp_path / "job", ranks=2, steps=2)
    writer.write_perfetto(trace, tmp_path / "ref.pftrace")
    monkeypatch.setattr(writer, "BUFFER_BYTES", buffer_bytes)
    writer.write_perfetto(trace, tmp_path / "x.pftrace")
    assert (tmp_path / "x.pftrace").read_bytes() == (tmp_path / "ref.pftrace").read_bytes()
    assert di.load(tmp_path / "x.pftrace").events.height == trace.events.height
