"""Progress threads (MMPI_PROGRESS): non-blocking calls complete while the program makes no call.

Every rank starts an Iallreduce on COMM_WORLD and on a split communicator, an Ibcast, and a
large Isend/Irecv across the zipper, then sleeps without calling MPI. With a thread on every
rank (all), every operation must have completed by the end of the sleep (looked at without
progressing: the request's operation, not Test). Meanwhile a thread of the program computes,
and another one makes MPI calls of its own, serialized with the main thread by the program's
lock (the thread level the bridge gives). Every result is checked.

argv: mode (off, leaders or all), as MMPI_PROGRESS was set.
"""

import sys
import threading
import time

import numpy as np
from mpi4py import MPI

from mmpi._runtime import bootstrap as _bootstrap
from mmpi._runtime import progress as _progress

mode = sys.argv[1]
comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
half = comm.Split(rank % 2, rank)
big = 1 << 20
peer = size - 1 - rank  # crosses the zipper (low ranks come first)
mine = threading.Lock()  # the program's own serialization (MPI_THREAD_SERIALIZED)
stop = threading.Event()
errors = []


def chatter():
    """A thread of the program with MPI calls of its own, serialized by the program."""
    try:
        for n in range(5):  # as many as the peer's thread makes
            with mine:
                got = comm.sendrecv(("hello", rank, n), dest=peer, sendtag=77, source=peer,
                                    recvtag=77)
            if got != ("hello", peer, n):
                errors.append(f"chatter got {got}")
            time.sleep(0.001)
    except Exception as exc:  # noqa: BLE001
        errors.append(repr(exc))


def compute():
    a = np.ones(1 << 16)
    while not stop.is_set():
        np.multiply(a, 1.0000001, out=a)


for rounds in range(5):
    a = np.full(4096, rank + rounds, np.float64)
    b = np.zeros_like(a)
    h = np.full(8, rank, np.int64)
    hb = np.zeros_like(h)
    bc = np.full(big // 8, rounds if rank == 0 else -1, np.float64)
    out = np.arange(big // 8, dtype=np.float64) + rank
    inn = np.zeros(big // 8)
    with mine:
        reqs = [comm.Iallreduce(a, b), half.Iallreduce(h, hb), comm.Ibcast(bc, 0),
                comm.Isend(out, peer, 5), comm.Irecv(inn, peer, 5)]
    helpers = [threading.Thread(target=chatter), threading.Thread(target=compute)]
    for t in helpers:
        t.start()
    deadline = time.monotonic() + (10 if mode == "all" else 0.3)
    while time.monotonic() < deadline and not all(r._op.done for r in reqs):
        time.sleep(0.005)  # no MPI call from this thread
    done = [r._op.done for r in reqs]
    stop.set()
    for t in helpers:
        t.join()
    stop.clear()
    if mode == "all" and not all(done):
        errors.append(f"round {rounds}: not completed by the progress thread: {done}")
    with mine:
        MPI.Request.Waitall(reqs)
    want = sum(range(size)) + size * rounds
    if not (b == want).all():
        errors.append(f"Iallreduce gave {b[0]}, expected {want}")
    members = [r for r in range(size) if r % 2 == rank % 2]
    if not (hb == sum(members)).all():
        errors.append(f"half Iallreduce gave {hb[0]}, expected {sum(members)}")
    if not (bc == rounds).all():
        errors.append(f"Ibcast gave {bc[0]}, expected {rounds}")
    if not (inn == np.arange(big // 8) + peer).all():
        errors.append("Irecv: wrong data")

t = _progress.GATE.thread
passes = (t.passes, t.moved) if t is not None else (0, 0)
leader = _bootstrap.engine().local_rank == 0
if (mode == "all" or (mode == "leaders" and leader)) and not (_progress.running()
                                                              and passes[1] > 0):
    errors.append(f"no progress thread at work: {passes}")
if mode == "leaders" and not leader and _progress.running():
    errors.append("a progress thread on a rank that leads no cluster")
if mode == "off" and _progress.running():
    errors.append("a progress thread runs with MMPI_PROGRESS=off")
comm.Barrier()
print(f"rank {rank}: progress {'ok' if not errors else 'FAILED ' + '; '.join(errors)} "
      f"thread {_progress.running()} passes {passes[0]} moved {passes[1]}", flush=True)
sys.exit(1 if errors else 0)
