"""Samplers read the same interfaces as on a real node, from stand-ins the tests build:
a /proc tree and a sysfs tree in a temp dir, and a C library with NVML's symbols
loaded in place of libnvidia-ml.so.1."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from capture_helpers import PROGRAMS, di_cmd, run

import di
from di.capture.samplers import SAMPLE
from di.capture.samplers.host import HostSource
from di.capture.samplers.infiniband import InfiniBandSource
from di.capture.samplers.network import NetworkSource

RATE_HZ = 20.0
SLEEP = [sys.executable, "-c", "import time; time.sleep(0.8)"]


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _ib_tree(root: Path, xmit_words: int) -> None:
    port = root / "mlx5_0" / "ports" / "1"
    _write(port / "counters" / "port_xmit_data", f"{xmit_words}\n")
    _write(port / "counters" / "port_rcv_data", f"{2 * xmit_words}\n")
    _write(port / "counters" / "port_xmit_packets", "77\n")
    _write(port / "hw_counters" / "out_of_buffer", "3\n")


def _net_tree(root: Path, rx: int) -> None:
    for name, value in (("rx_bytes", rx), ("tx_bytes", 2 * rx), ("rx_packets", 5)):
        _write(root / "eth0" / "statistics" / name, f"{value}\n")


def test_host_source_busy_percent_and_memory(tmp_path: Path) -> None:
    _write(
        tmp_path / "stat",
        "cpu  100 0 100 800 0 0 0 0 0 0\ncpu0 50 0 50 400 0 0 0 0 0 0\ncpu1 50 0 50 400 0 0 0 0 0 0\nintr 1\n",
    )
    _write(tmp_path / "meminfo", "MemTotal:       1000 kB\nMemFree:         100 kB\nMemAvailable:    400 kB\n")
    _write(tmp_path / "42" / "status", "Name: x\nVmRSS:      2048 kB\n")
    _write(tmp_path / "42" / "io", "rchar: 1\nread_bytes: 4096\nwrite_bytes: 8192\n")
    src = HostSource(str(tmp_path), lambda: {0: 42})
    # cpu0: +30 busy of +100; cpu1: +100 busy of +100; total: +130 of +200
    _write(
        tmp_path / "stat",
        "cpu  230 0 100 870 0 0 0 0 0 0\ncpu0 80 0 50 470 0 0 0 0 0 0\ncpu1 150 0 50 400 0 0 0 0 0 0\n",
    )
    read = src.read()  # the first read also adds the series of the ranks it found
    values = dict(zip([s.name for s in src.series], read))
    units = {s.name: s.unit for s in src.series}
    assert values["cpu0 busy"] == pytest.approx(30.0) and values["cpu1 busy"] == pytest.approx(100.0)
    assert values["cpu busy"] == pytest.approx(65.0) and units["cpu busy"] == "%"
    assert values["mem used"] == 600 * 1024 and values["mem available"] == 400 * 1024 and units["mem used"] == "bytes"
    assert (values["rank 0 rss"], values["rank 0 read_bytes"], values["rank 0 write_bytes"]) == (
        2048 * 1024,
        4096,
        8192,
    )


def test_infiniband_counts_4_byte_words_and_rereads_open_files(tmp_path: Path) -> None:
    _ib_tree(tmp_path, 1000)
    src = InfiniBandSource(str(tmp_path))
    got = dict(zip([(s.name, s.unit) for s in src.series], src.read()))
    assert got == {
        ("mlx5_0/1 port_rcv_data", "bytes"): 8000.0,
        ("mlx5_0/1 port_xmit_data", "bytes"): 4000.0,
        ("mlx5_0/1 port_xmit_packets", "packets"): 77.0,
        ("mlx5_0/1 out_of_buffer", "count"): 3.0,
    }
    _ib_tree(tmp_path, 2500)  # rewritten in place: the open descriptors see the new values
    assert src.read()[1] == 2500 * 4
    src.close()


def test_network_interface_counters(tmp_path: Path) -> None:
    _net_tree(tmp_path, 123)
    src = NetworkSource(str(tmp_path))
    assert [(s.name, s.unit) for s in src.series] == [
        ("eth0 rx_bytes", "bytes"),
        ("eth0 tx_bytes", "bytes"),
        ("eth0 rx_packets", "packets"),
    ]
    assert src.read() == [123.0, 246.0, 5.0]


def _series(trace: di.Trace) -> dict[str, tuple[str, np.ndarray, np.ndarray]]:
    s = trace.samples.join(trace.series, on="series").sort("series", "ts_ns")
    out = {}
    for (name, unit), grp in s.group_by("name", "unit"):
        out[name] = (unit, grp.get_column("ts_ns").to_numpy(), grp.get_column("value").to_numpy())
    return out


def _assert_rate(ts: np.ndarray) -> None:
    period_ns = 1e9 / RATE_HZ
    assert ts.size >= 8
    assert abs(np.median(np.diff(ts)) - period_ns) < 0.3 * period_ns


def test_record_samples_stand_in_sysfs_at_the_rate(tmp_path: Path) -> None:
    ib, net = tmp_path / "ib", tmp_path / "net"
    _ib_tree(ib, 1000)
    _net_tree(net, 10)
    out = tmp_path / "s.di"
    proc = run(
        di_cmd(
            "record",
            "--ib",
            "--net",
            "--rate",
            str(RATE_HZ),
            "--ib-root",
            str(ib),
            "--net-root",
            str(net),
            "-o",
            str(out),
            "--",
            *SLEEP,
        ),
        tmp_path,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    trace = di.load(out)
    series = _series(trace)
    unit, ts, values = series["mlx5_0/1 port_xmit_data"]
    assert unit == "bytes" and (values == 4000.0).all()
    _assert_rate(ts)
    assert series["eth0 rx_packets"][0] == "packets" and (series["eth0 rx_packets"][2] == 5).all()
    locs = trace.locations.filter(pl.col("kind") == "counter")
    assert sorted(locs.get_column("name").to_list()) == ["infiniband counters", "network counters"]


def test_missing_hardware_is_said_once_and_skipped(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    out = tmp_path / "m.di"
    proc = run(
        di_cmd("record", "--ib", "--host", "--ib-root", str(tmp_path / "empty"), "-o", str(out), "--", *SLEEP),
        tmp_path,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    warnings = di.load(out).meta["warnings"]
    assert len([w for w in warnings if "InfiniBand sampler skipped" in w]) == 1
    assert "cpu busy" in di.load(out).series.get_column("name").to_list()


def _nvml_standin(tmp_path: Path) -> Path:
    """The folder of a libnvidia-ml.so.1 built from tests/programs/nvml_standin.c (skips without a compiler)."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler")
    lib = tmp_path / "lib"
    lib.mkdir()
    subprocess.run(
        [
            cc,
            "-shared",
            "-fPIC",
            "-Wl,-soname,libnvidia-ml.so.1",
            "-o",
            str(lib / "libnvidia-ml.so.1"),
            str(PROGRAMS / "nvml_standin.c"),
        ],
        check=True,
        timeout=60,
    )
    return lib


