"""One-sided windows on COMM_WORLD (across the zipper when bridged): Put and Get between
fences, a strided target datatype, Accumulate under locks, Get_accumulate, Fetch_and_op and
Compare_and_swap on a counter, Post/Start/Complete/Wait, Lock_all with Flush, request-based
Rget, Win.Allocate's memory and the window's attributes. Prints `rank R: <check> <value>`.
"""

import sys

import numpy as np

if sys.argv[1:2] == ["--mmpi"]:
    from mmpi import MPI
else:
    from mpi4py import MPI

world = MPI.COMM_WORLD
T = MPI.LONG  # numpy's int64 here: accumulates need the origin's type signature
rank, size = world.Get_rank(), world.Get_size()
out = []


def say(check, value):
    out.append(f"rank {rank}: {check} {value}")


mem = np.zeros(2 * size, "i8")
win = MPI.Win.Create(mem, 8, MPI.INFO_NULL, world)
say("attrs", (win.Get_attr(MPI.WIN_SIZE), win.Get_attr(MPI.WIN_DISP_UNIT),
              win.Get_group().Get_size()))

# fences: every rank puts rank + 1 into slot rank of every window, then gets its neighbour's
win.Fence()
for t in range(size):
    win.Put(np.array([rank + 1], "i8"), t, (rank, 1, T))
win.Fence()
got = np.zeros(2 * size, "i8")
win.Get(got, (rank + 1) % size)
win.Fence()
say("fence put/get", got[:size].tolist())

# a strided target: rank r writes into every other slot of the second half of rank 0's window
every_other = T.Create_vector(2, 1, 2).Commit()
win.Fence()
if rank == size - 1:
    win.Put(np.array([70, 71], "i8"), 0, (size, 1, every_other))
win.Fence()
every_other.Free()
if rank == 0:
    say("strided", mem[size:size + 3].tolist())

# accumulate under exclusive locks, read back under a shared one
world.Barrier()
win.Lock(0)
win.Accumulate(np.full(size, 10 * (rank + 1), "i8"), 0, (0, size, T), MPI.SUM)
win.Unlock(0)
world.Barrier()
win.Lock(0, MPI.LOCK_SHARED)
seen = np.zeros(size, "i8")
win.Get(seen, 0, (0, size, T))
win.Unlock(0)
say("accumulated", seen.tolist())

# a counter on the last rank: Fetch_and_op, Get_accumulate, Compare_and_swap
world.Barrier()
last = size - 1
old = np.zeros(1, "i8")
win.Lock(last)
win.Fetch_and_op(np.ones(1, "i8"), old, last, 2 * size - 1, MPI.SUM)
win.Unlock(last)
say("tickets", sorted(world.allgather(int(old[0]))))
world.Barrier()
before = np.zeros(1, "i8")
win.Lock(last)
win.Get_accumulate(np.array([rank], "i8"), before, last, (2 * size - 2, 1, T),
                   MPI.MAX)
win.Unlock(last)
world.Barrier()
swapped = np.zeros(1, "i8")
win.Lock(last)
win.Compare_and_swap(np.array([100 + rank], "i8"), np.array([size - 1], "i8"), swapped, last,
                     2 * size - 2)
win.Unlock(last)
winners = world.allgather(int(swapped[0]) == size - 1)
say("one swap won", winners.count(True))

# post/start/complete/wait: rank 0 exposes, the others put their rank negated
world.Barrier()
group = win.Get_group()
if rank == 0:
    others = group.Excl([0])
    win.Post(others)
    win.Wait()
    others.Free()
    say("pscw", mem[1:size].tolist())
else:
    zero = group.Incl([0])
    win.Start(zero)
    win.Put(np.array([-rank], "i8"), 0, (rank, 1, T))
    win.Complete()
    zero.Free()
group.Free()

# lock_all, an Rget and a flush
world.Barrier()
win.Lock_all()
fresh = np.zeros(1, "i8")
req = win.Rget(fresh, 0, (1, 1, T))
req.Wait()
win.Flush_all()
win.Unlock_all()
say("rget", fresh.tolist())

# an empty Get_accumulate of bytes (MPI allows it; SUM is not defined on BYTE), and the atomic
# calls' one-element rule as mpi4py checks it
win.Lock(0)
empty = np.zeros(0, "u1")
win.Get_accumulate([empty, 0, MPI.BYTE], [empty, 0, MPI.BYTE], 0)
try:
    win.Fetch_and_op(np.ones(2, "i8"), np.zeros(1, "i8"), 0)
    say("fetch_and_op of two", "accepted")
except ValueError:
    say("fetch_and_op of two", "ValueError")
win.Unlock(0)
win.Free()

# Win.Allocate: the memory the window gives, written by the left neighbour
w2 = MPI.Win.Allocate(16, 8, MPI.INFO_NULL, world)
mine = np.frombuffer(w2.tomemory(), "i8")
mine[:] = -1
w2.Fence()
w2.Put(np.array([rank, rank * rank], "i8"), (rank + 1) % size)
w2.Fence()
say("allocated", mine.tolist())
w2.Free()

# Win.Create_dynamic: memory attached after, addressed by its address at the target;
# Shared_query of the memory this rank can load and store itself
w3 = MPI.Win.Create_dynamic(comm=world)
mem = np.zeros(8, "i")
w3.Attach(mem)
addrs = world.allgather(MPI.Get_address(mem))
right = (rank + 1) % size
w3.Fence()
w3.Put(np.full(2, rank + 100, "i"), right, (addrs[right] + 8, 2, MPI.INT))
w3.Accumulate(np.ones(1, "i"), right, (addrs[right], 1, MPI.INT), MPI.SUM)
w3.Fence()
got, old = np.zeros(2, "i"), np.zeros(1, "i")
w3.Lock(right)
w3.Get(got, right, (addrs[right] + 8, 2, MPI.INT))
w3.Fetch_and_op(np.array([5], "i"), old, right, addrs[right])
w3.Unlock(right)
world.Barrier()
say("dynamic", (mem.tolist(), got.tolist(), old.tolist(), len(w3.tomemory())))
w3.Detach(mem)
w3.Free()

every = world.gather(out, root=0)  # one writer: lines of several ranks never interleave
if rank == 0:
    print("\n".join(line for lines in every for line in lines), flush=True)
