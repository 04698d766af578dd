"""Parallel analysis and conversion under MPI (mpi4py): Scalasca's model, each process owning a set of ranks.

``mpiexec -n P di analyze RUN.di`` runs the same analyses as one process, over a
rank-partitioned store (:mod:`di.store_partition`): each process reads only the
rank groups it owns (:mod:`di.parallel.ownership`), computes the per-rank results
of its ranks locally with the engine's own functions, and exchanges only what
crosses ranks (:mod:`di.parallel.exchange`): message and collective endpoints,
collective aggregates reduced per instance, the critical path's cross-rank
edges in a forward replay (:mod:`di.parallel.critical_path`). Process 0 gathers
the per-rank results (the output) and writes; the others print nothing.
Outside ``mpiexec``, or with one process, nothing here runs.
"""

from __future__ import annotations

import os
from typing import Any

LAUNCHER_SIZE_VARIABLES = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "MPI_LOCALNRANKS")
"""Environment variables through which MPI launchers (MPICH/Hydra, Open MPI, PMIx) give a process the job size."""


def launched_processes() -> int:
    """The number of processes the MPI launcher started (1 outside a launcher), without importing MPI."""
    for name in LAUNCHER_SIZE_VARIABLES:
        value = os.environ.get(name, "")
        if value.isdigit():
            return int(value)
    return 1


def world() -> Any:
    """MPI's COMM_WORLD when this process is one of several started by an MPI launcher, else None."""
    if launched_processes() < 2:
        return None
    from mpi4py import MPI

    return MPI.COMM_WORLD if MPI.COMM_WORLD.Get_size() > 1 else None
