"""Windows across the zipper where they are not bridged, or misused: each rank prints a line.

argv: CASE. Cases:
  shared    Win.Allocate_shared on COMM_WORLD (memory cannot be shared across two clusters)
  dynamic   Win.Create_dynamic on COMM_WORLD
  outside   a Put beyond the target's window: an error naming the rank and the bytes
"""

import sys

import numpy as np
from mpi4py import MPI

import mmpi.errors

case = sys.argv[1]
world = MPI.COMM_WORLD
rank = world.Get_rank()
try:
    if case == "shared":
        MPI.Win.Allocate_shared(8, 1, MPI.INFO_NULL, world)
    elif case == "dynamic":
        MPI.Win.Create_dynamic(MPI.INFO_NULL, world)
    else:
        win = MPI.Win.Allocate(16, 8, MPI.INFO_NULL, world)
        win.Fence()
        try:
            win.Put(np.zeros(3), (rank + 1) % world.Get_size(), 0)
        finally:
            win.Fence()
            win.Free()
    print(f"rank {rank}: accepted", flush=True)
except mmpi.errors.MMPIError as exc:
    print(f"rank {rank}: {type(exc).__name__}: {exc}", flush=True)
world.Barrier()
