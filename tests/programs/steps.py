"""Ranks in a loop of steps until stopped (or STEPS steps): one Allreduce and a short sleep each.

A SIGINT stops the job as a well-behaved training script does: the ranks agree on it in
the next step's Allreduce (MAX of a stop flag), so that all stop after the same step, and
exit with 130. After each step a rank writes its step count to DIR/steps-R; once every rank has
done READY_STEPS steps, each writes "PID PPID" to DIR/ready-R (the tests' cue to
kill or interrupt something). Usage: python steps.py DIR [STEPS]
"""

import os
import signal
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
asked = [0.0]  # by a SIGINT; never the Allreduce's buffer, whose result all ranks must share
signal.signal(signal.SIGINT, lambda _num, _frame: asked.__setitem__(0, 1.0))
stop = np.zeros(1)
for step in range(1, steps + 1):
    stop[0] = asked[0]
    world.Allreduce(MPI.IN_PLACE, stop, op=MPI.MAX)
    if stop[0]:
        sys.exit(130)
    os.pwrite(out, b"%-12d\n" % step, 0)
    if step == READY_STEPS:
        with open(os.path.join(sys.argv[1], f"ready-{rank}"), "w") as fh:
            fh.write(f"{os.getpid()} {os.getppid()}\n")
    time.sleep(STEP_S)
os.close(out)
