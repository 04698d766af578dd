"""Log parsers: the numba table of dense ids (:mod:`di.convert.logs.idtable`, behind
:func:`di.convert.logs.ids.dense_ids`) numbers codes as polars does, and the NCCL parser gives the same tables with
it as without it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from conftest import DATA

from di.convert.logs import idtable, ids, nccl
from di.convert.logs.text import line_times, own_line_times, read_lines

LOGS = DATA / "logs"


def _codes() -> dict[str, pl.Series]:
    rng = np.random.default_rng(7)
    return {
        "repeats": pl.Series("h", rng.integers(0, 500, 20_000).astype(np.uint64)),
        "all distinct": pl.Series("h", rng.permutation(50_000).astype(np.uint64)),
        "one value": pl.Series("h", np.full(1000, 2**63 + 5, np.uint64)),
        "high bits only": pl.Series("h", (rng.integers(0, 300, 5000).astype(np.uint64) << np.uint64(40))),
        "hashes": pl.Series("h", [f"line {i % 777}" for i in range(9000)]).hash(),
        "int64 ids": pl.Series("code", rng.integers(0, 70, 3000), dtype=pl.Int64),
        "one row": pl.Series("h", [3], dtype=pl.UInt64),
        "empty": pl.Series("h", [], dtype=pl.UInt64),
    }


@pytest.mark.parametrize("case", list(_codes()))
def test_table_ids_are_polars_ids(case: str) -> None:
    """Each row's id and each id's first row, as ids.dense_ids gives them (ids in order of first row, u32)."""
    codes = _codes()[case]
    got_ids, firsts = idtable.dense_ids(codes)
    want_ids, want_firsts = ids._dense_ids_by_join(codes)
    assert got_ids.dtype == want_ids.dtype == pl.UInt32 and firsts.dtype == want_firsts.dtype
    assert got_ids.equals(want_ids, check_names=False) and firsts.equals(want_firsts, check_names=False)
    assert firsts.len() == codes.n_unique()


def _lines(path: Path) -> pl.DataFrame:
    lines = read_lines(path).lines
    own = own_line_times(lines)
    return lines.with_columns(line_times(lines, own), own)


SOURCES = [
    "nccl/nccltests_allreduce_nccl2.27.7_a100x2_debug_all.log",
    "nccl/torch_allreduce_bench_nccl2.10.3_a100_4node.log",
    "nccl/nccltests_allreduce_nccl2.27.7_a100x2_nvlink_fault.log",
    "training/megatron_deepspeed_ds0.7.3_gpt3moe_nccl2.10.3_2022.log",
]


@pytest.mark.parametrize("source", SOURCES)
def test_parser_gives_the_same_tables_with_the_table_as_without(source: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every output of parse_nccl (events, comms, comm_links, drops, info, claimed lines) is the same whether its ids
    come from the numba table (forced on every column of codes) or from polars."""
    path = LOGS / source
    if not path.is_file():
        pytest.skip(f"shared test data absent: logs/{source} not found under ../shared/data")
    lines = _lines(path)
    for name in ("NUMBA_MIN_ROWS", "NUMBA_ALONE_ROWS", "NUMBA_LOADED_ROWS"):
        monkeypatch.setattr(ids, name, 1 << 62)
    want = nccl.parse_nccl(lines)
    used = []
    real = idtable.dense_ids

    def counted(codes: pl.Series) -> tuple[pl.Series, pl.Series]:
        used.append(codes.len())
        return real(codes)

    for name in ("NUMBA_MIN_ROWS", "NUMBA_ALONE_ROWS", "NUMBA_LOADED_ROWS"):
        monkeypatch.setattr(ids, name, 0)
    monkeypatch.setattr(idtable, "dense_ids", counted)
    got = nccl.parse_nccl(lines)
    assert used, "the table numbered the codes"
    assert got.events.height and got.events.equals(want.events)
    assert got.tables.keys() == want.tables.keys()
    assert all(got.tables[name].equals(want.tables[name]) for name in want.tables)
    assert (got.dropped, got.info, got.epoch) == (want.dropped, want.info, want.epoch)
    assert got.claimed.equals(want.claimed)


SWITCH = r"""
import sys
from di.convert.logs import ids
assert "numba" not in sys.modules
print(ids._table_pays(1 << 20), ids._table_pays(ids.NUMBA_ALONE_ROWS))
import numba  # noqa: F401
print(ids._table_pays(ids.NUMBA_MIN_ROWS), ids._table_pays(ids.NUMBA_MIN_ROWS - 1))
from di.convert.logs import idtable  # noqa: F401  (the kernel loaded: a parse's heads used it)
print(ids._table_pays(ids.NUMBA_LOADED_ROWS), ids._table_pays(ids.NUMBA_LOADED_ROWS - 1))
"""


def test_the_table_waits_for_numba_or_a_large_log(tmp_path: Path) -> None:
    """Without numba imported, the table numbers codes only from NUMBA_ALONE_ROWS (numba's start is its to pay); with
    it, from NUMBA_MIN_ROWS; once its kernel is loaded, from NUMBA_LOADED_ROWS; and loading a small NCCL log leaves
    numba unimported."""
    out = subprocess.run([sys.executable, "-c", SWITCH], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "True", "True", "False", "True", "False"]
    log = tmp_path / "nccl.log"
    line = "h{h}:1:{t} [0] NCCL INFO AllReduce: opCount {i} sendbuff 0x1 recvbuff 0x2 count 4 datatype 7 op 0 root 0 comm 0xa stream 0x3"
    log.write_text("\n".join(line.format(h=i % 3, t=i % 5, i=i) for i in range(2000)) + "\n")
    small = "import di, sys; t = di.load(sys.argv[1]); print(t.collectives.height, 'numba' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", small, str(log)], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["2000", "False"]
