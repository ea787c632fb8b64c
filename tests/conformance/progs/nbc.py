"""Non-blocking collectives: every kind, several in flight at once on two communicators, mixed
with point-to-point, completed in another order than started. Prints `rank R: <check> <v>`.
"""

import sys

import numpy as np

if sys.argv[1:2] == ["--mmpi"]:
    from mmpi import MPI
else:
    from mpi4py import MPI

world = MPI.COMM_WORLD
rank, size = world.Get_rank(), world.Get_size()
out = []
dup = world.Dup()
peer = (rank + 1) % size


def say(check, value):
    out.append(f"rank {rank}: {check} {value}")


for rnd in range(3):
    x = np.array([rank + 1.0, rnd], "d")
    ar, ar2 = np.empty(2), np.empty(2)
    bc = np.array([rnd * 10 + rank] * 3, "i") if rank == 1 % size else np.empty(3, "i")
    ga = np.empty(size * 2, "d") if rank == 0 else None
    ag = np.empty(size, "i")
    a2a_s = np.arange(size, dtype="i") + 100 * rank
    a2a_r = np.empty(size, "i")
    sc = np.empty(1, "d")
    ex = np.zeros(1, "d")
    rsb = np.empty(1, "d")
    red = np.empty(2) if rank == size - 1 else None
    reqs = [
        world.Ibarrier(),
        world.Iallreduce(x, ar, MPI.SUM),
        dup.Iallreduce(x * 2, ar2, MPI.MAX),
        world.Ibcast(bc, root=1 % size),
        world.Igather(x, ga, root=0),
        world.Iallgather(np.array([rank * rnd], "i"), ag),
        dup.Ialltoall(a2a_s, a2a_r),
        world.Iscan(np.array([rank + 1.0]), sc, MPI.SUM),
        world.Iexscan(np.array([rank + 1.0]), ex, MPI.SUM),
        dup.Ireduce_scatter_block(np.arange(size, dtype="d") + rank, rsb, MPI.SUM),
        world.Ireduce(x, red, MPI.SUM, root=size - 1),
    ]
    # point-to-point while they are in flight
    s = world.Isend(np.array([rank, rnd], "i"), peer, 40 + rnd)
    p2p = np.empty(2, "i")
    world.Recv(p2p, (rank - 1) % size, 40 + rnd)
    s.Wait()
    for r in reversed(reqs):  # completed in the other order than started
        r.Wait()
    say(f"round{rnd}", (ar.tolist(), ar2.tolist(), bc.tolist(), ag.tolist(), a2a_r.tolist(),
                        sc.tolist(), ex.tolist() if rank else None, rsb.tolist(),
                        p2p.tolist()))
    if rank == 0:
        say(f"gather{rnd}", ga.tolist())
    if rank == size - 1:
        say(f"reduce{rnd}", red.tolist())

# v-forms and scatter
counts = [i + 1 for i in range(size)]
sv = np.arange(sum(counts), dtype="d")
rv = np.empty(counts[rank])
r1 = world.Iscatterv([sv, counts], rv, root=0) if rank == 0 else world.Iscatterv(None, rv,
                                                                                  root=0)
agv = np.empty(sum(counts))
r2 = world.Iallgatherv(np.full(counts[rank], rank, "d"), [agv, counts])
one = np.empty(1, "i")
r3 = world.Iscatter(np.arange(size, dtype="i") if rank == 0 else None, one, root=0)
MPI.Request.Waitall([r3, r2, r1])
say("vforms", (rv.tolist(), agv.tolist(), int(one[0])))

# testing to completion
t = dup.Ibarrier()
while not t.Test():
    pass
say("tested", True)

# Alltoallw: a count, a byte displacement and a datatype per rank (a strided one received on
# rank 1), blocking, non-blocking and persistent, and in place
room = size + 1  # ints per block: blocks never overlap
sb, rb = np.full(room * size, -1, "i"), np.full(room * size, -1, "i")
for j in range(size):
    sb[room * j:room * j + j + 1] = 100 * rank + j
strided = MPI.INT.Create_vector(2, 1, 2).Commit()
send = [sb, [j + 1 for j in range(size)], [4 * room * j for j in range(size)],
        [MPI.INT] * size]
recv = [rb, [1 if rank == 1 else rank + 1] * size, [4 * room * i for i in range(size)],
        [strided if rank == 1 else MPI.INT] * size]
world.Alltoallw(send, recv)
nb = np.full(room * size, -1, "i")
world.Ialltoallw(send, [nb, *recv[1:]]).Wait()
pr = np.full(room * size, -1, "i")
p = world.Alltoallw_init(send, [pr, *recv[1:]])
p.Start()
p.Wait()
p.Free()
inplace = np.arange(size, dtype="i") + 10 * rank
world.Alltoallw(MPI.IN_PLACE, [inplace, [1] * size, [4 * j for j in range(size)],
                               [MPI.INT] * size])
# at MPI.BOTTOM: datatypes that hold the blocks' addresses
sa, ra = np.arange(2 * size, dtype="i") + 100 * rank, np.full(2 * size, -1, "i")
at = [MPI.Datatype.Create_struct([2], [MPI.Get_address(buf) + 8 * j], [MPI.INT]).Commit()
      for buf in (sa, ra) for j in range(size)]
world.Alltoallw([MPI.BOTTOM, [1] * size, [0] * size, at[:size]],
                [MPI.BOTTOM, [1] * size, [0] * size, at[size:]])
for t in at:
    t.Free()
say("alltoallw", (rb.tolist(), bool((nb == rb).all()), bool((pr == rb).all()),
                  inplace.tolist(), ra.tolist()))
strided.Free()
world.Barrier()
every = world.gather(out, root=0)  # one writer: lines of several ranks never interleave
if rank == 0:
    print("\n".join(line for lines in every for line in lines), flush=True)
