"""NVML sampler through nvidia-ml-py (``pynvml``), one batch of calls per device per tick.

Per GPU ``gpuN``: ``util`` and ``mem util`` (%), ``mem used`` (bytes), ``power``
(W, from mW), ``energy`` (J since driver load, from mJ), ``sm clock`` and
``mem clock`` (MHz), ``temperature`` (C), and through one
``nvmlDeviceGetFieldValues`` call: ``pcie tx`` / ``pcie rx`` (bytes,
cumulative) and ``nvlink tx`` / ``nvlink rx`` (bytes, from KiB, cumulative).
A value NVML refuses for a device is nan. No NVIDIA driver (nvidia-ml-py raises
NVMLError_LibraryNotFound without libnvidia-ml.so.1, NVMLError_DriverNotLoaded when
the library is there and the kernel driver is not) is a :class:`MissingSource`.
"""

from __future__ import annotations

from typing import Any

from di.capture.samplers import MissingSource, Series

KIB = 1024
MILLI = 1e-3

FIELDS = (
    ("pcie tx", "bytes", "NVML_FI_DEV_PCIE_COUNT_TX_BYTES", 1.0),
    ("pcie rx", "bytes", "NVML_FI_DEV_PCIE_COUNT_RX_BYTES", 1.0),
    ("nvlink tx", "bytes", "NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX", float(KIB)),
    ("nvlink rx", "bytes", "NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX", float(KIB)),
)
BASIC = (
    ("util", "%"),
    ("mem util", "%"),
    ("mem used", "bytes"),
    ("power", "W"),
    ("energy", "J"),
    ("sm clock", "MHz"),
    ("mem clock", "MHz"),
    ("temperature", "C"),
)


def _field_value(v: Any) -> float:
    """A c_nvmlFieldValue_t's value as a float, by its valueType (nan on error)."""
    if v.nvmlReturn != 0:
        return float("nan")
    member = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}.get(
        v.valueType, "ullVal"
    )
    return float(getattr(v.value, member))


class NvmlSource:
    """All devices NVML reports."""

    kind = "nvml"

    def __init__(self) -> None:
        try:
            import pynvml
        except ImportError:
            raise MissingSource("NVML sampler skipped: nvidia-ml-py is not installed") from None
        try:
            pynvml.nvmlInit()
        except (pynvml.NVMLError_LibraryNotFound, pynvml.NVMLError_DriverNotLoaded) as exc:
            raise MissingSource(f"NVML sampler skipped: no NVIDIA driver (NVML: {exc})") from None
        except pynvml.NVMLError as exc:
            raise MissingSource(f"NVML sampler skipped: {exc}") from None
        self.nv = pynvml
        self.handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
        self.field_ids = [getattr(pynvml, f[2]) for f in FIELDS]
        self.series = [
            Series(f"gpu{i} {name}", unit)
            for i in range(len(self.handles))
            for name, unit in BASIC + tuple((f[0], f[1]) for f in FIELDS)
        ]

    def _basic(self, h: Any) -> list[float]:
        nv = self.nv
        calls = (
            lambda: nv.nvmlDeviceGetUtilizationRates(h).gpu,
            lambda: nv.nvmlDeviceGetUtilizationRates(h).memory,
            lambda: nv.nvmlDeviceGetMemoryInfo(h).used,
            lambda: nv.nvmlDeviceGetPowerUsage(h) * MILLI,
            lambda: nv.nvmlDeviceGetTotalEnergyConsumption(h) * MILLI,
            lambda: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM),
            lambda: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM),
            lambda: nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU),
        )
        out = []
        for call in calls:
            try:
                out.append(float(call()))
            except nv.NVMLError:
                out.append(float("nan"))
        return out

    def read(self) -> list[float]:
        out: list[float] = []
        for h in self.handles:
            out += self._basic(h)
            try:
                values = self.nv.nvmlDeviceGetFieldValues(h, self.field_ids)
                out += [_field_value(v) * f[3] for v, f in zip(values, FIELDS)]
            except self.nv.NVMLError:
                out += [float("nan")] * len(FIELDS)
        return out

    def close(self) -> None:
        try:
            self.nv.nvmlShutdown()
        except self.nv.NVMLError:
            pass
