"""2 ranks, persistent requests: rank 0 starts a Send_init (tag 7, 16 float64) three times
with MPI_Start + Wait; then both ranks Startall a pair (rank 0: send tag 8 / receive
tag 9; rank 1 the mirror) twice with Waitall; every request is freed at the end.
Usage: python persistent.py
"""

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
a, b = np.zeros(16), np.zeros(8)
if rank == 0:
    single = comm.Send_init(a, dest=1, tag=7)
    pair = [comm.Send_init(b, dest=1, tag=8), comm.Recv_init(np.empty(8), source=1, tag=9)]
else:
    single = comm.Recv_init(np.empty(16), source=0, tag=7)
    pair = [comm.Recv_init(np.empty(8), source=0, tag=8), comm.Send_init(b, dest=0, tag=9)]
for _ in range(3):
    single.Start()
    single.Wait()
for _ in range(2):
    MPI.Prequest.Startall(pair)
    MPI.Request.Waitall(pair)
for r in [single, *pair]:
    r.Free()
comm.Barrier()
