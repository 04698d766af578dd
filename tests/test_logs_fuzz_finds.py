"""Damage found by fuzzing the text-log readers (``python bench/fuzz.py --reader log``), each on a real log edited
the way the fuzzer did: the load keeps its contract (a trace that validates, what was left out counted by reason)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from conftest import DATA

import di

LOGS = DATA / "logs"


def edited(tmp_path: Path, rel: str, edit) -> Path:  # type: ignore[no-untyped-def]
    src = LOGS / rel
    if not src.is_file():
        pytest.skip(f"shared test data absent: logs/{rel} not found under ../shared/data")
    lines = src.read_text().split("\n")
    out = tmp_path / src.name
    out.write_text("\n".join(edit(lines)))
    return out


def dropped(trace: di.Trace) -> dict[str, int]:
    return trace.meta["sources"][0]["dropped"]


def test_nccl_tests_rows_before_any_test_name(tmp_path: Path) -> None:
    """The log cut above the first ``# Collective test starting`` line: the rows' series had no name (null), and
    the trace did not validate."""
    rel = "nccl/nccltests_h100_2node_alltoall_sendrecv_pair.log"
    path = edited(tmp_path, rel, lambda lines: lines[1:])
    trace = di.load(path)
    trace.validate()
    names = set(trace.series.get_column("name"))
    assert "nccl-tests.unnamed.size" in names and "nccl-tests.sendrecv.size" in names
    sizes = trace.samples.join(trace.series.filter(pl.col("name") == "nccl-tests.unnamed.size"), on="series")
    assert sizes.height == 10 and sizes.get_column("value").min() == 33554432


def test_nccl_tests_rank_line_with_a_number_beyond_int64(tmp_path: Path) -> None:
    rel = "nccl/nccltests_h100_2node_alltoall_sendrecv_pair.log"
    path = edited(tmp_path, rel, lambda lines: [x.replace("Rank  3 ", "Rank  99999999999999999999999 ") for x in lines])
    trace = di.load(path)
    trace.validate()
    info = trace.meta["sources"][0]["info"]["nccl_tests"]
    assert [r["rank"] for r in info["ranks"]] == [0, 1, 2, 4, 5, 6, 7]
    assert dropped(trace)["nccl_tests: rank lines with a number beyond int64"] == 1


def test_darshan_counters_and_segments_out_of_range(tmp_path: Path) -> None:
    """A counter value ``inf`` stopped the per-file statistics (a float to int64 cast); a DXT segment ending 1e23 s
    after the job's start (1e32 ns) stopped the load the same way; a counter row of rank -5 gave io_files a rank
    below -1."""

    def damage(lines: list[str]) -> list[str]:
        out, counter, segment, rank = [], False, False, False
        for x in lines:
            f = x.split("\t")
            if not counter and len(f) > 5 and f[3] == "POSIX_BYTES_WRITTEN":
                f[4], counter = "inf", True
            elif not rank and len(f) > 5 and f[3] == "POSIX_READS":
                f[1], rank = "-5", True
            elif not segment and "X_POSIX" in x:
                w = x.split()
                w[-2], segment = "99999999999999999999999", True  # 1e23 s: 1e32 ns
                x = "   ".join(w)
            out.append("\t".join(f) if len(f) > 1 else x)
        return out

    counters = di.load(edited(tmp_path, "darshan/pydarshan_ior_hdf5_example.darshan-parser.txt", damage))
    counters.validate()
    assert counters.io_files.get_column("rank").min() >= -1
    assert dropped(counters)["darshan: counter values that are not numbers"] == 1
    dxt = di.load(edited(tmp_path, "darshan/release_mpi-io-test-x86_64-3.1.4.dxt-parser.txt", damage))
    dxt.validate()
    assert dxt.events.height == 15 and dropped(dxt)["darshan: DXT segments with an unreadable number"] == 1


def test_a_rank_beyond_int32(tmp_path: Path) -> None:
    """A DXT segment of rank 4294967296 stopped the load in the trace's int32 rank column."""

    def damage(lines: list[str]) -> list[str]:
        at = next(i for i, x in enumerate(lines) if "X_POSIX" in x)
        lines[at] = lines[at].replace("X_POSIX       0", "X_POSIX       4294967296", 1)
        return lines

    trace = di.load(edited(tmp_path, "darshan/release_mpi-io-test-x86_64-3.1.4.dxt-parser.txt", damage))
    trace.validate()
    assert trace.events.height == 15 and trace.ranks == [0, 1, 2, 3]
    assert dropped(trace)["events with a rank outside 0..2147483647"] == 1


def test_megatron_iteration_times_beyond_int64(tmp_path: Path) -> None:
    """An elapsed time of 1e23 ms stopped the load (a float to int64 cast of the step's duration); so did a step
    number of 1e23 in a timed step line. The iteration line is dropped and counted; its samples stay."""
    rel = "training/megatron_lm_2021_gpt2_tp4pp4_4node_slurm.out"
    base = di.load(LOGS / rel) if (LOGS / rel).is_file() else None
    path = edited(
        tmp_path,
        rel,
        lambda lines: [x.replace("(ms): 1354.9 |", "(ms): 99999999999999999999999 |") for x in lines],
    )
    trace = di.load(path)
    trace.validate()
    steps = trace.events.filter(pl.col("cat") == "step")
    assert base is not None and steps.height == base.events.filter(pl.col("cat") == "step").height - 1
    assert "iteration 20" not in set(steps.get_column("name"))
    assert dropped(trace)["training: Megatron iteration lines with a negative time or one beyond int64 ns"] == 1
    ds_rel = "training/deepspeed_chat_sft_opt1.3b_2023.log"
    ds_base = di.load(LOGS / ds_rel)
    ds = di.load(
        edited(tmp_path, ds_rel, lambda lines: [x.replace("step=380,", "step=99999999999999999999999,") for x in lines])
    )
    ds.validate()
    names = set(ds.events.filter(pl.col("cat") == "step").get_column("name"))
    assert not any("9999" in n for n in names)  # the step numbers beyond int64 give no step
    assert 0 < len(names) <= ds_base.events.filter(pl.col("cat") == "step").height