def test_nvml_sampler_reads_a_stand_in_library(tmp_path: Path) -> None:
    pytest.importorskip("pynvml", reason="nvidia-ml-py not installed")
    lib = _nvml_standin(tmp_path)
    out = tmp_path / "g.di"
    proc = run(
        di_cmd("record", "--nvml", "--rate", str(RATE_HZ), "-o", str(out), "--", *SLEEP),
        tmp_path,
        timeout=120,
        LD_LIBRARY_PATH=str(lib),
    )
    assert proc.returncode == 0, proc.stderr
    series = _series(di.load(out))
    expect = {
        "gpu0 util": ("%", 40.0),
        "gpu1 util": ("%", 50.0),
        "gpu1 mem used": ("bytes", 2.0 * 2**30),
        "gpu0 power": ("W", 250.0),
        "gpu1 power": ("W", 251.0),
        "gpu0 sm clock": ("MHz", 1980.0),
        "gpu0 mem clock": ("MHz", 2619.0),
        "gpu1 temperature": ("C", 56.0),
    }
    for name, (unit, value) in expect.items():
        assert series[name][0] == unit and (series[name][2] == value).all(), name
    _assert_rate(series["gpu0 power"][1])
    for name, unit, per_read in (
        ("gpu0 energy", "J", 1.0),
        ("gpu0 pcie tx", "bytes", 1000.0),
        ("gpu0 pcie rx", "bytes", 2000.0),
        ("gpu0 nvlink tx", "bytes", 10.0 * 1024),
        ("gpu1 nvlink rx", "bytes", 20.0 * 1024),
    ):
        got_unit, _, values = series[name]
        assert got_unit == unit and np.allclose(values, per_read * np.arange(1, values.size + 1)), name


