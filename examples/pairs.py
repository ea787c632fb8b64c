"""Scattered partners: rank i exchanges with rank i + N/2, so the default layout forwards it all.

Each rank swaps a block with its partner a few times, then checks what it got. Under the
default layout (low holds the first half) every exchange crosses the zipper; the layout
``mmpi-place`` proposes from a monitored run keeps every pair inside one cluster.

    mmpi-run --low 2 --high 2 --monitor mon python examples/pairs.py
    mmpi-place mon --low 2 --high 2 --output map.json
    mmpi-run --low 2 --high 2 --rank-map map.json --monitor placed python examples/pairs.py
"""

import sys

import numpy as np

from mmpi import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
if size % 2:
    sys.exit("pairs.py needs an even number of ranks")
partner = (rank + size // 2) % size
nbytes = int(sys.argv[1]) if len(sys.argv) > 1 else 1 << 18
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 4
mine = np.full(nbytes, rank % 256, dtype=np.uint8)
theirs = np.empty_like(mine)
t0 = MPI.Wtime()
for _ in range(rounds):
    comm.Sendrecv(mine, partner, 0, theirs, partner, 0)
    assert theirs[0] == partner % 256 and theirs[-1] == partner % 256
elapsed = comm.allreduce(MPI.Wtime() - t0, op=MPI.MAX)
if rank == 0:
    print(f"pairs: {size} ranks, {rounds} exchanges of {nbytes} bytes, {elapsed:.3f} s")
