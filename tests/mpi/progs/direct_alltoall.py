"""Blocking Alltoalls of large blocks: the direct path's cases (`_collectives/direct.py`), checked.

`python direct_alltoall.py SEED ROUNDS` on a bridged job: on COMM_WORLD, a split of it and a
dup alive at once, a seeded mix of Alltoalls whose blocks go straight to their ranks (40 KB to
160 KiB, three dtypes), and around them now and then:
- a late rank: its peers' envelopes come before its call (and, 30 ms late, its peers' waits
  nap);
- two calls back to back, a late rank making a progress step (an Iprobe) between them: the
  next call's envelopes wait queued when it starts, and the reference's receives take them;
- an Ialltoall just before on the same communicator (pending when the Alltoall starts);
- a large message between two ranks in flight across the call (the call's drain finds its
  envelope and hands it on);
- a flood of large messages to a rank of the other cluster that receives them only after the
  call: with MMPI_RECV_BUDGET small the sender's credit runs out, its call goes the
  reference's way and its blocks come deferred;
- a Barrier.
Every block is checked. Each rank prints how many calls took the direct path, how many blocks
it received the reference's way from it (moved), and how many such calls found envelopes
queued (early), so that the test can tell it ran where built and did not under
MMPI_RANK_PATH=python.
"""

import sys
import time

import numpy as np

from mmpi import MPI
from mmpi._collectives import direct

world = MPI.COMM_WORLD
rank, size = world.Get_rank(), world.Get_size()
seed, rounds = int(sys.argv[1]), int(sys.argv[2])
rng = np.random.default_rng(seed)  # the same draws on every rank

ran = moved = early = 0
_exchange, _reference_way, _early = direct._exchange, direct._the_reference_way, direct._early


def exchange(*args):
    global ran
    ran += 1
    return _exchange(*args)


def reference_way(c, slots, ops):
    global moved
    moved += len(slots)
    return _reference_way(c, slots, ops)


def early_ones(c, blk):
    global early
    got = _early(c, blk)
    early += len(got or ())
    return got


direct._exchange, direct._the_reference_way, direct._early = exchange, reference_way, early_ones

halves = world.Split(rank % 2, rank)  # each spans both clusters where size allows
dup = world.Dup()
comms = [world, halves, dup]
peer = (rank + size // 2) % size  # a rank of the other cluster when the clusters are even
DTYPES = (np.uint8, np.int32, np.float64)
SIZES = (40000, 65536, 100000, 163840)


def value(sender: int, receiver: int, call: int) -> int:
    return (sender * 7 + receiver * 3 + call) % 100 + 1


def fail(what: str) -> None:
    print(f"rank {rank}: WRONG {what}", flush=True)
    world.Abort(3)


for call in range(rounds):
    comm = comms[rng.integers(len(comms))]
    dtype = DTYPES[rng.integers(len(DTYPES))]
    n = int(rng.choice(SIZES)) // np.dtype(dtype).itemsize
    kind = int(rng.integers(6))
    late = int(rng.integers(size))
    cr, cs = comm.Get_rank(), comm.Get_size()
    send = np.empty(n * cs, dtype)
    for j in range(cs):
        send[j * n:(j + 1) * n] = value(cr, j, call)
    recv = np.zeros(n * cs, dtype)
    if kind == 0 and rank == late:
        time.sleep(0.004 if call % 3 else 0.03)  # 30 ms: the others' waits nap
    pending = inflight = flood = None
    if kind == 1:
        s2 = np.full(4 * cs, cr, np.int32)
        r2 = np.zeros(4 * cs, np.int32)
        pending = comm.Ialltoall(s2, r2)
    elif kind == 2:
        out = np.full(30000, rank, np.int32)
        back = np.zeros(30000, np.int32)
        inflight = [world.Irecv(back, peer, 7), world.Isend(out, peer, 7)]
    elif kind == 3:
        flood = [world.Isend(np.full(40000, k, np.int32), peer, 8) for k in range(6)]
    comm.Alltoall(send, recv)
    for i in range(cs):
        block = recv[i * n:(i + 1) * n]
        if block[0] != value(i, cr, call) or block[-1] != value(i, cr, call) \
                or not np.all(block == block[0]):
            fail(f"call {call}: block from rank {i} of {cs}, {n} x {dtype.__name__}")
    if pending is not None:
        pending.Wait()
        if not np.array_equal(r2, np.repeat(np.arange(cs, dtype=np.int32), 4)):
            fail(f"call {call}: the Ialltoall before")
    if inflight is not None:
        MPI.Request.Waitall(inflight)
        if not np.all(back == peer):
            fail(f"call {call}: the message in flight")
    if flood is not None:
        for k in range(6):
            got = np.zeros(40000, np.int32)
            world.Recv(got, peer, 8)
            if not np.all(got == k):
                fail(f"call {call}: flood message {k}")
        MPI.Request.Waitall(flood)
    if kind == 4:
        comm.Barrier()
    if kind == 5:  # back to back; the late rank's progress queues the next call's envelopes
        if rank == late:
            time.sleep(0.005)
            world.Iprobe(MPI.ANY_SOURCE, 99)
        recv[:] = 0
        comm.Alltoall(send, recv)
        for i in range(cs):
            if not np.all(recv[i * n:(i + 1) * n] == value(i, cr, call)):
                fail(f"call {call}, again: block from rank {i} of {cs}")

print(f"rank {rank}: direct ok, {rounds} calls, {ran} direct, {moved} moved, {early} early",
      flush=True)
