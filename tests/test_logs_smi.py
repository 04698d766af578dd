"""nvidia-smi output: --query-gpu CSV with and without header/units, dmon/pmon, -q.

Hand-built tables whose answer is known by construction, then the real
captures of ../shared/data/logs/nvidia-smi (skipped when absent).
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from conftest import DATA

import di

LOGS = DATA / "logs"


def need(rel: str) -> Path:
    path = LOGS / rel
    if not path.is_file():
        pytest.skip(f"shared test data absent: logs/{rel} not found under ../shared/data")
    return path


def by_gpu(trace: di.Trace) -> dict[tuple[str, str], tuple[str | None, list[float]]]:
    s = (
        trace.series.join(trace.locations.select("loc", pl.col("name").alias("gpu")), on="loc")
        .join(trace.samples, on="series")
        .sort("series", "ts_ns")
    )
    return {
        (g, n): (grp.get_column("unit")[0], grp.get_column("value").to_list())
        for (g, n), grp in s.group_by("gpu", "name", maintain_order=True)
    }


def load(tmp_path: Path, name: str, text: str) -> di.Trace:
    p = tmp_path / name
    p.write_text(text)
    trace = di.load(p)
    trace.validate()
    return trace


def test_query_gpu_csv_with_header_units_and_na(tmp_path: Path) -> None:
    text = (
        "timestamp, index, name, power.draw [W], utilization.gpu [%], clocks.sm [MHz], fan.speed [%]\n"
        "2025/01/02 03:04:05.000, 0, NVIDIA H100, 120.50 W, 97 %, 1980 MHz, [N/A]\n"
        "2025/01/02 03:04:05.001, 1, NVIDIA H100, 99.00 W, 3 %, 1410 MHz, [N/A]\n"
        "2025/01/02 03:04:06.000, 0, NVIDIA H100, 121.00 W, 98 %, 1980 MHz, [N/A]\n"
    )
    trace = load(tmp_path, "smi.csv", text)
    s = by_gpu(trace)
    assert s[("GPU 0", "power.draw")] == ("W", [120.5, 121.0]) and s[("GPU 1", "utilization.gpu")] == ("%", [3.0])
    assert ("GPU 0", "fan.speed") not in s and ("GPU 0", "name") not in s
    assert trace.meta["clock"]["domain"] == "unix_epoch"
    assert trace.meta["sources"][0]["info"]["nvidia_smi"]["not_available"] == 3
    ts = trace.samples.filter(pl.col("series") == 0).get_column("ts_ns").to_list()
    assert ts[1] - ts[0] == 1_000_000_000


def test_query_gpu_csv_nounits_header_takes_units_from_the_field(tmp_path: Path) -> None:
    text = "timestamp, index, temperature.gpu, memory.used\n2025/01/02 03:04:05.000, 0, 41, 11409\n"
    s = by_gpu(load(tmp_path, "smi.csv", text))
    assert s[("GPU 0", "temperature.gpu")] == ("C", [41.0]) and s[("GPU 0", "memory.used")] == ("MiB", [11409.0])


def test_noheader_rows_take_the_gpu_from_their_place_in_the_sample(tmp_path: Path) -> None:
    text = "".join(f"2025/09/08 14:14:{37 + k}.12{g}, {10 * g}, {1000 + k}\n" for k in range(3) for g in range(2))
    s = by_gpu(load(tmp_path, "gpu.csv", text))
    assert s[("GPU 1", "field_1")] == (None, [10.0, 10.0, 10.0]) and s[("GPU 0", "field_2")][1] == [
        1000.0,
        1001.0,
        1002.0,
    ]


def test_query_gpu_timestamps_shared_by_a_samples_gpus_and_na_cells_side_by_side(tmp_path: Path) -> None:
    # nvidia-smi -l prints one timestamp for all GPUs of a sample: each distinct one is read once, each row gets its own
    stamps = ["2025/01/02 03:04:05.250", "2025/01/02 03:04:06.250", "2025/01/02 03:04:07.250"]
    text = "timestamp, index, power.draw [W], fan.speed [%], clocks.mem [MHz]\n" + "".join(
        f"{t}, {g}, {100 + 10 * k + g}.5 W, [N/A], [Not Supported]\n" for k, t in enumerate(stamps) for g in range(4)
    )
    trace = load(tmp_path, "smi.csv", text)
    s = by_gpu(trace)
    assert s[("GPU 3", "power.draw")] == ("W", [103.5, 113.5, 123.5]) and ("GPU 0", "fan.speed") not in s
    assert trace.meta["sources"][0]["info"]["nvidia_smi"]["not_available"] == 2 * 12
    expected = pl.Series(stamps).str.to_datetime("%Y/%m/%d %H:%M:%S%.f", time_unit="ns").dt.epoch("ns").to_list()
    assert sorted(set(trace.samples.get_column("ts_ns").to_list())) == expected


def test_csv_rows_after_a_dmon_table_are_not_read_as_dmon_rows(tmp_path: Path) -> None:
    # a capture's dmon section, then --query-gpu rows with as many words as the dmon header has fields
    text = (
        "# gpu    pwr  gtemp     sm \n# Idx      W      C      % \n    0     69     41     12 \n    0     70     42     13 \n"
        "2025/09/08 14:14:37.120, 0, 11409\n2025/09/08 14:14:38.120, 0, 11410\n"
    )
    s = by_gpu(load(tmp_path, "mixed.log", text))
    assert s[("GPU 0", "dmon.sm")] == ("%", [12.0, 13.0]) and s[("GPU 0", "dmon.pwr")] == ("W", [69.0, 70.0])
    assert s[("GPU 0", "field_2")] == (None, [11409.0, 11410.0])


def test_dmon_and_pmon_tables(tmp_path: Path) -> None:
    text = (
        "# gpu    pwr  gtemp  mtemp     sm    mem   mclk   pclk \n# Idx      W      C      C      %      %    MHz    MHz \n"
        "    0     69     41     47      0      0   2619    345 \n    1     70     40     46      5      1   2619    345 \n"
        "    0     80     42     47     50      9   2619   1980 \n    1     71     40     46      -      1   2619    345 \n"
        "# gpu         pid   type     sm    mem    command \n# Idx           #    C/G      %      %    name \n"
        "    0       1234     C      90     10    python \n"
    )
    trace = load(tmp_path, "dmon.log", text)
    s = by_gpu(trace)
    assert s[("GPU 0", "dmon.pwr")] == ("W", [69.0, 80.0]) and s[("GPU 1", "dmon.sm")] == ("%", [5.0])
    assert s[("GPU 0", "pmon.sm (pid 1234)")] == ("%", [90.0])
    ts = trace.samples.filter(pl.col("series") == 0).get_column("ts_ns").to_list()
    assert ts == [0, 1_000_000_000]


def test_dmon_with_date_and_time_columns_is_placed_at_its_times(tmp_path: Path) -> None:
    text = (
        "#Date       Time        gpu    pwr     sm\n#YYYYMMDD   HH:MM:SS    Idx      W      %\n"
        " 20250908   14:14:37      0     69      -\n 20250908   14:14:37      1     70     12\n"
        " 20250908   14:14:38      0     71     13\n"
    )
    trace = load(tmp_path, "dmon_dt.log", text)
    s = by_gpu(trace)
    assert s[("GPU 0", "dmon.pwr")] == ("W", [69.0, 71.0]) and s[("GPU 0", "dmon.sm")] == ("%", [13.0])
    assert ("GPU 0", "dmon.gpu") not in s and ("GPU 0", "dmon.Date") not in s
    t0 = 1_757_340_877_000_000_000  # 2025-09-08 14:14:37 UTC
    assert sorted(set(trace.samples.get_column("ts_ns").to_list())) == [t0, t0 + 1_000_000_000]


def test_q_report_sections(tmp_path: Path) -> None:
    text = (
        "==============NVSMI LOG==============\n\nTimestamp                 : Tue Jul 14 08:12:38 2026\n"
        "Attached GPUs             : 2\nGPU 00000000:00:09.0\n    Product Name          : NVIDIA H100\n"
        "    GPU Power Readings\n        Average Power Draw    : 69.85 W\n        Instantaneous Power Draw : N/A\n"
        "    Temperature\n        GPU Current Temp      : 41 C\n"
        "GPU 00000000:00:0A.0\n    GPU Power Readings\n        Average Power Draw    : 70.00 W\n"
    )
    s = by_gpu(load(tmp_path, "q.txt", text))
    assert s[("GPU 0", "q.GPU Power Readings.Average Power Draw")] == ("W", [69.85])
    assert s[("GPU 0", "q.Temperature.GPU Current Temp")] == ("C", [41.0])
    assert s[("GPU 1", "q.GPU Power Readings.Average Power Draw")] == ("W", [70.0])


def test_real_noheader_timeseries() -> None:
    trace = di.load(need("nvidia-smi/query_gpu_timeseries_noheader_nounits_4gpu.csv"))
    trace.validate()
    counts = trace.series.join(trace.samples.group_by("series").len(), on="series").get_column("len").to_list()
    assert len(counts) == 8 and set(counts) == {97}  # 2 fields x 4 GPUs, 97 samples each
    assert trace.meta["sources"][0]["dropped"] == {}


@pytest.mark.parametrize(
    "name",
    [
        "capture_linux_h100_80gb_hbm3_drv590.48.01.txt",
        "capture_linux_h100_mig_drv590.48.01.txt",
        "capture_windows_rtx2080super_drv610.62.txt",
        "capture_linux_l40s_drv595.80.txt",
    ],
)
def test_real_captures_give_query_dmon_and_q_series(name: str) -> None:
    trace = di.load(need(f"nvidia-smi/{name}"))
    trace.validate()
    info = trace.meta["sources"][0]["info"]["nvidia_smi"]
    assert info["tables"] == ["query_gpu", "dmon_pmon", "q"] and info["not_available"] > 0
    names = set(trace.series.get_column("name").to_list())
    assert {"power.draw", "dmon.pwr"} <= names
    units = dict(trace.series.select("name", "unit").unique("name").iter_rows())
    assert units["power.draw"] == "W" and units["dmon.pwr"] == "W"


DCGMI = """\
#Entity   POWER     GTEMP  SMCLK  SMACT  FBUSD
ID
GPU 0     63.123    36     1410   0.512  1024
GPU 1     N/A       35     1410   0.000  0
GPU 0     250.500   41     1980   0.998  40960
GPU 1     61.000    35     1410   0.001  0
GPU-I 3   N/A       N/A    N/A    0.250  512
"""


def test_dcgmi_dmon_gives_series_per_gpu_with_units(tmp_path: Path) -> None:
    trace = load(tmp_path, "dcgm.log", DCGMI)
    trace.validate()
    src = trace.meta["sources"][0]
    assert src["format"] == "log:nvidia_smi" and src["info"]["nvidia_smi"]["tables"] == ["dcgmi_dmon"]
    got = by_gpu(trace)
    assert got[("GPU 0", "dcgm.POWER")] == ("W", [63.123, 250.5])
    assert got[("GPU 1", "dcgm.POWER")] == ("W", [61.0])  # N/A skipped
    assert got[("GPU 0", "dcgm.SMACT")] == ("ratio", [0.512, 0.998])
    assert got[("GPU 1", "dcgm.GTEMP")] == ("C", [35.0, 35.0])
    assert got[("GPU 0", "dcgm.FBUSD")] == ("MiB", [1024.0, 40960.0])
    # a MIG instance keeps its entity in the series name
    mig = [k for k in got if k[1].startswith("dcgm.SMACT (GPU-I 3)")]
    assert len(mig) == 1 and got[mig[0]][1] == [0.25]
    # one sample per second (dcgmi dmon -d 1000), from 0
    s = trace.series.filter(pl.col("name") == "dcgm.POWER").join(trace.samples, on="series")
    assert sorted(s.get_column("ts_ns").to_list()) == [0, 1_000_000_000, 1_000_000_000]  # GPU 1 N/A at 0 s


# Real `dcgmi dmon` output, not from ../shared/data. Source: NVIDIA DCGM User Guide, "Feature Overview", section
# "Profiling Metrics", Example 1, step 5 (https://docs.nvidia.com/datacenter/dcgm/latest/user-guide/feature-overview.html):
# `dcgmi dmon -e 1001,1004 -g 8` on an A100 with two MIG GPU instances, first 12 rows as printed there (older DCGM
# prints "# Entity" with a space and an indented "Id" line).
DCGMI_DOCS_MIG = """\
$ dcgmi dmon -e 1001,1004 -g 8
# Entity  GRACT  TENSO
      Id
    GPU 0  0.000  0.000
  GPU-I 0  0.000  0.000
  GPU-I 1  0.000  0.000
    GPU 0  0.000  0.000
  GPU-I 0  0.000  0.000
  GPU-I 1  0.000  0.000
    GPU 0  0.457  0.442
  GPU-I 0  0.534  0.516
  GPU-I 1  0.533  0.515
    GPU 0  0.845  0.816
  GPU-I 0  0.986  0.953
  GPU-I 1  0.985  0.952
