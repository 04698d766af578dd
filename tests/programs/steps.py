"""Ranks in a loop of steps until stopped (or STEPS steps): one Allreduce and a short sleep each.

After each step a rank writes its step count to DIR/steps-R; once every rank has
done READY_STEPS steps, each writes "PID PPID" to DIR/ready-R (the tests' cue to
kill or interrupt something). Usage: python steps.py DIR [STEPS]
"""

import os
import sys
import time

import numpy as np
from mpi4py import MPI

READY_STEPS = 5
STEP_S = 0.05  # sleep per step: 4 ranks on a shared 2-core machine

world = MPI.COMM_WORLD
rank = world.Get_rank()
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 10**9
out = os.open(os.path.join(sys.argv[1], f"steps-{rank}"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
buf = np.ones(4)
for step in range(1, steps + 1):
    world.Allreduce(MPI.IN_PLACE, buf)
    os.pwrite(out, b"%-12d\n" % step, 0)
    if step == READY_STEPS:
        with open(os.path.join(sys.argv[1], f"ready-{rank}"), "w") as fh:
            fh.write(f"{os.getpid()} {os.getppid()}\n")
    time.sleep(STEP_S)
os.close(out)
