"""A 4-rank mpi4py program whose every MPI call and file operation is known.

Run under ``di record`` by tests/test_capture_mpi.py, which checks the trace
against :data:`EXPECTED` in that test. Usage: python known_calls.py DIR
"""

import os
import sys

import numpy as np
from mpi4py import MPI

out = sys.argv[1]
world = MPI.COMM_WORLD
rank = world.Get_rank()
assert world.Get_size() == 4, "run with 4 ranks"

grad = np.full(100, rank, dtype=np.float64)
world.Allreduce(MPI.IN_PLACE, grad)  # 800 bytes
params = np.arange(50, dtype=np.int32) if rank == 2 else np.empty(50, dtype=np.int32)
world.Bcast(params, root=2)  # 200 bytes from rank 2

if rank == 0:
    world.Send(np.zeros(1000, np.uint8), dest=1, tag=11)
elif rank == 1:
    world.Recv(np.empty(1000, np.uint8), source=0, tag=11)
elif rank == 2:
    world.Send(np.zeros(3, np.float64), dest=3, tag=12)
else:
    world.Recv(np.empty(3, np.float64), source=2, tag=12)

if rank == 0:  # three wildcard receives: sources and tags come from the status
    buf = np.empty(3, np.float64)
    for _ in range(3):
        world.Recv(buf, source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG)
else:
    world.Send(np.zeros(rank, np.float64), dest=0, tag=20 + rank)
world.Barrier()  # no ring message below can meet the wildcard receives

send = np.full(64, rank, np.float64)
recv = np.empty(64, np.float64)
reqs = [world.Isend(send, dest=(rank + 1) % 4, tag=30), world.Irecv(recv, source=(rank - 1) % 4, tag=30)]
MPI.Request.Waitall(reqs)
world.Barrier()

half = world.Split(rank % 2, rank)
part = np.ones(10, np.float32)
half.Allreduce(MPI.IN_PLACE, part)  # 40 bytes within {0, 2} and {1, 3}

path = os.path.join(out, f"rank-{rank}.dat")
chunk = b"x" * (4096 * (rank + 1))
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
for _ in range(3):
    os.write(fd, chunk)
os.close(fd)
fd = os.open(path, os.O_RDONLY)
while os.read(fd, 1 << 20):
    pass
os.close(fd)
