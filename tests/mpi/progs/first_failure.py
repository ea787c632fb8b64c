"""One rank fails while the others wait for it in a collective: the report must name that rank.

argv: CASE. Cases (4 ranks, 2+2):
  truncate     rank 0 sends 100 bytes across to rank 3, which receives into 10: TruncationError
  exit         rank 3 calls sys.exit(3)
  not-bridged  every rank asks for a shared-memory window on COMM_WORLD: NotBridged
The others go on to a Barrier, where they learn that rank 3 has gone (RankGone) unless Hydra
ends them first.
"""

import sys

import numpy as np
from mpi4py import MPI

world = MPI.COMM_WORLD
rank = world.Get_rank()
case = sys.argv[1]
if case == "truncate":
    if rank == 0:
        world.Send(np.zeros(100, dtype=np.uint8), 3, 7)
    elif rank == 3:
        world.Recv(np.zeros(10, dtype=np.uint8), 0, 7)
elif case == "exit" and rank == 3:
    sys.exit(3)
elif case == "not-bridged":
    MPI.Win.Allocate_shared(8, 1, MPI.INFO_NULL, world)
world.Barrier()
