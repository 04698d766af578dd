"""The built-in demo job: a small data-parallel-like training loop in mpi4py.

Each rank, per step: a numpy "forward/backward" (matrix products, one BLAS
thread per rank; rank ``STRAGGLER`` does ``STRAGGLER_FACTOR`` times the work and
keeps computing until at least ``STRAGGLER_EXTRA_S`` more wall time has passed,
so the others wait for it), a halo exchange of activations with its ring neighbours (Isend/Irecv +
Waitall), a gradient Allreduce, and every ``CHECKPOINT_EVERY`` steps a
checkpoint of its parameters written with os.write + fsync and read back once
at the start (a "resume"). Run by ``di demo`` under ``di record``::

    mpiexec -n 4 python -m di.demo.train WORKDIR --steps 6
"""

from __future__ import annotations

import argparse
import os
import time

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # one BLAS thread per rank, as data-parallel ranks run

import numpy as np  # noqa: E402  (after the thread settings)

MATRIX = 192  # side of the compute matrices
MATMULS_PER_STEP = 6
STRAGGLER, STRAGGLER_FACTOR = 1, 4
STRAGGLER_EXTRA_S = 0.4  # the straggler's step lasts at least this much longer than the others' compute
GRAD_ELEMS = 1 << 18  # float32 gradient bucket: 1 MiB
HALO_ELEMS = 1 << 13  # float32 activations to each neighbour: 32 KiB
CHECKPOINT_EVERY = 3
CHECKPOINT_CHUNK = 1 << 18  # bytes per write call


def main(argv: list[str] | None = None) -> None:
    from mpi4py import MPI

    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("workdir")
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--timings", help="rank 0 writes its step boundaries here (JSON, perf_counter seconds; for bench/)")
    args = p.parse_args(argv)
    marks = [time.perf_counter()]  # main entered, then each step's start, then the end of the loop
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    rng = np.random.default_rng(rank)
    weights = rng.standard_normal((MATRIX, MATRIX)).astype(np.float32)
    grad = np.zeros(GRAD_ELEMS, np.float32)
    ckpt = os.path.join(args.workdir, f"ckpt-rank{rank}.bin")
    with open(ckpt, "wb") as f:  # the "pretrained" weights this rank resumes from
        f.write(weights.tobytes())
    with open(ckpt, "rb") as f:
        weights = np.frombuffer(f.read(), np.float32).reshape(MATRIX, MATRIX).copy()
    comm.Bcast(weights, root=0)
    halo_out = np.empty(HALO_ELEMS, np.float32)
    halo_in = np.empty((2, HALO_ELEMS), np.float32)
    for step in range(args.steps):
        marks.append(time.perf_counter())
        x = rng.standard_normal((MATRIX, MATRIX)).astype(np.float32)
        began = time.monotonic()
        for _ in range(MATMULS_PER_STEP):
            x = np.tanh(x @ weights)
        if rank == STRAGGLER % size:
            until = time.monotonic() + (time.monotonic() - began) * (STRAGGLER_FACTOR - 1) + STRAGGLER_EXTRA_S
            while time.monotonic() < until:
                x = np.tanh(x @ weights)
        halo_out[:] = x.ravel()[:HALO_ELEMS]
        left, right = (rank - 1) % size, (rank + 1) % size
        reqs = [comm.Irecv(halo_in[0], source=left, tag=step), comm.Irecv(halo_in[1], source=right, tag=step),
                comm.Isend(halo_out, dest=left, tag=step), comm.Isend(halo_out, dest=right, tag=step)]
        MPI.Request.Waitall(reqs)
        grad[: x.size] = x.ravel()[: min(x.size, GRAD_ELEMS)]
        comm.Allreduce(MPI.IN_PLACE, grad)
        weights -= 1e-3 * grad[: weights.size].reshape(weights.shape) / size
        if (step + 1) % CHECKPOINT_EVERY == 0:
            data = weights.tobytes()
            fd = os.open(ckpt, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            for k in range(0, len(data), CHECKPOINT_CHUNK):
                os.write(fd, data[k:k + CHECKPOINT_CHUNK])
            os.fsync(fd)
            os.close(fd)
    comm.Barrier()
    marks.append(time.perf_counter())
    if args.timings and rank == 0:
        import json

        with open(args.timings, "w") as f:
            json.dump({"main_s": marks[0], "steps_s": marks[1:-1], "end_s": marks[-1]}, f)


if __name__ == "__main__":
    main()
