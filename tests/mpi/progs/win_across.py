"""Windows across the zipper where they are not bridged, or misused: each rank prints a line.

argv: CASE. Cases:
  shared    Win.Allocate_shared on COMM_WORLD (memory cannot be shared across two clusters)
  dynamic   a Put to an address the target has not attached to its dynamic window: an error
            on the target, naming the origin and the bytes
  dynamic-get  the same with a Get: the error on the target, and on the origin (its Fence)
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
    elif case.startswith("dynamic"):
        win = MPI.Win.Create_dynamic(MPI.INFO_NULL, world)
        mem = np.zeros(2)
        win.Attach(mem)
        there = world.sendrecv(MPI.Get_address(mem), (rank + 1) % world.Get_size(),
                               source=(rank - 1) % world.Get_size())
        win.Fence()
        try:
            move = win.Get if case == "dynamic-get" else win.Put
            move(np.zeros(3), (rank + 1) % world.Get_size(), there)
        finally:
            try:
                win.Fence()
            finally:
                win.Detach(mem)
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
