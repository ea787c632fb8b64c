"""mpi4py.util.sync on COMM_WORLD (across the zipper when bridged, through the import hook).

Its Mutex is an MCS queue lock in a window: a rank resets its own queue link, swaps itself in
as the tail, notes itself in its predecessor's link and spins on its own flag, polling with
Flush to itself and Win.Sync. Each rank enters the critical section ROUNDS times, all at
once or after a seeded random pause, and adds one to a counter on rank 0 with a Get then a
Put (not atomic: only the mutex keeps increments from being lost); a Counter's tickets and a
Condition's notify and wait go with it.
Prints `rank R: <check> <value>`.
"""

import random
import time

import numpy as np
from mpi4py import MPI
from mpi4py.util import sync

ROUNDS = 12
world = MPI.COMM_WORLD
rank, size = world.Get_rank(), world.Get_size()
rng = random.Random(1234 + rank)
out = []


def say(check, value):
    out.append(f"rank {rank}: {check} {value}")


mem = np.zeros(1, "i8")
win = MPI.Win.Create(mem if rank == 0 else None, 8, MPI.INFO_NULL, world)
mutex = sync.Mutex(comm=world)
one = np.zeros(1, "i8")
for k in range(ROUNDS):
    if k % 2:
        time.sleep(rng.random() * 0.004)
    else:
        world.Barrier()  # all at once: the queue behind the holder is as long as can be
    with mutex:
        win.Lock(0, MPI.LOCK_SHARED)
        win.Get(one, 0)
        win.Flush(0)
        one += 1
        win.Put(one, 0)
        win.Unlock(0)
world.Barrier()
if rank == 0:
    say("counter under the mutex", int(mem[0]))
say("mutex free after", mutex.locked())
mutex.free()
win.Free()

counter = sync.Counter(comm=world)
tickets = sorted(world.allgather([next(counter) for _ in range(5)]))
say("counter tickets", sorted(t for ts in tickets for t in ts) == list(range(5 * size)))
counter.free()

cond = sync.Condition(comm=world)
if rank == 0:
    woken = 0
    while woken < size - 1:  # a notify finds only those already waiting: until all were
        time.sleep(0.002)
        with cond:
            woken += cond.notify()
else:
    with cond:
        cond.wait()
    woken = 1
say("woken", world.allreduce(woken) == 2 * (size - 1))
cond.free()

every = world.gather(out, root=0)  # one writer: lines of several ranks never interleave
if rank == 0:
    print("\n".join(line for lines in every for line in lines), flush=True)
