"""A leader's crossing that arrives while the other leader waits elsewhere is kept, in order.

A collective's small crossings (protocol T_COLL) are taken outside MPI matching, in arrival
order per (context, sender). Here one cluster's non-leader comes late to each call, so its
leader still waits in the native part (draining the forwarder link now and then) when the
other leader's crossing comes in: the drain must keep it for the crossing's own wait, and
the next collective's crossing must not be taken for it; nor may a part that came through the
matcher instead (Gatherv, allgather of objects); nor may a later collective's part through the
matcher be taken for this call's, which came earlier as a crossing and was kept (bcast of an
object, then Alltoall). `python early_crossings.py ROUNDS`
on 2+2 ranks; every rank prints how many crossings its drains kept.
"""

import sys
import time

import numpy as np

from mmpi import MPI
from mmpi.wire import protocol as P

world = MPI.COMM_WORLD
rank, size = world.Get_rank(), world.Get_size()
rounds = int(sys.argv[1])

engine = world._core.engine
kept = 0
_on_forwarded = engine.on_forwarded


def spy(link, buf, tag):
    """Count the crossings that a drain (progress) picks up before anybody asks for them."""
    global kept
    if tag == P.T_COLL:
        kept += 1
    return _on_forwarded(link, buf, tag)


engine.on_forwarded = spy
x = np.array([rank + 1.0, 2.0 * rank])
want = [sum(range(1, size + 1)), 2.0 * sum(range(size))]
y = np.empty(2)
b = np.empty(3, np.int64)


def late(i: int) -> None:
    """The non-leader of the low, then of the high cluster comes late to every call."""
    if rank == (1 if i % 2 == 0 else 3):
        time.sleep(0.02)


for i in range(rounds):
    root = i % size
    late(i)
    world.Allreduce(x, y, MPI.SUM)
    assert y.tolist() == want, y
    late(i)
    world.Barrier()
    b[:] = [i, root, 7] if rank == root else -1
    late(i)
    world.Bcast(b, root=root)
    assert b.tolist() == [i, root, 7], (i, root, b)
    late(i)
    out = np.zeros(2) if rank == root else None
    world.Reduce(x, out, MPI.SUM, root=root)
    if rank == root:
        assert out.tolist() == want, out
    # Parts whose size only the sender knows: a crossing when small, else a message through
    # the matcher (every third round), which the receiver must take instead.
    n = 5000 if i % 3 == 0 else 3  # doubles: 40000 or 24 bytes per rank
    late(i)
    got = np.empty(n * size) if rank == root else None
    world.Gatherv(np.full(n, float(rank)), [got, [n] * size] if rank == root else None, root)
    if rank == root:
        assert (got == np.repeat(np.arange(size, dtype=float), n)).all(), (i, got[::n])
    late(i)
    objs = world.allgather((rank, "x" * (8 * n)))
    assert objs == [(r, "x" * (8 * n)) for r in range(size)], [o[0] for o in objs]
    # A part whose size only the sender knows, sent as a crossing, then the same sender's
    # part of the next collective through the matcher (Alltoall blocks of 64 KiB go straight
    # to their ranks): while the high leader waits for its own non-leader, a drain takes both,
    # and its wait for the first must take the kept crossing, not fail on the later message.
    if rank == 3:
        time.sleep(0.02)
        world.Send(b, dest=2, tag=i)
    elif rank == 2:
        world.Recv(b, source=3, tag=i)
    obj = world.bcast(("from", 0, i) if rank == 0 else None, root=0)
    assert obj == ("from", 0, i), (i, obj)
    blocks = np.full((size, 8192), float(rank))
    mixed = np.empty_like(blocks)
    world.Alltoall(blocks, mixed)
    assert (mixed == np.arange(size, dtype=float)[:, None]).all(), (i, mixed[:, 0])
assert not any(engine.crossings.kept.values()), engine.crossings.kept
print(f"rank {rank}: ok, drains kept {kept} crossings", flush=True)
