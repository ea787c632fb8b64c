"""Every rank exchanges messages across the zipper for SECONDS: `python talk.py SECONDS`."""

import sys
import time

import numpy as np

from mmpi import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
peer = (rank + size // 2) % size
out, buf = np.ones(1 << 12), np.zeros(1 << 12)
end = time.monotonic() + float(sys.argv[1])
while time.monotonic() < end:
    comm.Sendrecv(out, peer, 1, buf, peer, 1)
    time.sleep(0.01)
print(f"rank {rank}: talked until the end", flush=True)
