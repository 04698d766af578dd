"""4 ranks; rank 2 kills itself with SIGKILL in the middle of the job.

Before the kill every rank does one Allreduce, writes two 1000-byte chunks to
DIR/rank-R.dat and enters one Barrier. Usage: python killed_rank.py DIR
"""

import os
import signal
import sys

import numpy as np
from mpi4py import MPI

world = MPI.COMM_WORLD
rank = world.Get_rank()
world.Allreduce(MPI.IN_PLACE, np.ones(10))
fd = os.open(os.path.join(sys.argv[1], f"rank-{rank}.dat"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(fd, b"a" * 1000)
os.write(fd, b"b" * 1000)
os.close(fd)
world.Barrier()
if rank == 2:
    os.kill(os.getpid(), signal.SIGKILL)
world.Barrier()  # the others wait here until the launcher ends the job
