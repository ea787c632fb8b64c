"""An mpi4py program as written for mpiexec: `from mpi4py import MPI`, nothing of mmpi.

Prints its world, checks a cross-cluster Allreduce; with `--stdin`, rank 0 echoes its input.
"""

import sys

import mpi4py.MPI
import numpy as np
from mpi4py import MPI
from mpi4py.MPI import COMM_WORLD

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
assert mpi4py.MPI.COMM_WORLD.Get_size() == COMM_WORLD.Get_size() == size
x, y = np.array([rank + 1.0]), np.zeros(1)
comm.Allreduce(x, y)
assert y[0] == size * (size + 1) / 2, y
if "--stdin" in sys.argv and rank == 0:
    print(f"STDIN {sys.stdin.read().strip()}", flush=True)
comm.Barrier()
print(f"WORLD {rank} {size} {type(comm).__module__} {y[0]:g}", flush=True)