def test_nccl_topology_and_level_damage(tmp_path: Path) -> None:
    """A tree's parent beyond int64 stopped the load (a strict cast); it is one topology edge dropped and counted.
    A level cut inside a character (``NCCL INF\\xef\\xbf``) stopped it too (a strict UTF-8 cast of the level's bytes);
    that line is no NCCL line."""
    rel = "nccl/nccltests_allreduce_nccl2.27.7_a100x2_debug_all.log"
    base = di.load(LOGS / rel) if (LOGS / rel).is_file() else None

    def damage(lines: list[str]) -> list[str]:
        at = next(i for i, x in enumerate(lines) if "NCCL INFO Trees [0] -1/-1/-1->1->0 " in x)
        lines[at] = lines[at].replace("[0] -1/-1/-1->1->0 ", "[0] -1/-1/-1->1->99999999999999999999999 ", 1)
        lines.insert(at, lines[at].split(" NCCL ")[0] + " NCCL INF\ufffd channel.cc:42 Cuda Alloc Size 1216")
        return lines

    trace = di.load(edited(tmp_path, rel, damage))
    trace.validate()
    assert base is not None and trace.comm_links.height <= base.comm_links.height
    assert dropped(trace)["nccl: topology edges with a number beyond int64"] == 1
    assert trace.collectives.height == base.collectives.height  # the cut level's line is no NCCL line, the rest load


def test_a_rank_tag_beyond_int64(tmp_path: Path) -> None:
    """``[Rank 99999999999999999999999]`` stopped the load (a strict cast of the tag's digits); the line's samples
    are dropped and counted, as those of any rank a trace cannot hold."""
    rel = "training/deepspeed_chat_sft_opt1.3b_2023.log"
    base = di.load(LOGS / rel) if (LOGS / rel).is_file() else None

    def damage(lines: list[str]) -> list[str]:
        at = next(i for i, x in enumerate(lines) if "[Rank 0] step=" in x)
        lines[at] = lines[at].replace("[Rank 0]", "[Rank 99999999999999999999999]")
        return lines

    trace = di.load(edited(tmp_path, rel, damage))
    trace.validate()
    n = dropped(trace)["samples with a rank outside 0..2147483647"]
    assert base is not None and n > 0 and trace.samples.height == base.samples.height - n


def test_nccl_init_line_with_a_rank_beyond_int64(tmp_path: Path) -> None:
    """A communicator init line whose rank is beyond int64 stopped the load; it is dropped and counted, and the
    other rank's init still gives its communicator."""
    rel = "nccl/nccltests_allreduce_nccl2.27.7_a100x2_debug_all.log"
    damage = lambda lines: [x.replace(" rank 1 nranks 2 ", " rank 99999999999999999999999 nranks 2 ") for x in lines]  # noqa: E731
    trace = di.load(edited(tmp_path, rel, damage))
    trace.validate()
    # rank 1's two ncclCommInitRankConfig lines (its start and its COMPLETE)
    assert dropped(trace)["nccl: communicator init lines with a number beyond int64"] == 2
    assert trace.comms.get_column("comm_rank").to_list() == [0]


def test_mlperf_time_ms_beyond_int64_ns(tmp_path: Path) -> None:
    """A ``time_ms`` beyond int64 ns stopped the load (a strict cast of its digits); 9999999999999 ms wrapped when
    made ns. Such a line has no time of its own."""
    line = ':::MLLOG {{"namespace": "", "time_ms": {}, "event_type": "POINT", "key": "eval_accuracy", "value": {}}}\n'
    path = tmp_path / "mlperf.log"
    path.write_text(line.format("99999999999999999999999", 0.5) + line.format(1700000000000, 0.6))
    trace = di.load(path)
    trace.validate()
    assert trace.samples.get_column("ts_ns").to_list() == [1700000000000000000] * 2  # the nearest line's time
    path.write_text(line.format(9999999999999, 0.5))
    assert di.load(path).samples.get_column("ts_ns").to_list() == [0]  # no time: relative


def test_numbers_beyond_int64_in_a_nccl_trace_time_and_a_dcgmi_entity_id(tmp_path: Path) -> None:
    """A NCCL TRACE line's milliseconds beyond int64 ns, and a ``dcgmi dmon`` row's entity id beyond int64, stopped the
    load (strict casts); such lines are not read as their family's and are counted as unknown lines."""
    unknown = "unknown lines (no log family understood them)"
    nccl = tmp_path / "trace.log"
    nccl.write_text(
        "node1:123:456 [0] 99999999999999999999999.123456 x.cc:10 NCCL TRACE hello\n"
        "node1:123:456 [0] 1.5 x.cc:10 NCCL TRACE hello again\n"
    )
    trace = di.load(nccl)
    trace.validate()
    assert dropped(trace)[unknown] == 1
    dcgm = tmp_path / "dcgm.log"
    dcgm.write_text(
        "#Entity   POWER     GTEMP\nID\nGPU 99999999999999999999999     63.123    36\nGPU 1     61.000    35\n"
    )
    trace = di.load(dcgm)
    trace.validate()
    assert dropped(trace)[unknown] == 1 and sorted(trace.series.get_column("name")) == ["dcgm.GTEMP", "dcgm.POWER"]
