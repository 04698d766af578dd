"""nvidia-smi's clock: a log is on the Unix epoch where every reading is dated (``--query-gpu``'s timestamp, dmon
``-o DT``, ``-q``'s Timestamp), so it aligns with a job's traces by its times; else relative, its dated readings
counted from the first of them (not 56 years after the undated ones). Headers, unit lines and a ``-q`` report's
non-numeric lines are read, not counted as unknown."""

from __future__ import annotations

from pathlib import Path

import polars as pl

import di

S = 1_000_000_000
T0 = 1_704_110_401 * S  # 2024-01-01 12:00:01 UTC

DMON_DT = """\
#Date       Time        gpu    pwr  gtemp     sm   pclk
#YYYYMMDD   HH:MM:SS    Idx      W      C      %    MHz
 20240101   12:00:01      0     69     41      0    345
 20240101   12:00:02      0    632     59    100   1980
"""
DMON_T = """\
#Time        gpu    pwr     sm
#HH:MM:SS    Idx      W      %
 23:59:58      0     69      0
 23:59:59      0     70      0
 00:00:01      0    632    100
"""
QUERY = """\
timestamp, index, power.draw [W]
2024/01/01 12:00:01.000, 0, 69.00 W
2024/01/01 12:00:03.500, 0, 632.00 W
"""
Q_REPORT = """\
==============NVSMI LOG==============

Timestamp                                 : Mon Jan  1 12:00:05 2024
Driver Version                            : 590.48.01
Attached GPUs                             : 1
GPU 00000000:07:00.0
    Product Name                          : NVIDIA H100 80GB HBM3
    Persistence Mode                      : Enabled
    Temperature
        GPU Current Temp                  : 41 C
"""


def load(tmp_path: Path, name: str, text: str) -> tuple[di.Trace, dict]:
    p = tmp_path / name
    p.write_text(text)
    trace = di.load(p)
    return trace, trace.meta["sources"][0]


def times(trace: di.Trace, name: str) -> list[int]:
    s = trace.series.filter(pl.col("name") == name).get_column("series")
    return trace.samples.filter(pl.col("series").is_in(s.implode())).sort("ts_ns").get_column("ts_ns").to_list()


def test_dmon_with_date_and_time_is_on_the_epoch(tmp_path: Path) -> None:
    trace, src = load(tmp_path, "dmon.log", DMON_DT)
    assert trace.meta["clock"]["domain"] == "unix_epoch" and src["info"]["nvidia_smi"]["time"] == "timestamps"
    assert times(trace, "dmon.pwr") == [T0, T0 + S]
    assert src["dropped"] == {}  # the header and unit line are dmon's


def test_dmon_with_time_alone_keeps_its_spacing_across_midnight(tmp_path: Path) -> None:
    trace, src = load(tmp_path, "dmon_t.log", DMON_T)
    assert src["info"]["nvidia_smi"]["time"] == "relative"
    got = times(trace, "dmon.pwr")
    assert [t - got[0] for t in got] == [0, S, 3 * S]  # 23:59:58, 23:59:59, 00:00:01 the next day
    assert src["dropped"] == {}


def test_dated_and_undated_tables_in_one_log_share_a_relative_clock(tmp_path: Path) -> None:
    trace, src = load(tmp_path, "mixed.log", QUERY + "\n" + DMON_T)
    info = src["info"]["nvidia_smi"]
    assert info["time"] == "relative" and info["dated_from_ns"] == T0
    assert times(trace, "power.draw") == [0, 2_500_000_000]  # from the first dated reading
    assert max(trace.samples.get_column("ts_ns")) < 2 * 86_400 * S  # never the epoch's 1.7e18 beside seconds


def test_a_q_report_is_dated_and_read_whole(tmp_path: Path) -> None:
    trace, src = load(tmp_path, "q.txt", Q_REPORT)
    assert src["info"]["nvidia_smi"]["time"] == "timestamps"
    assert times(trace, "q.Temperature.GPU Current Temp") == [T0 + 4 * S]
    assert src["dropped"] == {}  # the driver version, product name and persistence mode are read, not unknown
