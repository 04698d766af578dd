"""Which rank each recorded process is.

A process's rank is MPI_Init's (its ``mpi`` shard header), else, for the shims that run
beside MPI (``io``, ``nccl``, ``nccl_plugin``, ``nvtx``), the launcher's environment rank.
When no process has either, every process with records gets a rank by (host, pid) order.
Processes left without a rank (the launcher itself) are skipped and counted in a warning.
"""

from __future__ import annotations

from pathlib import Path

from di.capture import shard


def assign_ranks(procs: list[shard.ProcessShard], warnings: list[str]) -> dict[tuple[str, int], int]:
    """(host, pid) -> rank; processes without any rank get ranks by pid only when nobody has one."""
    ranks: dict[tuple[str, int], int] = {}
    for p in procs:
        if p.lib == "mpi" and p.header["rank"] >= 0:
            ranks[p.key] = p.header["rank"]
    for p in procs:
        if p.key not in ranks and p.header.get("env_rank", -1) >= 0 and p.lib in ("io", "nccl", "nccl_plugin", "nvtx"):
            ranks[p.key] = p.header["env_rank"]
    if not ranks:
        recorded = sorted({p.key for p in procs if p.threads}, key=lambda k: (k[0], k[1]))
        ranks = {key: i for i, key in enumerate(recorded)}
    skipped = [p for p in procs if p.key not in ranks and p.threads]
    if skipped:
        n = sum(int(r.size) for p in skipped for r in p.threads.values())
        names = sorted({Path(p.header.get("exe", "?")).name for p in skipped})
        warnings.append(
            f"{len(skipped)} processes without an MPI rank (launcher: {', '.join(names)}) skipped with their {n} records"
        )
    return ranks