"""
# Real `dcgmi dmon -e 1002` output on DCGM 4.2.3 with 8 GPUs, every SMACT value N/A (the first two samples). Source:
# GitHub issue NVIDIA/DCGM#244, "SM active cannot be collected when sampled alone, but becomes available when
# collected alongside other profiling metrics" (https://github.com/NVIDIA/DCGM/issues/244).
DCGMI_ISSUE_ALL_NA = "#Entity    SMACT\nID\n" + "".join(f"GPU {g}      N/A\n" for _ in range(2) for g in range(8))


def test_real_dcgmi_dmon_from_the_dcgm_docs_with_mig_instances(tmp_path: Path) -> None:
    trace = load(tmp_path, "dcgm_mig.log", DCGMI_DOCS_MIG)
    src = trace.meta["sources"][0]
    assert src["info"]["nvidia_smi"]["tables"] == ["dcgmi_dmon"]
    # the header and its "Id" line are read; only the shell prompt line is unknown
    assert src["dropped"] == {"unknown lines (no log family understood them)": 1}
    got = by_gpu(trace)
    assert got[("GPU 0", "dcgm.GRACT")] == ("ratio", [0.0, 0.0, 0.457, 0.845])
    assert got[("GPU 0", "dcgm.TENSO")] == ("ratio", [0.0, 0.0, 0.442, 0.816])
    mig = {n: v for (_, n), v in got.items() if "GPU-I" in n}
    assert mig["dcgm.GRACT (GPU-I 0)"] == ("ratio", [0.0, 0.0, 0.534, 0.986])
    assert mig["dcgm.TENSO (GPU-I 1)"] == ("ratio", [0.0, 0.0, 0.515, 0.952])
    assert len(mig) == 4
    # GPU 0 and its instances sampled once a second, four samples each, from 0
    ts = trace.series.filter(pl.col("name") == "dcgm.GRACT (GPU-I 1)").join(trace.samples, on="series")
    assert sorted(ts.get_column("ts_ns").to_list()) == [0, 1_000_000_000, 2_000_000_000, 3_000_000_000]


def test_real_dcgmi_dmon_whose_values_are_all_na_loads_and_counts_them(tmp_path: Path) -> None:
    trace = load(tmp_path, "dcgm_na.log", DCGMI_ISSUE_ALL_NA)  # refused as "no log family" before
    src = trace.meta["sources"][0]
    assert src["format"] == "log:nvidia_smi"
    assert src["info"]["nvidia_smi"]["tables"] == ["dcgmi_dmon"]
    assert src["info"]["nvidia_smi"]["not_available"] == 16
    assert not src.get("dropped")  # header, ID line and every row read
    assert trace.samples.height == 0


def test_dcgmi_na_cells_are_counted(tmp_path: Path) -> None:
    trace = load(tmp_path, "dcgm.log", DCGMI)
    assert trace.meta["sources"][0]["info"]["nvidia_smi"]["not_available"] == 4  # GPU 1 POWER, GPU-I 3's three


def test_a_dcgmi_entity_id_of_other_digits_is_a_garbled_row_not_a_crash(tmp_path: Path) -> None:
    # found by fuzzing: an id of Arabic-Indic digits matched \d, and its integer cast raised; the row is now unknown
    text = DCGMI_DOCS_MIG.replace("  GPU-I 1  0.533", "  GPU-I \u0661  0.533")
    trace = load(tmp_path, "dcgm_digits.log", text)
    src = trace.meta["sources"][0]
    assert src["dropped"] == {"unknown lines (no log family understood them)": 2}  # the prompt and that row
    mig = {n: v for (_, n), v in by_gpu(trace).items() if "GPU-I 1" in n}
    assert mig["dcgm.GRACT (GPU-I 1)"] == ("ratio", [0.0, 0.0, 0.985])  # its other three samples


def test_trailing_whitespace_decides_between_csv_and_dmon_rows(tmp_path: Path) -> None:
    # "0 71 ,  ": its only ", " is trailing whitespace, so it is a dmon row; "0 8,   9" holds a real one: CSV, not dmon;
    # a row led by a no-break space is a dmon row; a header-less row ending in whitespace keeps its last cell's unit
    text = (
        "# gpu    pwr     sm\n# Idx      W      %\n    0     70     12 \n0 71 ,  \n"
        "2025/09/08 14:14:37.120, 5, 6 W  \t\n0 8,   9\n\u00a00 72 13\n"
    )
    trace = load(tmp_path, "ws.log", text)
    s = by_gpu(trace)
    assert s[("GPU 0", "dmon.pwr")] == ("W", [70.0, 71.0, 72.0]) and s[("GPU 0", "dmon.sm")] == ("%", [12.0, 13.0])
    assert s[("GPU 0", "field_1")] == (None, [5.0]) and s[("GPU 0", "field_2")] == ("W", [6.0])
    pwr = trace.series.filter(pl.col("name") == "dmon.pwr").join(trace.samples, on="series")
    assert sorted(pwr.get_column("ts_ns").to_list()) == [0, 1_000_000_000, 2_000_000_000]


def test_q_report_with_a_busid_twice_shares_its_sections(tmp_path: Path) -> None:
    # the second block of GPU 00000000:00:09.0 carries on in the first block's section; a line before any GPU block is
    # not read; each report numbers its GPUs anew
    text = (
        "==============NVSMI LOG==============\nGPU 00000000:00:09.0\n    Clocks\n        SM : 1 MHz\n"
        "GPU 00000000:00:0A.0\n        SM : 5 MHz\nGPU 00000000:00:09.0\n        SM : 2 MHz\n    Clocks2\n"
        "        SM : 3 MHz\n    Fan : 3 %\n==============NVSMI LOG==============\n        SM : 9 MHz\n"
        "GPU 00000000:00:0A.0\n        SM : 7 MHz\n"
    )
    s = by_gpu(load(tmp_path, "q.txt", text))
    assert s[("GPU 0", "q.Clocks.SM")] == ("MHz", [1.0, 2.0]) and s[("GPU 0", "q.Clocks2.SM")] == ("MHz", [3.0])
    assert s[("GPU 1", "q.SM")] == ("MHz", [5.0]) and s[("GPU 0", "q.SM")] == ("MHz", [7.0])
    assert s[("GPU 0", "q.Fan")] == ("%", [3.0]) and len(s) == 5


def test_query_gpu_header_whose_first_field_is_a_series(tmp_path: Path) -> None:
    text = (
        "power.draw [W], index, temperature.gpu, clocks.sm [MHz]\n12.5 W, 0, 41, 1980 MHz\n[N/A], 1, 40, 1410 MHz\n"
        "13 W, 0, 42, [N/A]\n2025/01/02 03:04:05.000, 1, 2\nmemory.used, timestamp\n100, 2025/01/02 03:04:05.000\n"
        "  300 , 2025/01/02 03:04:07.000\n"
    )
    trace = load(tmp_path, "smi.csv", text)
    s = by_gpu(trace)
    assert s[("GPU 0", "power.draw")] == ("W", [12.5, 13.0]) and ("GPU 1", "power.draw") not in s
    assert s[("GPU 1", "clocks.sm")] == ("MHz", [1410.0]) and s[("GPU 0", "temperature.gpu")] == ("C", [41.0, 42.0])
    assert s[("GPU 0", "field_1")] == (None, [1.0]) and s[("GPU 0", "memory.used")] == ("MiB", [100.0, 300.0])
    assert trace.meta["sources"][0]["info"]["nvidia_smi"]["not_available"] == 2


def test_distinct_numbering_is_exact_when_hashes_collide(monkeypatch: pytest.MonkeyPatch) -> None:
    """Values are numbered by their hashes and checked: where all hashes collide the numbering falls back to a join,
    and either way each value's number leads back to it."""
    from di.convert.logs.smi.cells import distinct_codes

    values = pl.Series(["a", None, "b", "a", None, "c", "b"])
    for collide in (False, True):
        if collide:
            monkeypatch.setattr(pl.Series, "hash", lambda self, seed=0: pl.Series([0] * self.len(), dtype=pl.UInt64))
        code, distinct = distinct_codes(values)
        assert distinct.gather(code).eq_missing(values).all() and distinct.len() == 4
        assert code[0] == code[3] and code[1] == code[4] and code[2] == code[6] and len(set(code.tolist())) == 4


