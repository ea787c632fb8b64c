"""Small blocking Barriers, Allreduces, Bcasts and Reduces: the compiled path's cases, checked.

`python compiled_coll.py SEED ROUNDS` on a bridged job: on COMM_WORLD, a split of it and a dup
alive at once, a seeded mix of Allreduces (dtypes, predefined ops, in place or not), Bcasts
and Reduces (any root; up to 64 bytes they carry their data in the check) and Barriers; now
and then a rank comes late (long enough for the waits' back-off to nap and the engine to drain the
links), and messages between the clusters are in flight across the calls.
Each rank prints how many calls took the compiled path (`_collectives/compiled.py`), so that
the test can tell it ran where built and did not under MMPI_RANK_PATH=python (the calls
the compiled front of a communicator takes, `_backend/cfront.c`, counted too).
"""

import sys
import time

import numpy as np

from mmpi import MPI
from mmpi._collectives import compiled

world = MPI.COMM_WORLD
rank, size = world.Get_rank(), world.Get_size()
seed, rounds = int(sys.argv[1]), int(sys.argv[2])
rng = np.random.default_rng(seed)  # the same draws on every rank

ran = 0
_run = compiled._run


class Counted:
    """A communicator's compiled front (_backend/cfront.c), counting the calls it takes."""

    def __init__(self, front):
        self.front = front

    def took(self, done):
        global ran
        ran += bool(done)
        return done

    def barrier(self):
        return self.took(self.front.barrier())

    def bcast(self, buf, root):
        return self.took(self.front.bcast(buf, root))

    def allreduce(self, sendbuf, recvbuf, op):
        return self.took(self.front.allreduce(sendbuf, recvbuf, op))

    def reduce(self, sendbuf, recvbuf, op, root):
        return self.took(self.front.reduce(sendbuf, recvbuf, op, root))


def counting(c, *args, **kwargs):
    global ran
    ran += 1
    out = _run(c, *args, **kwargs)
    if c.core.front and type(c.core.front) is not Counted:
        c.core.front = Counted(c.core.front)
    return out


compiled._run = counting

halves = world.Split(rank % 2, rank)  # each spans both clusters where size allows
dup = world.Dup()
comms = [world, halves, dup]

OPS = {"SUM": (MPI.SUM, np.sum), "MAX": (MPI.MAX, np.max), "MIN": (MPI.MIN, np.min),
       "PROD": (MPI.PROD, np.prod), "BAND": (MPI.BAND, np.bitwise_and.reduce),
       "BOR": (MPI.BOR, np.bitwise_or.reduce)}
FLOATS = ("SUM", "MAX", "MIN", "PROD")
DTYPES = (np.float64, np.float32, np.int32, np.int64, np.uint8)
peer = (rank + size // 2) % size  # a rank of the other cluster when the clusters are even
inbox = np.empty(4, np.int64)


def values(comm_rank: int, n: int, dtype, op: str, call: int) -> np.ndarray:
    """Rank `comm_rank`'s input: small, so that products and sums stay exact."""
    base = (np.arange(n) + comm_rank + call) % 3 + 1
    if op in ("BAND", "BOR"):
        base = base * (comm_rank + 1) + call
    return base.astype(dtype)


calls = 0
for i in range(rounds):
    comm = comms[int(rng.integers(len(comms)))]
    late = int(rng.integers(size)) if rng.random() < 0.15 else -1
    nap = 0.02 if rng.random() < 0.5 else 0.001
    talk = rng.random() < 0.3
    if talk:  # in flight across the call: drained by its waits or after it
        sreq = world.Isend(np.full(4, i, np.int64), dest=peer, tag=i)
        rreq = world.Irecv(inbox, source=(rank - size // 2) % size, tag=i)
    if rank == late:
        time.sleep(nap)
    me, n_ranks = comm.Get_rank(), comm.Get_size()
    pick = rng.random()
    if pick < 0.2:
        comm.Barrier()
    elif pick < 0.35:
        root = int(rng.integers(n_ranks))
        op = list(OPS)[int(rng.integers(4))]  # the float ones, which every dtype takes
        dtype = [d for d in DTYPES if op != "PROD" or d != np.uint8][int(rng.integers(4))]
        n = int(rng.choice([1, 2, 8, 9, 100]))
        mine = values(me, n, dtype, op, i)
        want = OPS[op][1](np.stack([values(r, n, dtype, op, i) for r in range(n_ranks)]),
                          axis=0).astype(dtype)
        in_place = rng.random() < 0.3  # drawn on every rank: the draws stay in step
        if me == root and in_place:
            got = mine.copy()
            comm.Reduce(MPI.IN_PLACE, got, OPS[op][0], root=root)
        else:
            got = np.full(n, 99, dtype) if me == root else None
            comm.Reduce(mine, got, OPS[op][0], root=root)
        if me == root:
            assert got.tolist() == want.tolist(), (i, "Reduce", op, dtype, got, want)
    elif pick < 0.5:
        root = int(rng.integers(n_ranks))
        n = int(rng.choice([1, 3, 8, 9, 100]))  # 8 doubles fill the check's room, 9 do not
        dtype = DTYPES[int(rng.integers(len(DTYPES)))]
        want = values(root, n, dtype, "SUM", i)
        got = want.copy() if me == root else np.full(n, 99, dtype)
        comm.Bcast(got, root=root)
        assert got.tolist() == want.tolist(), (i, root, dtype, got, want)
    else:
        op = list(OPS)[int(rng.integers(len(OPS)))]
        dtypes = [d for d in DTYPES if op in ("BAND", "BOR") and np.issubdtype(d, np.integer)
                  or op not in ("BAND", "BOR") and (op != "PROD" or d != np.uint8)]
        dtype = dtypes[int(rng.integers(len(dtypes)))]
        n = int(rng.choice([1, 2, 3, 16, 100]))
        mine = values(me, n, dtype, op, i)
        want = OPS[op][1](np.stack([values(r, n, dtype, op, i) for r in range(n_ranks)]),
                          axis=0).astype(dtype)
        if rng.random() < 0.3:
            got = mine.copy()
            comm.Allreduce(MPI.IN_PLACE, got, OPS[op][0])
        else:
            got = np.full(n, 99, dtype)
            comm.Allreduce(mine, got, OPS[op][0])
        assert got.tolist() == want.tolist(), (i, op, dtype, got, want)
        assert mine.tolist() == values(me, n, dtype, op, i).tolist(), "the send buffer changed"
    calls += 1
    if talk:
        MPI.Request.Waitall([sreq, rreq])
        assert inbox.tolist() == [i] * 4, (i, inbox)

for c in (halves, dup):
    c.Free()
print(f"rank {rank}: compiled ok, {calls} calls, {ran} compiled", flush=True)
