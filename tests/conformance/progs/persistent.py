"""MPI 4 persistent collectives and partitioned point-to-point: every kind started several
times with new data each round, several alive at once on two communicators, started with
Startall, completed in another order; partitioned transfers along a ring with partitions
marked ready one by one, by range and by list, and with different partition counts on the
two sides. Prints `rank R: <check> <v>`.
"""

import sys

import numpy as np

if sys.argv[1:2] == ["--mmpi"]:
    from mmpi import MPI
else:
    from mpi4py import MPI

world = MPI.COMM_WORLD
rank, size = world.Get_rank(), world.Get_size()
dup = world.Dup()
out = []


def say(check, value):
    out.append(f"rank {rank}: {check} {value}")


x = np.zeros(2)
ar, ar2 = np.empty(2), np.empty(2)
bc = np.empty(3, "i")
ga = np.empty(size * 2) if rank == 0 else None
gv_counts = [r % 2 + 1 for r in range(size)]
gv = np.full(sum(gv_counts), -1.0)
gvs = np.zeros(gv_counts[rank])
ag = np.empty(size, "i")
mine = np.zeros(1, "i")
a2a_s, a2a_r = np.zeros(size, "i"), np.empty(size, "i")
sc, ex = np.empty(1), np.zeros(1)
one = np.zeros(1)
rsb = np.empty(1)
rs_in = np.zeros(size)
red = np.empty(2) if rank == size - 1 else None
scat_s = np.arange(size * 2, dtype="d") if rank == 0 else None
scat_r = np.empty(2)

reqs = [
    world.Barrier_init(),
    world.Allreduce_init(x, ar, MPI.SUM),
    dup.Allreduce_init(x, ar2, op=MPI.MAX),
    world.Bcast_init(bc, root=1 % size),
    world.Gather_init(x, ga, root=0),
    world.Allgatherv_init(gvs, [gv, gv_counts], MPI.INFO_NULL),
    world.Allgather_init(mine, ag),
    dup.Alltoall_init(a2a_s, a2a_r),
    world.Scan_init(one, sc, MPI.SUM),
    world.Exscan_init(one, ex, MPI.SUM),
    dup.Reduce_scatter_block_init(rs_in, rsb, MPI.SUM),
    world.Reduce_init(x, red, MPI.SUM, size - 1),
    world.Scatter_init(scat_s, scat_r, root=0),
]
for rnd in range(3):
    x[:] = [rank + 1.0, rnd]
    if rank == 1 % size:
        bc[:] = rnd * 10 + rank
    mine[0] = rank * (rnd + 1)
    gvs[:] = rank + 0.5 * rnd
    a2a_s[:] = np.arange(size) + 100 * rank + rnd
    one[0] = rank + 1.0 + rnd
    rs_in[:] = np.arange(size) + rank * rnd
    if scat_s is not None:
        scat_s[:] = np.arange(size * 2) * (rnd + 1)
    MPI.Prequest.Startall(reqs)
    for r in reversed(reqs):  # completed in the other order than started
        r.Wait()
    say(f"round{rnd}", (ar.tolist(), ar2.tolist(), bc.tolist(), ag.tolist(), a2a_r.tolist(),
                        sc.tolist(), ex.tolist() if rank else None, rsb.tolist(),
                        scat_r.tolist(), gv.tolist()))
    if rank == 0:
        say(f"gather{rnd}", ga.tolist())
    if rank == size - 1:
        say(f"reduce{rnd}", red.tolist())
for r in reqs:
    r.Free()
say("freed", all(r == MPI.REQUEST_NULL for r in reqs))

# partitioned transfers along the ring
dest, source = (rank + 1) % size, (rank - 1) % size
for rnd, (sparts, rparts) in enumerate([(1, 1), (3, 3), (4, 2), (2, 4)]):
    sbuf = np.arange(12, dtype="i") + 100 * rank + rnd
    rbuf = np.full(12, -1, "i")
    sreq = world.Psend_init(sbuf, sparts, dest, tag=7)
    rreq = world.Precv_init(rbuf, rparts, source, tag=7)
    for again in range(2):
        rreq.Start()
        early = any(rreq.Parrived(i) for i in range(rparts))
        world.Barrier()  # every receive is active before any partition goes
        sreq.Start()
        if again == 0:
            for i in reversed(range(sparts)):  # one by one, last first
                sreq.Pready(i)
        elif sparts > 1:
            sreq.Pready_range(0, sparts // 2 - 1)
            sreq.Pready_list(list(range(sparts // 2, sparts)))
        else:
            sreq.Pready_list([0])
        while not all(rreq.Parrived(i) for i in range(rparts)):
            pass
        MPI.Request.Waitall([sreq, rreq])
        say(f"part{rnd}.{again}", (early, rbuf.tolist()))
        sbuf += 1000
    sreq.Free()
    rreq.Free()

every = world.gather(out, root=0)  # one writer: lines of several ranks never interleave
if rank == 0:
    print("\n".join(line for lines in every for line in lines), flush=True)
