"""Run one collective K times (nothing else crosses), so the forwarder's message counters show
how many messages each call sends across the zipper. `python crossings.py OP K SIZE`."""

import sys

import numpy as np

from mmpi import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
op, k, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
last = size - 1
for _ in range(k):
    if op == "barrier":
        comm.Barrier()
    elif op == "bcast-low":
        comm.Bcast(np.zeros(n), root=0)
    elif op == "bcast-high":
        comm.Bcast(np.zeros(n), root=last)
    elif op == "reduce":
        comm.Reduce(np.ones(n), np.zeros(n) if rank == 0 else None, root=0)
    elif op == "allreduce":
        comm.Allreduce(np.ones(n), np.zeros(n))
    elif op == "alltoall":  # blocks of n doubles: straight from rank to rank
        comm.Alltoall(np.ones(n * size), np.zeros(n * size))
    elif op == "alltoall-small":  # blocks of 100 doubles: through the leaders
        comm.Alltoall(np.ones(100 * size), np.zeros(100 * size))
    elif op == "alltoallv":  # blocks of n doubles: straight, and their sizes via the leaders
        comm.Alltoallv([np.ones(n * size), [n] * size], [np.zeros(n * size), [n] * size])
    elif op == "alltoallv-small":  # blocks of 100 doubles: through the leaders
        comm.Alltoallv([np.ones(100 * size), [100] * size], [np.zeros(100 * size), [100] * size])
    elif op == "allgather":
        comm.Allgather(np.ones(n), np.zeros(n * size))
    elif op == "gather":
        comm.Gather(np.ones(n), np.zeros(n * size) if rank == 0 else None, root=0)
    elif op == "gatherv":
        comm.Gatherv(np.ones(n), [np.zeros(n * size), [n] * size] if rank == 0 else None,
                     root=0)
    elif op == "scatterv":
        comm.Scatterv([np.ones(n * size), [n] * size] if rank == 0 else None, np.zeros(n),
                      root=0)
    elif op == "scatter":
        comm.Scatter(np.ones(n * size) if rank == 0 else None, np.zeros(n), root=0)
    else:
        raise SystemExit(f"unknown op {op}")
