"""The built-in demo job: a small data-parallel-like training loop in mpi4py.

Each rank, per step (annotated with :class:`di.region`, so the trace names each phase and
the analyses take their steps from the ``step N`` regions):

* ``forward``: numpy matrix products (one BLAS thread per rank), then a halo
  exchange of activations with its ring neighbours (Isend/Irecv + Waitall);
* ``backward``: twice the forward's products, then a gradient Allreduce;
* ``optimizer``: the weight update;
* ``checkpoint``, every ``CHECKPOINT_EVERY`` steps: its parameters written with
  os.write + fsync (read back once at the start, a "resume").

Rank ``STRAGGLER`` does ``STRAGGLER_FACTOR`` times the products and keeps
computing until at least ``STRAGGLER_EXTRA_S`` more wall time has passed (split
over forward and backward), so the others wait for it. Run by ``di demo`` under
``di record``::

    mpiexec -n 4 python -m di.demo.train WORKDIR --steps 6
"""

from __future__ import annotations

import argparse
import os
import time

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # one BLAS thread per rank, as data-parallel ranks run

import numpy as np  # noqa: E402  (after the thread settings)

from di.region import region

MATRIX = 192  # side of the compute matrices
MATMULS_PER_STEP = 6  # forward a third, backward two thirds
STRAGGLER, STRAGGLER_FACTOR = 1, 4
STRAGGLER_EXTRA_S = 0.4  # the straggler's step lasts at least this much longer than the others' compute
GRAD_ELEMS = 1 << 18  # float32 gradient bucket: 1 MiB
HALO_ELEMS = 1 << 13  # float32 activations to each neighbour: 32 KiB
CHECKPOINT_EVERY = 3
CHECKPOINT_CHUNK = 1 << 18  # bytes per write call


def compute(x: np.ndarray, weights: np.ndarray, matmuls: int, straggler: bool, extra_s: float) -> np.ndarray:
    """``matmuls`` products; the straggler does STRAGGLER_FACTOR times that and ``extra_s`` more."""
    began = time.monotonic()
    for _ in range(matmuls):
        x = np.tanh(x @ weights)
    if straggler:
        until = time.monotonic() + (time.monotonic() - began) * (STRAGGLER_FACTOR - 1) + extra_s
        while time.monotonic() < until:
            x = np.tanh(x @ weights)
    return x


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
    slow = rank == STRAGGLER % size
    fwd = MATMULS_PER_STEP // 3
    for step in range(args.steps):
        marks.append(time.perf_counter())
        with region(f"step {step}"):
            x = rng.standard_normal((MATRIX, MATRIX)).astype(np.float32)
            with region("forward"):
                x = compute(x, weights, fwd, slow, STRAGGLER_EXTRA_S / 3)
                halo_out[:] = x.ravel()[:HALO_ELEMS]
                left, right = (rank - 1) % size, (rank + 1) % size
                reqs = [
                    comm.Irecv(halo_in[0], source=left, tag=step),
                    comm.Irecv(halo_in[1], source=right, tag=step),
                    comm.Isend(halo_out, dest=left, tag=step),
                    comm.Isend(halo_out, dest=right, tag=step),
                ]
                MPI.Request.Waitall(reqs)
            with region("backward"):
                x = compute(x, weights, MATMULS_PER_STEP - fwd, slow, STRAGGLER_EXTRA_S * 2 / 3)
                grad[: x.size] = x.ravel()[: min(x.size, GRAD_ELEMS)]
                comm.Allreduce(MPI.IN_PLACE, grad)
            with region("optimizer"):
                weights -= 1e-3 * grad[: weights.size].reshape(weights.shape) / size
            if (step + 1) % CHECKPOINT_EVERY == 0:
                with region("checkpoint"):
                    checkpoint(ckpt, weights)
    comm.Barrier()
    marks.append(time.perf_counter())
    if args.timings and rank == 0:
        import json

        with open(args.timings, "w") as f:
            json.dump({"main_s": marks[0], "steps_s": marks[1:-1], "end_s": marks[-1]}, f)


def checkpoint(path: str, weights: np.ndarray) -> None:
    data = weights.tobytes()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    for k in range(0, len(data), CHECKPOINT_CHUNK):
        os.write(fd, data[k : k + CHECKPOINT_CHUNK])
    os.fsync(fd)
    os.close(fd)


if __name__ == "__main__":
    main()