def test_a_timestamp_whose_only_comma_ends_the_line_is_no_row(tmp_path: Path) -> None:
    # "<time>, " holds ", " only as its last two characters, trailing whitespace: not a header-less row, so it neither
    # starts a sample nor takes a GPU's place in one
    text = (
        "2025/09/08 14:14:37.120, 0, 11409\n2025/09/08 14:14:37.121, 1, 10851\n2025/01/01 00:00:00, \n"
        "2025/09/08 14:14:37.122, 2, 10911\n"
    )
    trace = load(tmp_path, "gpu.csv", text)
    s = by_gpu(trace)
    assert s[("GPU 2", "field_2")] == (None, [10911.0]) and s[("GPU 1", "field_1")] == (None, [1.0]) and len(s) == 6
    assert trace.meta["sources"][0]["dropped"] == {"unknown lines (no log family understood them)": 1}


def test_a_cell_of_other_digits_is_skipped_not_an_error(tmp_path: Path) -> None:
    # NUM_RE's \d matches Arabic-Indic digits, which float parsing refuses: the cell holds no number (it stopped the
    # load with an internal error before)
    text = "# gpu    pwr     sm\n# Idx      W      %\n    0     \u0666\u0669     12\n    0     70     \u0661\n"
    s = by_gpu(load(tmp_path, "dmon.log", text))
    assert s[("GPU 0", "dmon.pwr")] == ("W", [70.0]) and s[("GPU 0", "dmon.sm")] == ("%", [12.0])
