"""Rank, world size and host of a report from MPI_RANKS, its recorded environment and file name.

``nsys profile -o report.%q{OMPI_COMM_WORLD_RANK}`` (or ``%q{SLURM_PROCID}``) names
each rank's report ``report.N.nsys-rep``; the profiled process's environment is kept in
``META_DATA_CAPTURE`` (``PROCESS_n:ENVIRONMENT_VARIABLE`` rows, ``NAME="value"``), the
target's in ``TARGET_INFO_SYSTEM_ENV`` (``DeviceEnvironment``: ``NAME=value;...``).
"""

from __future__ import annotations

import re
from pathlib import Path

from di.convert.nsys.report import Report, pid_of

__all__ = ["environment", "host_of", "rank_of_env", "rank_of_name"]

RANK_VARS = (
    "OMPI_COMM_WORLD_RANK",
    "PMIX_RANK",
    "PMI_RANK",
    "MV2_COMM_WORLD_RANK",
    "SLURM_PROCID",
    "PALS_RANKID",
    "RANK",
)
"""Launchers' rank variables, most specific first (Open MPI, PMIx, MPICH/PMI, MVAPICH, Slurm, Cray PALS, torchrun)."""
SIZE_VARS = ("OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "PMI_SIZE", "MV2_COMM_WORLD_SIZE", "SLURM_NTASKS", "WORLD_SIZE")
RANK_SUFFIX = re.compile(r"(?:^|[._-])(\d+)$")
"""``report.3`` / ``job-3`` / ``prof_3`` before the extension; not ``report3`` (nsys's own numbering of reports)."""
EXTENSIONS = (".nsys-rep", ".sqlite", ".qdrep")
MAX_RANK = 2**31 - 1
"""Ranks are Int32 in the model; a larger number (a damaged table, a long number in a file name) is no rank."""


def mpi_ranks(report: Report) -> dict[int, int]:
    """Process id -> MPI rank from ``MPI_RANKS`` (written when MPI was traced), {} when absent."""
    if not {"globalTid", "rank"} <= set(report.columns("MPI_RANKS")):
        return {}
    c = report.ints("MPI_RANKS", {"gtid": "globalTid", "rank": "rank"})
    ok = ~(c["gtid_null"] | c["rank_null"]) & (c["rank"] >= 0) & (c["rank"] <= MAX_RANK)
    return {int(p): int(r) for p, r in zip(pid_of(c["gtid"][ok]).tolist(), c["rank"][ok].tolist())}


def environment(report: Report) -> dict[str, str]:
    """The recorded environment: the target's, overlaid by the first profiled process's."""
    env: dict[str, str] = {}
    for name, value in report.pairs("TARGET_INFO_SYSTEM_ENV", "name", "value"):
        if name == "DeviceEnvironment":
            for item in value.split(";"):
                k, eq, v = item.partition("=")
                if eq and k:
                    env.setdefault(k, v)
    process: dict[str, str] = {}
    for name, value in report.pairs("META_DATA_CAPTURE", "name", "value"):
        if name.endswith(":ENVIRONMENT_VARIABLE") and name.startswith("PROCESS_0:"):
            k, eq, v = value.partition("=")
            if eq and k:
                process.setdefault(k, v[1:-1] if len(v) >= 2 and v[0] == v[-1] == '"' else v)
    env.update(process)
    return env


def _int(env: dict[str, str], names: tuple[str, ...]) -> tuple[int | None, str | None]:
    for n in names:
        v = env.get(n, "").strip()
        if v.isdigit() and int(v) <= MAX_RANK:
            return int(v), n
    return None, None


def rank_of_env(env: dict[str, str]) -> tuple[int | None, str | None, int | None]:
    """(rank, the variable it came from, world size) from a recorded environment."""
    rank, var = _int(env, RANK_VARS)
    size, _ = _int(env, SIZE_VARS)
    return rank, var, size


def rank_of_name(path: Path) -> int | None:
    """N of ``report.N.sqlite`` / ``report.N.nsys-rep``."""
    stem = path.name
    for ext in EXTENSIONS:
        if stem.endswith(ext):
            stem = stem[: -len(ext)]
            break
    m = RANK_SUFFIX.search(stem)
    return int(m.group(1)) if m and int(m.group(1)) <= MAX_RANK else None


def host_of(report: Report, env: dict[str, str]) -> str | None:
    for name, value in report.pairs("TARGET_INFO_SYSTEM_ENV", "name", "value"):
        if name == "Hostname" and value:
            return value
    for name, value in report.pairs("META_DATA_CAPTURE", "name", "value"):
        if name == "DEVICE_DISPLAY_NAME" and value:
            return value
    return env.get("HOSTNAME") or env.get("SLURMD_NODENAME") or None
