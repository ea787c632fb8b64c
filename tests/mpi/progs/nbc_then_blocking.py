"""A non-blocking collective, then a blocking one on the same communicator, then its Wait.

Legal MPI: the blocking call must let the pending one finish. Through the bridge the
pending call's leader waits for the other leader's part (a large message through the
matcher) while that leader, done already, has sent its part of the blocking call (a
crossing): a drain that brings both must not take the later crossing for this call's part.

`python nbc_then_blocking.py ITERS BLOCK`: BLOCK int64 per block (0: random sizes). With
blocks of 1,500 int64 on 2+2 the old code failed within a few dozen iterations, every time.
"""

import sys

import numpy as np

from mmpi import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
iters, block = int(sys.argv[1]), int(sys.argv[2])
rng = np.random.default_rng(7)  # the same on every rank: every rank knows every count
for it in range(iters):
    counts = (np.full((size, size), block) if block else rng.integers(0, 4000, (size, size)))
    sc, rc = counts[rank].tolist(), counts[:, rank].tolist()
    send = np.concatenate([np.full(n, 1000 * rank + j + it, np.int64)
                           for j, n in enumerate(sc)])
    recv = np.full(sum(rc), -1, np.int64)
    q = comm.Ialltoallv([send, sc], [recv, rc])
    if it % 2:
        comm.Barrier()
    else:
        total = np.zeros(1, np.int64)
        comm.Allreduce(np.array([it], np.int64), total)
        assert total[0] == it * size, (it, total)
    q.Wait()
    pos = 0
    for j, n in enumerate(rc):
        assert (recv[pos:pos + n] == 1000 * j + rank + it).all(), (it, j)
        pos += n
print(f"rank {rank}: ok", flush=True)
