"""Bad input for the text-log connector: each case ends in its specific error or in counted drops."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

import di
from di.convert.registry import connector_for
from di.errors import InputTooLargeError, UnknownFormatError

NCCL_LINE = "h:1:1 [0] NCCL INFO AllReduce: opCount 0 sendbuff 0x1 recvbuff 0x2 count 4 datatype 7 op 0 root 0 comm 0xa [nranks=1] stream 0x3\n"


def test_binary_file_named_log_is_not_a_log(tmp_path: Path) -> None:
    path = tmp_path / "core.log"
    path.write_bytes(b"\x7fELF\x00\x00\x01" * 100)
    with pytest.raises(UnknownFormatError, match="no connector recognised"):
        di.load(path)


def test_json_trace_is_not_taken_for_a_log(tmp_path: Path) -> None:
    path = tmp_path / "trace.json"
    path.write_text('{"traceEvents": [{"name": "x", "ph": "X", "ts": 1, "dur": 1, "pid": 1, "tid": 1}]}')
    assert connector_for(path).name == "chrome"


def test_non_utf8_and_garbled_lines_are_kept_and_counted(tmp_path: Path) -> None:
    path = tmp_path / "x.log"
    path.write_bytes(
        NCCL_LINE.encode() + b"job name \xff\xfe broken\n" + b"h:1:1 [0] NCCL INFO AllReduce: opCount garbled\n"
    )
    trace = di.load(path)
    src = trace.meta["sources"][0]
    assert src["info"]["garbled_lines"] == {"lines with bytes that are not UTF-8": 1}
    assert src["dropped"]["nccl: COLL lines in an unknown layout"] == 1
    assert src["dropped"]["unknown lines (no log family understood them)"] == 1
    assert trace.collectives.height == 1


def test_coll_lines_with_garbled_numbers_are_dropped_and_counted(tmp_path: Path) -> None:
    """A COLL line of the usual layout whose count is not a number, whose datatype overflows, or which ends at its
    ``comm`` word (cut short) is dropped and counted (each raised an error); a garbled root is null on a line that
    loads."""
    bad = [
        NCCL_LINE.replace("count 4", "count 4a"),
        NCCL_LINE.replace("datatype 7", "datatype 99999999999999999999"),
        NCCL_LINE.replace("root 0", "root x"),
        NCCL_LINE.split(" 0xa ")[0] + "\n",
    ]
    path = tmp_path / "x.log"
    path.write_text(NCCL_LINE + "".join(bad))
    trace = di.load(path)
    assert trace.meta["sources"][0]["dropped"]["nccl: COLL lines in an unknown layout"] == 3
    assert trace.collectives.get_column("root").to_list() == [0, None]


def test_truncated_gzip_loads_what_came_before(tmp_path: Path) -> None:
    data = gzip.compress((NCCL_LINE * 2000).encode())
    path = tmp_path / "x.log.gz"
    path.write_bytes(data[: len(data) // 2])
    trace = di.load(path)
    assert 0 < trace.collectives.height < 2000


def test_input_size_limit_holds_for_logs(tmp_path: Path) -> None:
    path = tmp_path / "big.log.gz"
    path.write_bytes(gzip.compress((NCCL_LINE * 20000).encode()))
    with pytest.raises(InputTooLargeError):
        di.load(path, max_input_size="100K")


def test_empty_log_is_refused_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "empty.log"
    path.write_bytes(b"")
    with pytest.raises(UnknownFormatError) as err:
        di.load(path)
    assert "\n" not in str(err.value)


def test_real_kineto_traces_still_go_to_chrome() -> None:
    from conftest import kineto_files

    files = kineto_files()
    if not files:
        pytest.skip("shared test data absent: kineto/ not found under ../shared/data")
    assert {connector_for(p).name for p in files} == {"chrome"}
