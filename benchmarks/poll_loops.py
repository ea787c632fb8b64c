"""Ping-pong across the zipper where the receiving side waits in a loop of its own.

`mmpi-run --low 1 --high 1 -- python benchmarks/poll_loops.py [wait|test|iprobe|work] [ITERS]`
prints the one-way time of an 8 B ping-pong between the first and the last rank when each
receive is waited for by `Recv` (wait), by `while not req.Test(): pass` (test), by
`while not comm.Iprobe(...): pass` then `Recv` (iprobe), or by a Test loop with about 50 us
of computation between tests (work: the compute-overlap pattern, which must not be slowed).
"""

import sys
import time

import numpy as np

from mmpi import MPI

w = MPI.COMM_WORLD
rank, size = w.Get_rank(), w.Get_size()
how = sys.argv[1] if len(sys.argv) > 1 else "test"
iters = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
peer = size - 1 - rank
buf = np.zeros(8, np.uint8)
work = np.ones(4096)


def receive() -> None:
    """Receive the next message from `peer`, waiting the way `how` says."""
    if how == "wait":
        w.Recv(buf, peer, 1)
    elif how == "iprobe":
        while not w.Iprobe(peer, 1):
            pass
        w.Recv(buf, peer, 1)
    else:
        req = w.Irecv(buf, peer, 1)
        while not req.Test():
            if how == "work":
                for _ in range(20):
                    work.sum()


w.Barrier()
t0 = 0.0
for i in range(iters + 100):
    if i == 100:
        t0 = time.perf_counter()
    if rank == 0:
        w.Send(buf, peer, 1)
        receive()
    elif rank == size - 1:
        receive()
        w.Send(buf, peer, 1)
if rank == 0:
    print(f"{how}: {(time.perf_counter() - t0) / iters / 2 * 1e6:.1f} us one way", flush=True)
