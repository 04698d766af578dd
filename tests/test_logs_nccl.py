"""Text logs: the reading layer (prefixes, colours, gzip, refusal) and NCCL debug logs.

Hand-built logs whose answer is known by construction, then the real NCCL logs
of ../shared/data/logs (skipped when absent).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import polars as pl
import pytest
from conftest import DATA

import di
from di.convert.logs.reader import families_in
from di.convert.logs.text import clean_lines
from di.convert.registry import connector_for
from di.errors import UnknownFormatError

LOGS = DATA / "logs"


def need(rel: str) -> Path:
    path = LOGS / rel
    if not path.is_file():
        pytest.skip(f"shared test data absent: logs/{rel} not found under ../shared/data")
    return path


NEW = """\
[rank1]: \x1b[32mhostb:200:201 [0] NCCL INFO ncclCommInitRankConfig comm 0xb1 rank 1 nranks 2 cudaDev 0 nvmlDev 0 busId 1b000 commId 0xfeed - Init START\x1b[0m
[rank0]: hosta:100:101 [0] NCCL INFO NCCL version 2.27.7+cuda12.9
[rank0]: hosta:100:101 [0] NCCL INFO ncclCommInitRankConfig comm 0xa1 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 1b000 commId 0xfeed - Init START
[rank0]: hosta:100:105 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0
[rank1]: hostb:200:205 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [send] via NET/IB/0
[rank0]: hosta:100:101 [0] NCCL INFO ncclCommInitRankConfig comm 0xa1 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 1b000 commId 0xfeed - Init COMPLETE
[rank1]: hostb:200:201 [0] NCCL INFO ncclCommInitRankConfig comm 0xb1 rank 1 nranks 2 cudaDev 0 nvmlDev 0 busId 1b000 commId 0xfeed - Init COMPLETE
[rank0]: hosta:100:101 [0] NCCL INFO AllReduce: opCount 0 sendbuff 0x1 recvbuff 0x2 count 1024 datatype 7 op 0 root 0 comm 0xa1 [nranks=2] stream 0x9
[rank0]: hosta:100:101 [0] NCCL INFO AllReduce: 4096 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..1}
[rank1]: hostb:200:201 [0] NCCL INFO AllReduce: opCount 0 sendbuff 0x1 recvbuff 0x2 count 1024 datatype 7 op 0 root 0 comm 0xb1 [nranks=2] stream 0x9
[rank1]: some other library's print
[rank0]: hosta:100:101 [0] NCCL INFO Broadcast: opCount 0 sendbuff 0x1 recvbuff 0x2 count 10 datatype 9 op 0 root 1 comm 0xa1 [nranks=2] stream 0x9
[rank1]: hostb:200:201 [0] NCCL INFO Broadcast: opCount 0 sendbuff 0x1 recvbuff 0x2 count 10 datatype 9 op 0 root 1 comm 0xb1 [nranks=2] stream 0x9
[rank1]: hostb:200:209 [0] NCCL WARN NET/IB : Got completion from peer 10.0.0.1<1234> with status=IBV_WC_RETRY_EXC_ERR(12)
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_prefixes_and_colours_are_stripped_vectorised() -> None:
    out = clean_lines(pl.Series(["0: a", "[rank3]: \x1b[31mred\x1b[0m", "[1,2]<stdout>:b", "  12: c\r", "x 1: y"]))
    assert out.get_column("prefix_rank").to_list() == [0, 3, 2, 12, None]
    assert out.get_column("text").to_list() == ["a", "red", "b", "c", "x 1: y"]


def test_sniffing_finds_nccl_and_nothing_in_other_text() -> None:
    assert families_in(NEW.encode()) == ["nccl"]
    assert families_in(b"hello\nworld\n") == []
    assert families_in(b"\x00\x01binary") == []


def test_new_nccl_log_gives_comms_links_collectives_and_warnings(tmp_path: Path) -> None:
    trace = di.load(write(tmp_path, "job.log", NEW))
    trace.validate()
    src = trace.meta["sources"][0]
    assert src["format"] == "log:nccl"
    nccl = src["info"]["nccl"]
    assert nccl["versions"] == ["2.27.7+cuda12.9"]
    # one comms row per rank and communicator; the version line came before rank 0's init, after rank 1's START
    assert set(trace.comms.select("comm", "rank", "host", "pid", "device", "bus_id", "state", "version").rows()) == {
        ("0xfeed", 0, "hosta", 100, 0, "1b000", "COMPLETE", "2.27.7+cuda12.9"),
        ("0xfeed", 1, "hostb", 200, 0, "1b000", "COMPLETE", "2.27.7+cuda12.9"),
    }
    links = trace.comm_links
    assert set(links.select("comm", "kind", "src_rank", "dst_rank", "transport", "via", "direction").rows()) == {
        ("0xfeed", "connection", 0, 1, "NET", "NET/IB/0", "send"),
        ("0xfeed", "connection", 1, 0, "NET", "NET/IB/0", "send"),
    }
    coll = trace.collectives.sort("rank", "seq")
    # opCount is 0 on every call: order comes from the lines, per (rank, comm)
    assert coll.select("rank", "seq", "op", "bytes", "dtype", "root", "group_size").rows() == [
        (0, 0, "allreduce", 4096, "float32", 0, 2),
        (0, 1, "broadcast", 20, "bfloat16", 1, 2),
        (1, 0, "allreduce", 4096, "float32", 0, 2),
        (1, 1, "broadcast", 20, "bfloat16", 1, 2),
    ]
    # the same call on both ranks is one instance
    assert coll.group_by("instance").len().get_column("len").to_list() == [2, 2]
    ev = trace.events
    args = json.loads(ev.row(int(coll.row(0, named=True)["event"]), named=True)["args"])
    assert (args["algo"], args["proto"], args["stream"]) == ("RING", "LL", "0x9")
    warn = ev.filter(pl.col("name") == "NCCL WARN")
    assert warn.height == 1 and warn.get_column("instant").all()
    assert "IBV_WC_RETRY_EXC_ERR" in warn.get_column("args")[0]
    assert src["dropped"] == {"unknown lines (no log family understood them)": 1}
    assert trace.meta["clock"]["domain"] == "relative"


def test_timestamps_place_lines_in_time_and_old_inits_pair_by_order(tmp_path: Path) -> None:
    text = "".join(
        f"[2025-01-02 03:04:0{i}.500] h:1:1 [{r}] NCCL INFO comm 0x{r}0 rank {r} nranks 2 cudaDev {r} busId {r}000 - Init COMPLETE\n"
        for i, r in enumerate((0, 1))
    )
    text += "".join(
        f"[2025-01-02 03:04:1{i}.000] h:1:1 [{r}] NCCL INFO AllGather: opCount {i} sendbuff 0x1 recvbuff 0x2 count 8 datatype 4 op 0 root 0 "
        f"comm 0x{r}0 [nranks=2] stream 0x5\n"
        for i, r in enumerate((1, 0))
    )
    trace = di.load(_gz(tmp_path / "old.log.gz", text))
    assert trace.meta["clock"]["domain"] == "unix_epoch"
    coll = trace.collectives.sort("rank")
    assert coll.get_column("comm").to_list() == ["n2#0", "n2#0"] and coll.get_column("instance").n_unique() == 1
    starts = trace.events.filter(pl.col("name") == "AllGather").sort("start_ns").get_column("start_ns").to_list()
    assert starts[1] - starts[0] == 1_000_000_000


def _gz(path: Path, text: str) -> Path:
    path.write_bytes(gzip.compress(text.encode()))
    return path


def test_a_text_file_of_no_family_is_refused_in_one_line(tmp_path: Path) -> None:
    path = write(tmp_path, "notes.log", "just some words\nnothing to see\n")
    with pytest.raises(UnknownFormatError) as err:
        di.load(path)
    assert "no log family" in str(err.value) and "\n" not in str(err.value)


def test_real_nccl_2_27_log_with_glued_lines() -> None:
    path = need("nccl/nccltests_allreduce_nccl2.27.7_a100x2_debug_all.log")
    assert connector_for(path).name == "log"
    trace = di.load(path)
    trace.validate()
    coll = trace.collectives
    assert coll.height == 990  # every COLL line, those glued to a table row too
    assert coll.get_column("comm").unique().to_list() == ["0x54fe282d32a87d85"]
    assert sorted(coll.group_by("rank").len().get_column("len").to_list()) == [495, 495]
    assert coll.get_column("instance").n_unique() == 495
    info = trace.meta["sources"][0]["info"]["nccl"]
    assert {t["via"] for t in info["transports"]} == {"P2P/direct pointer/read"}
    comms = trace.comms.sort("comm_rank")
    assert comms.select("comm_rank", "nranks", "host", "pid", "device", "bus_id", "nchannels", "state").rows() == [
        (0, 2, "mew0", 64904, 0, "17000", 24, "COMPLETE"),
        (1, 2, "mew0", 64904, 1, "65000", 24, "COMPLETE"),
    ]
    assert comms.get_column("version").unique().to_list() == ["2.27.7+cuda13.0"]
    links = trace.comm_links
    # 24 ring channels of 2 ranks: 0 -> 1 and 1 -> 0 each, from 'Channel NN/24 : 0 1' and 'Ring NN : a -> b -> c'
    ring = links.filter(pl.col("kind") == "ring")
    assert ring.height == 48 and set(ring.select("src_rank", "dst_rank").rows()) == {(0, 1), (1, 0)}
    # 2.27 'Tree N : parent -> me -> children': one edge per channel, rooted at 0 on channel 0 and at 1 on channel 10
    tree = {
        c: (s, d) for c, s, d in links.filter(pl.col("kind") == "tree").select("channel", "src_rank", "dst_rank").rows()
    }
    assert len(tree) == 24 and tree[0] == (1, 0) and tree[10] == (0, 1)
    assert links.get_column("transport").unique().to_list() == ["P2P"]


def test_real_nccl_2_10_multinode_log() -> None:
    trace = di.load(need("nccl/torch_allreduce_bench_nccl2.10.3_a100_4node.log"))
    comms = trace.comms
    assert comms.height == 32 and comms.get_column("nranks").unique().to_list() == [32]
    assert sorted(comms.get_column("rank").to_list()) == list(range(32))
    assert comms.select("comm", "nchannels", "version").unique().rows() == [("n32#0", 2, "2.10.3+cuda11.3")]
    assert comms.get_column("host").n_unique() == 4
    links = trace.comm_links
    assert set(links.get_column("transport").drop_nulls()) == {"NET", "P2P"}
    # network connections print both sides
    net = links.filter((pl.col("kind") == "connection") & (pl.col("transport") == "NET"))
    assert set(net.get_column("direction")) == {"send", "receive"}
    assert trace.ranks == list(range(32))
    tree = links.filter(pl.col("kind") == "tree")
    parent = {(c, r): p for c, r, p in tree.select("channel", "src_rank", "dst_rank").rows()}
    # 'Trees [0] 1/16/-1->0->-1 [1] 1/-1/-1->0->8' on rank 0: root on channel 0, child of 8 on channel 1
    assert (0, 0) not in parent and parent[(1, 0)] == 8 and parent[(0, 1)] == 0 and parent[(0, 16)] == 0
    # 'Channel 00/02 :    0   1 ...  19' lists only the first 20 of the ring of 32: 19 hops per channel, no wrap
    ring = links.filter(pl.col("kind") == "ring")
    assert ring.height == 38 and (ring.get_column("dst_rank") - ring.get_column("src_rank")).unique().to_list() == [1]
    assert trace.meta["sources"][0]["dropped"]["unknown lines (no log family understood them)"] > 0


def nccl_tests_series(trace: di.Trace) -> dict[str, tuple[str, list[float]]]:
    s = trace.series.join(trace.samples, on="series").sort("series", "ts_ns")
    return {
        n: (g.get_column("unit")[0], g.get_column("value").to_list())
        for (n,), g in s.group_by("name", maintain_order=True)
    }


def test_nccl_tests_rows_cut_by_nccl_lines_are_put_back_together(tmp_path: Path) -> None:
    text = (
        "# Collective test starting: all_reduce_perf\n#  Rank  0 Group  0 Pid   7 on  nodeA device  0 [0000:17:00] NVIDIA A100\n"
        "     1024   256   float   sum   -1nodeA:7:7 [0] NCCL INFO AllReduce: opCount 0 sendbuff 0x1 recvbuff 0x2 count 256 "
        "datatype 7 op 0 root 0 comm 0xa [nranks=1] stream 0x3\n"
        "nodeA:7:7 [0] NCCL INFO comm 0xa rank 0 nranks 1 cudaDev 0 busId 17000 - Init COMPLETE\n"
        "    10.5   0.10   0.10      0    9.5   0.11   0.11      0\n"
        "     2048   512   float   sum   -1    11.0   0.19   0.19      0   10.0   0.20   0.20    N/A\n"
        "# Avg bus bandwidth    : 0.15\n"
        "# Collective test starting: alltoall_perf\n"
        "     4096  1024  float  none   -1    20.0   0.20   0.15      0   21.0   0.19   0.14    N/A\n"
    )
    trace = di.load(write(tmp_path, "bench.log", text))
    trace.validate()
    s = nccl_tests_series(trace)
    assert s["nccl-tests.all_reduce.size"] == ("bytes", [1024.0, 2048.0])
    assert s["nccl-tests.all_reduce.busbw.out-of-place"] == ("GB/s", [0.10, 0.19])
    assert s["nccl-tests.all_reduce.time.in-place"] == ("us", [9.5, 10.0])
    assert s["nccl-tests.alltoall.algbw.in-place"] == ("GB/s", [0.19])
    info = trace.meta["sources"][0]["info"]["nccl_tests"]
    assert info["tests"] == ["all_reduce_perf", "alltoall_perf"] and info["avg_busbw_GBps"] == {"all_reduce_perf": 0.15}
    assert info["ranks"] == [
        {"rank": 0, "pid": 7, "host": "nodeA", "device": 0, "bus": "0000:17:00", "gpu": "NVIDIA A100"}
    ]
    assert trace.collectives.height == 1


def test_nccl_tests_avg_bus_bandwidth_without_a_number_is_counted(tmp_path: Path) -> None:
    """A garbled ``# Avg bus bandwidth`` value (found by fuzzing: it stopped the load with a cast error) is counted."""
    text = (
        "# Collective test starting: all_reduce_perf\n"
        "     1024   256   float   sum   -1    10.5   0.10   0.10      0    9.5   0.11   0.11      0\n"
        "# Avg bus bandwidth    : 1.2.3\n"
        "# Collective test starting: alltoall_perf\n"
        "     4096  1024  float  none   -1    20.0   0.20   0.15      0   21.0   0.19   0.14    N/A\n"
        "# Avg bus bandwidth    : 0.14\n"
    )
    source = di.load(write(tmp_path, "bench.log", text)).meta["sources"][0]
    assert source["info"]["nccl_tests"]["avg_busbw_GBps"] == {"alltoall_perf": 0.14}
    assert source["dropped"]["nccl_tests: Avg bus bandwidth lines without a number"] == 1


def test_real_nccl_tests_logs_healthy_and_degraded() -> None:
    good = di.load(need("nccl/nccltests_allreduce_nccl2.27.7_a100x2_debug_all.log"))
    bad = di.load(need("nccl/nccltests_allreduce_nccl2.27.7_a100x2_nvlink_fault.log"))
    peak = {
        name: max(nccl_tests_series(t)["nccl-tests.all_reduce.busbw.out-of-place"][1])
        for name, t in (("good", good), ("bad", bad))
    }
    assert len(nccl_tests_series(good)["nccl-tests.all_reduce.size"][1]) == 11  # every size, rows cut by NCCL lines too
    assert peak["good"] > 150 and peak["bad"] < 50  # 24 NVLink channels vs 2
    many = di.load(need("nccl/nccltests2.17.8_nccl2.29.2_h100_10node_80rank.log"))
    info = many.meta["sources"][0]["info"]["nccl_tests"]
    assert info["version"] == "2.17.8" and len(info["tests"]) == 5 and len(info["ranks"]) == 80
    assert info["rows"] == 50 and many.meta["sources"][0]["dropped"] == {}


def test_a_log_merges_with_a_trace_of_the_same_ranks(tmp_path: Path) -> None:
    trace_file = tmp_path / "rank0.json"
    trace_file.write_text(
        json.dumps({"traceEvents": [{"name": "k", "ph": "X", "ts": 1, "dur": 2, "pid": 1, "tid": 1}]})
    )
    job = di.load([trace_file, write(tmp_path, "job.log", NEW)])
    job.validate()
    assert job.ranks == [0, 1] and job.collectives.height == 4
    assert [s["format"] for s in job.meta["sources"]] == ["chrome", "log:nccl"]


def test_comms_and_comm_links_are_kept_by_the_store(tmp_path: Path) -> None:
    trace = di.load(need("nccl/torch_allreduce_bench_nccl2.10.3_a100_4node.log"))
    di.save(trace, tmp_path / "job.di")
    back = di.load(tmp_path / "job.di")
    assert back.comms.equals(trace.comms) and back.comm_links.equals(trace.comm_links)
    assert back.comms.height == 32
    # a store written before these tables existed has none of their rows, and loads
    (tmp_path / "job.di" / "comms.parquet").unlink()
    (tmp_path / "job.di" / "comm_links.parquet").unlink()
    old = di.load(tmp_path / "job.di")
    assert old.comms.height == 0 and old.events.height == trace.events.height


def test_non_ascii_text_glued_before_an_nccl_prefix_is_cut_at_bytes(tmp_path: Path) -> None:
    """str.find gives a byte offset: cut by characters, a line with a progress bar ("█") before its NCCL prefix lost
    its level and was dropped."""
    bar = "train \u2588\u2588\u2588\u2589 45% "
    glued = NEW.replace(
        "[rank1]: hostb:200:201 [0] NCCL INFO Broadcast", f"[rank1]: {bar}hostb:200:201 [0] NCCL INFO Broadcast"
    )
    assert glued != NEW
    trace = di.load(write(tmp_path, "glued.log", glued))
    coll = trace.collectives.sort("rank", "seq")
    assert coll.select("rank", "seq", "op").rows() == [
        (0, 0, "allreduce"),
        (0, 1, "broadcast"),
        (1, 0, "allreduce"),
        (1, 1, "broadcast"),
    ]
    # only "some other library's print" is unknown, as in the log without the bar
    assert trace.meta["sources"][0]["dropped"] == {"unknown lines (no log family understood them)": 1}


def test_coll_args_are_the_json_of_their_fields_with_escapes_nulls_and_tunings(tmp_path: Path) -> None:
    """A COLL event's args (opCount, the middle worked out once per kind of line, the line number) read back as the
    line's fields and are byte for byte polars' JSON of those fields: an opCount and a stream that JSON escapes, an
    opCount the regex layout cannot read (null), TUNING lines on two threads, an uninitialised comm."""
    h, h2 = "h1:10:11 [0] NCCL INFO ", "h1:10:12 [1] NCCL INFO "
    rows = [
        h + "comm 0xa1 rank 0 nranks 2 cudaDev 0 busId 1000 commId 0xbeef - Init COMPLETE",
        h2 + "comm 0xa2 rank 1 nranks 2 cudaDev 1 busId 2000 commId 0xbeef - Init COMPLETE",
        h
        + "AllReduce: opCount 0 sendbuff 0x1 recvbuff 0x2 count 12 datatype 7 op 0 root 0 comm 0xa1 [nranks=2] stream 0x3",
        h2
        + "AllReduce: opCount 0 sendbuff 0x1 recvbuff 0x2 count 12 datatype 7 op 2 root 0 comm 0xa2 [nranks=2] stream 0x3",
        h + "AllReduce: 48 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..1}",
        h2 + "AllReduce: 48 Bytes -> Algo TREE proto SIMPLE channel{Lo..Hi}={0..1}",
        h + 'AllReduce: opCount "q\\ sendbuff 0x1 recvbuff 0x2 count 12 datatype 7 op 0 root 0 comm 0xa1 stream 0x"3',
        h + "AllReduce: opCount zz sendbuff 0x1  recvbuff 0x2 count 12 datatype 7 op 0 root 0 comm 0xa1 stream 0x3",
        h + "Broadcast: opCount 1f sendbuff 0x1 recvbuff 0x2 count 5 datatype 9 op 0 root 1 comm 0xff stream 0x3",
    ]
    trace = di.load(write(tmp_path, "coll.log", "\n".join(rows) + "\n"))
    ev = trace.events.filter(pl.col("cat") == "nccl", ~pl.col("instant")).sort("start_ns")
    args = ev.get_column("args").to_list()
    parsed = [json.loads(a) for a in args]
    assert [a["opCount"] for a in parsed] == ["0", "0", '"q\\', None, "1f"]
    assert [(a["algo"], a["proto"]) for a in parsed] == [
        ("RING", "LL"),
        ("TREE", "SIMPLE"),
        (None,) * 2,
        (None,) * 2,
        (None,) * 2,
    ]
    assert [a["redop"] for a in parsed] == ["sum", "max", "sum", "sum", "sum"]
    assert [a["comm_rank"] for a in parsed] == [0, 1, 0, 0, None] and parsed[2]["stream"] == '0x"3'
    assert [a["line"] for a in parsed] == [2, 3, 6, 7, 8]
    # polars' own JSON of the same fields, in the same order
    again = pl.DataFrame(parsed, infer_schema_length=None).select(pl.struct(pl.all()).struct.json_encode())
    assert again.to_series().to_list() == args


def test_distinct_ids_by_hash_and_by_join_agree() -> None:
    """Ids of distinct values from one hash and a rank equal, up to renumbering, those of a join on the values, and
    the first row of each id holds its value (nulls, empty, binary)."""
    from di.convert.logs.text import distinct_ids, distinct_ids_by_join

    for values in (
        pl.Series(["b", "a", None, "b", "c", None, "a"]),
        pl.Series([b"x", b"y", b"x", b""], dtype=pl.Binary),
        pl.Series([], dtype=pl.String),
    ):
        ids, firsts = distinct_ids(values)
        ids_j, firsts_j = distinct_ids_by_join(values)
        assert firsts.len() == firsts_j.len() == values.n_unique() if values.len() else firsts.len() == 0
        assert values[firsts[ids]].eq_missing(values).all()
        assert values[firsts_j[ids_j]].eq_missing(values).all()
        # the same partition of the rows
        pairs = pl.DataFrame({"a": ids, "b": ids_j}).unique()
        assert pairs.height == firsts.len() and pairs.get_column("a").n_unique() == pairs.get_column("b").n_unique()


@pytest.mark.parametrize("bound", [7, 2**40])
def test_tuple_ids_are_one_id_per_distinct_tuple_packed_or_ranked_first(bound: int) -> None:
    """Rows' tuples of ids get one dense id per distinct tuple, and each id's first row holds it, whether the tuple
    packs in one u64 (small bounds) or the columns so far are ranked first (bounds whose product overflows it)."""
    from di.convert.logs.nccl import _tuple_ids

    a = pl.Series([3, 1, 3, 0, 1, 3], dtype=pl.UInt64)
    b = pl.Series([5, 2, 5, 5, 2, 6], dtype=pl.UInt64)
    c = pl.Series([0, 1, 0, 0, 2, 0], dtype=pl.UInt64)
    ids, firsts = _tuple_ids((a, bound), (b, bound), (c, bound))
    rows = pl.DataFrame({"a": a, "b": b, "c": c})
    assert len(firsts) == rows.unique().height == ids.n_unique()
    assert rows.gather(firsts[ids]).equals(rows)


def test_a_head_whose_numbers_overflow_is_no_nccl_head_and_its_line_is_counted(tmp_path: Path) -> None:
    """A head whose pid, tid or device is past int64 stopped the load with an internal error; its line is now left
    to the unknown lines (counted) and the file's other NCCL lines load."""
    lines = [
        "h1:10:99999999999999999999999 [0] NCCL INFO NCCL version 2.27.7",
        "h1:99999999999999999999999:11 [0] NCCL INFO Channel 00/0 : 0 1",
        "h1:10:11 [99999999999999999999999] NCCL INFO x",
        "h1:10:11 [0] NCCL INFO comm 0xa1 rank 0 nranks 2 cudaDev 0 busId 1000 commId 0xbeef - Init COMPLETE",
        "h1:10:11 [0] NCCL INFO AllReduce: opCount 0 sendbuff 0x1 recvbuff 0x2 count 4 datatype 7 op 0 root 0 comm 0xa1 stream 0x3",
    ]
    trace = di.load(write(tmp_path, "overflow.log", "\n".join(lines) + "\n"))
    src = trace.meta["sources"][0]
    # the first line is claimed as a version line (it names one); the next two are nobody's
    assert src["dropped"]["unknown lines (no log family understood them)"] == 2
    assert trace.collectives.height == 1 and trace.comms.get_column("pid").to_list() == [10]


def _line_messages(p: pl.DataFrame) -> tuple[pl.DataFrame, pl.Series]:
    """Every line its own message (what :func:`nccl._message_ids` gives where no two messages are equal)."""
    return p.hstack([pl.int_range(p.height, dtype=pl.UInt32, eager=True).alias("mid")]), p.get_column("msg")


REPEATED = NEW + NEW.replace("opCount 0", "opCount 1") + NEW * 3
"""The new log's messages repeated (a second run of the same calls, then the first again and again)."""


@pytest.mark.parametrize(
    "source",
    [
        "repeated",
        "thrice:nccl/nccltests_allreduce_nccl2.27.7_a100x2_debug_all.log",
        "nccl/nccltests_allreduce_nccl2.27.7_a100x2_debug_all.log",
        "nccl/torch_allreduce_bench_nccl2.10.3_a100_4node.log",
        "nccl/nccltests_allreduce_nccl2.27.7_a100x2_nvlink_fault.log",
    ],
)
def test_messages_parsed_once_per_distinct_message_give_what_each_line_gives(
    source: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Repeated lines cut once per distinct text, and each message kind searched and parsed once per distinct
    message, gathered back by text and message id, give the events, tables, drops and info of every line cut and
    parsed on its own."""
    from di.convert.logs import nccl
    from di.convert.logs.nccl import heads
    from di.convert.logs.text import read_lines

    if source == "repeated":
        path = write(tmp_path, "r.log", REPEATED)
    elif source.startswith("thrice:"):  # the same calls run again and again: every line three times
        path = write(tmp_path, "r.log", need(source.removeprefix("thrice:")).read_text() * 3)
    else:
        path = need(source)
    lines = read_lines(path).lines
    p, msgs = nccl._message_ids(nccl._prefixed(lines)[0])
    assert msgs.len() < p.height, "the log repeats messages"
    # a real log alone has about half its lines distinct: each is cut on its own
    assert ("lid" in p.columns) == (source == "repeated" or source.startswith("thrice:"))
    if "lid" in p.columns:
        assert p.get_column("lid").n_unique() < p.height, "lines cut once per distinct text"
    got = nccl.parse_nccl(lines)
    monkeypatch.setattr(nccl, "_message_ids", _line_messages)
    monkeypatch.setattr(heads, "_repeated_lines", lambda text: None)  # where _prefixed looks it up
    assert "lid" not in nccl._prefixed(lines)[0].columns
    want = nccl.parse_nccl(lines)
    assert got.events.equals(want.events) and got.events.height
    assert got.tables.keys() == want.tables.keys()
    assert all(got.tables[name].equals(want.tables[name]) for name in want.tables)
    assert (got.dropped, got.info, got.epoch) == (want.dropped, want.info, want.epoch)
    assert got.claimed.sort().equals(want.claimed.sort())


VERSIONS = [
    "hosta:1:1 [0] NCCL INFO NCCL version 2.27.7+cuda12.9",
    "hosta:1:1 [0] NCCL INFO RCCL version 2.18.3-dev NCCL version 2.1.1",
    "xNCCL version 9.9.9 hosta:1:2 [0] NCCL INFO NCCL version 2.27.7",
    "xNCCL version 9.9.9 hosta:1:2 [0] NCCL INFO a message without one",
    "Using NCCL version 2.10.3 (torch's print, no NCCL prefix)",
    "hosta:1:1 [0] NCCL INFO NCCL version x.y",
    "hosta:1:1 [0] NCCL WARN\tNCCL version 2.3.4",
    "bad head NCCL INFO NCCL version 2.5.6",
    "hosta:1:1 [0] NCCL INFO NCCL version 2.27.7+cuda12.9",
]


@pytest.mark.parametrize("source", ["hand-built", "nccl/torch_allreduce_bench_nccl2.10.3_a100_4node.log"])
def test_version_lines_searched_in_messages_are_those_of_the_whole_lines(source: str, tmp_path: Path) -> None:
    """``NCCL version`` found in an NCCL line's message (once per distinct message) or, where the head holds one or
    the line has no NCCL head, in the whole line: the lines and versions of a search of every whole line."""
    from di.convert.logs import nccl
    from di.convert.logs.text import read_lines

    path = write(tmp_path, "v.log", "\n".join(VERSIONS) + "\n") if source == "hand-built" else need(source)
    lines = read_lines(path).lines
    p, heads = nccl._prefixed(lines)
    p, msgs = nccl._message_ids(p)
    want = (
        lines.filter(pl.col("text").str.contains("CCL version ", literal=True))
        .select("line", pl.col("text").str.extract_groups(nccl.VERSION_RE).alias("g"))
        .unnest("g")
        .filter(pl.col("1").is_not_null() | pl.col("2").is_not_null())
    )
    got = nccl._version_lines(lines, p, msgs, heads, nccl._message_kinds(msgs)["version"])
    assert got.equals(want) and got.height
    if source == "hand-built":
        assert got.get_column("line").to_list() == [0, 1, 2, 3, 4, 6, 7, 8]
        assert got.get_column("1").to_list()[2:4] == ["9.9.9", "9.9.9"]


LINK_MESSAGES = [
    "Channel 00/0 : 1[1] -> 0[0] via P2P/direct pointer/read",
    "Channel 01/24 : 0[17000] -> 1[65000] [send] via NET/IB/0/GDRDMA",
    "Channel 02 : 3[3000] -> 0[0] [receive] via NET/Socket/1 comm 0x55b6aa64a990 nRanks 02",
    "Channel 03/0 : 0[0] -> 1[1] via P2P/CUMEM comm 0x1 comm 0x2",
    "Channel 04/0 : 0[0] -> 1[1] via  comm 0x1",
    "Channel 05/0 : 0[0] -> 1[1] via  comm 0x1 comm 0x2",
    "Channel 06/0 : 0[0] -> 1[1] via x comm 0x",
    "Channel 07/0 : 0[0] -> 1[1] via  comm 0",
    "Channel 08/0 : 0[0] -> 1[1] via ",
    "Channel 09/0 : 0[0] -> 1[1] [sent] via SHM/direct/direct",
    "Channel 10/0 : 0[0] ->  1[1] via SHM",
    "Channel 11/0 : 99999999999999999999999[0] -> 1[1] via SHM",
]
"""Link lines: with and without ``/nchannels`` and a direction, the ``via`` followed by ``comm 0x`` once, twice, at
its first character, cut short, empty, and lines a link's regex does not match."""


@pytest.mark.parametrize("ascii_only", [True, False])
def test_link_groups_are_the_link_regexs(ascii_only: bool) -> None:
    """:func:`nccl._link_groups` (the one-pass ASCII regex and the ``via`` cut after it, or :data:`nccl.LINK_RE`
    where a message is not ASCII) gives :data:`nccl.LINK_RE`'s groups."""
    from di.convert.logs import nccl

    msgs = LINK_MESSAGES if ascii_only else [*LINK_MESSAGES, "Channel 12/0 : 0[0] -> 1[1] via P2P é comm 0x1"]
    links = pl.DataFrame({"mid": range(len(msgs)), "msg": msgs})
    want = links.select("mid", pl.col("msg").str.extract_groups(nccl.LINK_RE).alias("g")).unnest("g")
    got = nccl._link_groups(links)
    assert got.equals(want)
    assert got.get_column("via").to_list()[2:8] == [
        "NET/Socket/1",
        "P2P/CUMEM",
        " comm 0x1",
        " comm 0x1",
        "x",
        " comm 0",
    ]


@pytest.mark.parametrize("source", ["hand-built", "nccl/nccltests_allreduce_nccl2.27.7_a100x2_debug_all.log"])
def test_message_kinds_are_those_of_one_search_each(source: str) -> None:
    """The kinds of the distinct messages found in one pass (:func:`nccl._message_kinds`) are those of a search of
    each kind's text and an anchored regex for the topology lines, also where texts overlap or share a space."""
    from di.convert.logs import nccl
    from di.convert.logs.text import read_lines

    if source == "hand-built":
        msgs = pl.Series(
            "msg",
            [
                "Init  Bytes -> Algo RING",  # two texts sharing no byte, one after the other
                "Init Bytes -> Algo RING",  # they overlap in their space: both found
                "AllReduce: opCount 0 ... Init COMPLETE NCCL version 2.3",
                "Channel",
                "Channel 00/02 : 0 1",
                "Channel! 00",
                "ChanneL 00",
                "Ring 00 : 1 -> 0 -> 1",
                "Ring",
                "Tree 0 : -1 -> 0 -> 1/-1/-1",
                "Tre",
                "Trees [0] 1/-1/-1->0->-1",
                " Channel 00",
                "Chänel ÿ Init ",
                "",
            ],
        )
    else:
        _, msgs = nccl._message_ids(nccl._prefixed(read_lines(need(source)).lines)[0])
    kinds = nccl._message_kinds(msgs)
    for kind, text in nccl.MESSAGE_TEXTS.items():
        assert kinds[kind].equals(msgs.str.contains(text, literal=True).alias(kind)), kind
    assert kinds["topology"].equals(msgs.str.contains("^(?:Channel |Ring |Tree)").alias("topology"))
    assert kinds["coll"].any() and kinds["topology"].any() and not kinds["topology"].all()


def _read(path: Path) -> pl.DataFrame:
    """``path``'s lines with their times, as :func:`di.convert.logs.reader.read_log` gives them to the parsers."""
    from di.convert.logs.text import line_times, own_line_times, read_lines

    lines = read_lines(path).lines
    own = own_line_times(lines)
    return lines.with_columns(line_times(lines, own), own)


UNREADABLE = """\
hosta:100:101 [0] NCCL INFO ncclCommInitRankConfig comm 0xa1 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 1b000 commId 0xfeed - Init COMPLETE
hosta:100:101 [0] NCCL INFO AllReduce: opCount 0 of a garbled call
hosta:100:101 [0] NCCL INFO Channel 00/0 : garbled
hosta:100:101 [0] NCCL INFO Ring 99999999999999999999999 : 0 -> 1 -> 0
"""
"""A COLL line and topology lines that none of their steps can read: those steps run to the end on them and give
empty tables of their own making."""
NEITHER = UNREADABLE.splitlines()[0] + "\n"
"""The same log without the COLL and topology lines: those steps are skipped."""


def test_skipped_steps_give_the_tables_the_steps_give(tmp_path: Path) -> None:
    """A log with no COLL line or no topology line skips the collectives' or the links' steps: its empty tables have
    the columns and types of those the steps give where all such lines are unreadable."""
    from di.convert.logs import nccl

    parsed = {}
    for name, text in (("unreadable", UNREADABLE), ("neither", NEITHER)):
        path = tmp_path / f"{name}.log"
        path.write_text(text)
        parsed[name] = nccl.parse_nccl(_read(path))
    ran, skipped = parsed["unreadable"], parsed["neither"]
    assert ran.dropped == {"COLL lines in an unknown layout": 1, nccl.TOPOLOGY_DROPPED: 1}
    assert not skipped.dropped
    assert ran.tables["comm_links"].height == skipped.tables["comm_links"].height == 0
    assert ran.tables["comm_links"].schema == skipped.tables["comm_links"].schema
    assert ran.tables["comms"].equals(skipped.tables["comms"])
    assert ran.events.schema == skipped.events.schema and ran.events.equals(skipped.events)
