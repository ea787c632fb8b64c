"""Large messages before their receives: bounded receiver memory, and no deadlock.

`flood.py slow N MIB`: the first rank of the low cluster sends the first rank of the high
cluster N messages of MIB MiB at once (Isend); the receiver sleeps first, then receives
them all; it prints its peak resident memory. `flood.py mutual N MIB`: those two ranks each
post N such Isends to the other before any receive, then receive. Every byte is checked.
"""

import resource
import sys
import time

import numpy as np

from mmpi import MPI

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
mode, n, mib = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
low = comm.layout.low_size
size = mib << 20
peer = {0: low, low: 0}.get(rank)


def payload(k: int) -> np.ndarray:
    return np.full(size, k % 251, np.uint8)


def receive_all(src: int) -> None:
    buf = np.empty(size, np.uint8)
    for k in range(n):
        comm.Recv(buf, src, k)
        assert buf[0] == k % 251 and buf[-1] == k % 251, (k, buf[0], buf[-1])


if peer is not None:
    sends = []
    if mode == "mutual" or rank == 0:
        data = [payload(k) for k in range(min(n, 251))]  # reused: sends only read them
        sends = [comm.Isend(data[k % 251], peer, k) for k in range(n)]
    if mode == "mutual" or rank == low:
        time.sleep(2)  # everything the sender can push arrives before any receive
        receive_all(peer)
    MPI.Request.Waitall(sends)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    print(f"rank {rank}: received {n if (mode == 'mutual' or rank == low) else 0} x {mib} MiB,"
          f" peak rss {peak} MiB", flush=True)
comm.Barrier()