@pytest.mark.parametrize("case", ["no NVML library", "driver not loaded"])
def test_nvml_without_a_driver_is_said_once_and_the_rest_recorded(tmp_path: Path, case: str) -> None:
    """The real nvidia-ml-py: without libnvidia-ml.so.1 it raises NVMLError_LibraryNotFound; with the
    library and no kernel driver (the stand-in answering NVML_ERROR_DRIVER_NOT_LOADED), DriverNotLoaded."""
    import ctypes

    pytest.importorskip("pynvml", reason="nvidia-ml-py not installed")
    env = {}
    if case == "no NVML library":
        try:
            ctypes.CDLL("libnvidia-ml.so.1")
            pytest.skip("an NVML library is installed here")
        except OSError:
            pass
        said = "NVML Shared Library Not Found"
    else:
        env = {"LD_LIBRARY_PATH": str(_nvml_standin(tmp_path)), "NVML_STANDIN_INIT": "9"}
        said = "Driver Not Loaded"
    out = tmp_path / "n.di"
    proc = run(
        di_cmd("record", "--nvml", "--host", "--rate", str(RATE_HZ), "-o", str(out), "--", *SLEEP),
        tmp_path,
        timeout=120,
        **env,
    )
    assert proc.returncode == 0, proc.stderr
    trace = di.load(out)
    nvml = [w for w in trace.meta["warnings"] if "NVML" in w]  # prefixed "sampler on HOST: "
    assert len(nvml) == 1 and nvml[0].endswith(f"NVML sampler skipped: no NVIDIA driver (NVML: {said})"), nvml
    names = trace.series.get_column("name").to_list()
    assert "cpu busy" in names and not [n for n in names if n.startswith("gpu")]


def test_sample_record_is_24_bytes() -> None:
    assert SAMPLE.itemsize == 24


def test_a_stalled_sampler_skips_the_missed_ticks_instead_of_a_burst(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import time

    from di.capture import samplers

    class StallsOnce:
        """A source whose third read takes 7 periods (a thread kept off the CPU on a loaded machine)."""

        kind, series, reads = "stall", [samplers.Series("x", "count")], 0

        def read(self) -> list[float]:
            self.reads += 1
            if self.reads == 3:
                time.sleep(7 / RATE_HZ)
            return [1.0]

    monkeypatch.setattr(samplers, "build_sources", lambda _opts: ([StallsOnce()], []))
    thread = samplers.SamplerThread(tmp_path, samplers.SamplerOptions(rate_hz=RATE_HZ))
    thread.start()
    time.sleep(14 / RATE_HZ)
    thread.stop()
    ts = np.fromfile(next(tmp_path.glob("samples-*.bin")), samplers.SAMPLE)["ts_ns"][:-1]  # the last: stop()'s own
    assert ts.size >= 5
    assert np.diff(ts).min() > 0.5e9 / RATE_HZ
