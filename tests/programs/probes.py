"""2 ranks: rank 0 sends tags 1..4 (float64 arrays of 10, 20, 30, 40 elements) and one
pickled object with tag 6; rank 1 receives them through every probe form:
Probe + Recv, Iprobe (polled) + Recv, Mprobe + Mrecv, Improbe (polled) + Imrecv + Wait,
and mpi4py's lowercase comm.recv (Mprobe + Mrecv inside mpi4py).
Usage: python probes.py
"""

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
if comm.Get_rank() == 0:
    for tag in (1, 2, 3, 4):
        comm.Send(np.zeros(10 * tag), dest=1, tag=tag)
    comm.send({"step": 6, "data": list(range(10))}, dest=1, tag=6)
else:
    comm.Probe(source=0, tag=1)
    comm.Recv(np.empty(10), source=0, tag=1)
    while not comm.Iprobe(source=0, tag=2):
        pass
    comm.Recv(np.empty(20), source=0, tag=2)
    comm.Mprobe(source=0, tag=3).Recv(np.empty(30))
    msg = None
    while msg is None:
        msg = comm.Improbe(source=0, tag=4)
    msg.Irecv(np.empty(40)).Wait()
    assert comm.recv(source=0, tag=6)["step"] == 6
comm.Barrier()
