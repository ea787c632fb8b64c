"""Communicators made while collectives are pending: legal programs that must not hang.

1. Rank 0 makes a communicator of itself with Create_group while an Ibcast is pending on the
   parent: Create_group is not a collective of the parent, so it must not wait for the Ibcast
   (which needs ranks that are busy duplicating the world meanwhile).
2. Rank 1 duplicates the world while its Iallreduce is pending; rank 0 waits for that
   Iallreduce first. The duplication must go on advancing rank 1's pending call (rank 0's Wait
   needs rank 1's next step), as MPI's progress rule says; a blocking native Comm_dup did not.
Every rank prints `rank R: ok`. 2+2 ranks.
"""

import numpy as np

from mmpi import MPI

world = MPI.COMM_WORLD
rank, size = world.Get_rank(), world.Get_size()
x = world.Dup()
for _ in range(3):
    buf = np.full(1000, rank, np.int64)
    q = x.Ibcast(buf, root=size - 1)
    if rank == 0:
        alone = x.Create_group(x.Get_group().Incl([0]))
        assert alone.Get_size() == 1
        alone.Free()
    d = world.Dup()
    q.Wait()
    assert (buf == size - 1).all()
    total = np.zeros(1, np.int64)
    q = x.Iallreduce(np.array([rank], np.int64), total)
    if rank == 0:
        q.Wait()
        d2 = world.Dup()
    else:
        d2 = world.Dup()
        q.Wait()
    assert total[0] == size * (size - 1) // 2
    d.Barrier()
    d.Free()
    d2.Free()
print(f"rank {rank}: ok", flush=True)
