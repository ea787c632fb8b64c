"""A crossing of a later call must not fail a receive of an earlier call that is still posted.

Rank 1 (high) starts two Ibcasts from rank 0 on one communicator: the first large (its receive
through the matcher is posted), the second small (a crossing). Then it waits in a Barrier on
another communicator, whose wait probes its forwarder link for crossings only: it takes the
second Ibcast's crossing before the first one's large envelope, which came first but is not a
crossing. The old code took that for a size mismatch of the first Ibcast and failed it.
`python crossing_overtakes.py` on 1+1 ranks.
"""

import time

import numpy as np

from mmpi import MPI

world = MPI.COMM_WORLD
rank = world.Get_rank()
x, z = world.Dup(), world.Dup()
big = np.arange(100_000, dtype=np.uint8) if rank == 0 else np.zeros(100_000, np.uint8)
small = np.arange(10, dtype=np.int64) if rank == 0 else np.zeros(10, np.int64)
for _ in range(3):
    q1 = x.Ibcast(big, 0)
    q2 = x.Ibcast(small, 0)
    if rank == 0:
        MPI.Request.Waitall([q1, q2])
    else:
        time.sleep(0.5)  # both Ibcasts' parts and rank 0's Barrier crossing are here now
    z.Barrier()
    MPI.Request.Waitall([q1, q2])
    assert (big == np.arange(100_000, dtype=np.uint8)).all() and (small == np.arange(10)).all()
    if rank:
        big[:] = 0
        small[:] = 0
print(f"rank {rank}: ok", flush=True)
