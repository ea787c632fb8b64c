"""Every rank exchanges a distinct 1 MiB buffer with every other rank and checks what it got."""

import sys

import numpy as np

from mmpi import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
n = int(sys.argv[1]) if len(sys.argv) > 1 else 1 << 17  # float64s per message
base = np.arange(n, dtype="f8")
for shift in range(1, size):
    dest, src = (rank + shift) % size, (rank - shift) % size
    out = base + (rank * size + dest) * n  # says who sent it to whom, element by element
    buf = np.empty(n)
    comm.Sendrecv(out, dest, shift, buf, src, shift)
    if not np.array_equal(buf, base + (src * size + rank) * n):
        raise AssertionError(f"rank {rank}: wrong data from rank {src}")
comm.Barrier()
print(f"all-pairs rank {rank}: {size - 1} exchanges of {8 * n} B OK", flush=True)
