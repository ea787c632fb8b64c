"""Compute without any MPI call for SECONDS (longer than the forwarder timeout), then talk
across the zipper: a long computation must not be mistaken for a lost forwarder."""

import sys
import time

import numpy as np

from mmpi import MPI

comm = MPI.COMM_WORLD
t0 = time.monotonic()
while time.monotonic() - t0 < float(sys.argv[1]):
    pass  # busy, like a JIT compile or a long kernel: heartbeats pile up unread
peer = (comm.rank + comm.size // 2) % comm.size
got = np.zeros(1)
r = comm.Irecv(got, peer, 1)
comm.Send(np.full(1, comm.rank, dtype=float), peer, 1)
r.Wait()
assert got[0] == peer
print(f"rank {comm.rank}: talked after computing", flush=True)
