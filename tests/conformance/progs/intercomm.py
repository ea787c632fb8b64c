"""Intercommunicators: made by Create_intercomm (groups of unequal size, both across the
zipper and not) and Create_from_groups, their groups, point-to-point between the groups with
wildcards, every bridged collective in buffer and object form with each root, the vector and
reduce-scatter forms, non-blocking ones several at once and a persistent one, Dup, Merge with
both orders. Prints `rank R: <check> <v>`.

(Natively, MPICH 5.0.2 hangs in the next collective on an intercommunicator after an Ibcast
with MPI.PROC_NULL ranks, so the non-blocking rooted calls are not compared here.)
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


def say(check, value):
    out.append(f"rank {rank}: {check} {value}")


def exercise(name, inter, color):
    lr, ls, rs = inter.Get_rank(), inter.Get_size(), inter.Get_remote_size()
    say(f"{name}.shape", (lr, ls, rs, inter.Is_inter(), inter.Get_remote_group().Get_size(),
                          inter.Get_group().Get_rank()))
    # point-to-point: each rank to remote rank lr % rs, received from anyone
    inter.send((color, lr), dest=lr % rs, tag=3)
    got = sorted(inter.recv(source=MPI.ANY_SOURCE, tag=3) for _ in
                 range(sum(1 for r in range(rs) if r % ls == lr)))
    buf = np.full(2, -1, "i")
    req = inter.Irecv(buf, source=0, tag=4) if lr == 0 else None
    if lr == 0:
        inter.Send(np.array([color, 7], "i"), dest=0, tag=4)
        req.Wait()
    say(f"{name}.p2p", (got, buf.tolist()))
    inter.Barrier()
    inter.barrier()
    # rooted calls: each rank of each group is the root once
    for g in (0, 1):
        nroots = ls if g == color else rs
        for root in range(nroots):
            b = np.full(3, -1.0)
            gath = np.full(2 * rs, -1, "i")
            sc = np.full(2, -1, "i")
            red = np.full(2, -1.0)
            if g == color:
                who = MPI.ROOT if root == lr else MPI.PROC_NULL
                if root == lr:
                    b[:] = [root, color, 1.5]
                inter.Bcast(b, root=who)
                inter.Gather(np.array([lr, lr], "i"), gath, root=who)
                sc_send = np.arange(2 * rs, dtype="i") * (root + 1)
                inter.Scatter(sc_send, sc, root=who)
                inter.Reduce(np.array([lr + 1.0, 2.0]), red, MPI.SUM, root=who)
                ob = inter.bcast({"root": root, "c": color} if root == lr else None, root=who)
                og = inter.gather(("g", lr), root=who)
                osc = inter.scatter([("s", i, root) for i in range(rs)] if root == lr else
                                    None, root=who)
                ore = inter.reduce(lr + 1, op=MPI.PROD, root=who)
            else:
                inter.Bcast(b, root=root)
                inter.Gather(np.array([lr, color], "i"), None, root=root)
                inter.Scatter(None, sc, root=root)
                inter.Reduce(np.array([lr + 1.0, 3.0]), None, MPI.SUM, root=root)
                ob = inter.bcast(None, root=root)
                og = inter.gather(("g", lr, color), root=root)
                osc = inter.scatter(None, root=root)
                ore = inter.reduce(lr + 1, op=MPI.PROD, root=root)
            say(f"{name}.rooted{g}.{root}", (b.tolist(), gath.tolist(), sc.tolist(),
                                              red.tolist(), ob, og, osc, ore))
    # all-to-all calls
    ag = np.full(rs, -1, "i")
    inter.Allgather(np.array([lr * 10 + color], "i"), ag)
    ar = np.zeros(2)
    inter.Allreduce(np.array([lr + 1.0, color + 1.0]), ar, MPI.SUM)
    a2a = np.full(rs, -1, "i")
    inter.Alltoall(np.arange(rs, dtype="i") + 100 * lr + 1000 * color, a2a)
    say(f"{name}.all", (ag.tolist(), ar.tolist(), a2a.tolist(),
                        inter.allgather((lr, color)), inter.allreduce(lr + 1),
                        inter.alltoall([(lr, j) for j in range(rs)])))
    vector(name, inter, color)


def vector(name, inter, color):
    """The vector and reduce-scatter forms, then non-blocking and persistent ones."""
    lr, ls, rs = inter.Get_rank(), inter.Get_size(), inter.Get_remote_size()
    cnt = [j + 1 for j in range(rs)]
    agv = np.full(sum(cnt), -1, "i")
    inter.Allgatherv(np.full(lr + 1, lr * 10 + color, "i"), [agv, cnt])
    s_cnt = [(lr + j) % 3 for j in range(rs)]  # to remote rank j
    r_cnt = [(i + lr) % 3 for i in range(rs)]  # from remote rank i
    sb = np.concatenate([np.full(c, 100 * lr + 10 * j + color, "i")
                         for j, c in enumerate(s_cnt)])
    a2av = np.full(sum(r_cnt), -1, "i")
    inter.Alltoallv([sb, s_cnt], [a2av, r_cnt])
    rsb = np.full(6 // ls, -1.0)  # each group's vectors have 6 elements (sizes 1 to 3)
    inter.Reduce_scatter_block(np.arange(6, dtype="d") + lr, rsb, MPI.SUM)
    counts = [6 // ls + (i < 6 % ls) for i in range(ls)]
    rs_out = np.full(counts[lr], -1.0)
    inter.Reduce_scatter(np.arange(6, dtype="d") * (lr + 1), rs_out, counts, MPI.SUM)
    room = max(ls, rs) + 1  # Alltoallw: j + 1 ints to remote rank j, blocks apart
    wsend = np.concatenate([np.full(room, 10 * lr + j, "i") for j in range(rs)])
    wrecv = np.full(room * rs, -1, "i")
    inter.Alltoallw([wsend, [j + 1 for j in range(rs)], [4 * room * j for j in range(rs)],
                     [MPI.INT] * rs],
                    [wrecv, [lr + 1] * rs, [4 * room * i for i in range(rs)], [MPI.INT] * rs])
    say(f"{name}.vector", (agv.tolist(), a2av.tolist(), rsb.tolist(), rs_out.tolist(),
                           wrecv.tolist()))
    # rooted vector calls, the first rank of each group the root
    for g in (0, 1):
        gv = np.full(sum(cnt), -1, "i") if g == color and lr == 0 else None
        sv = np.full(lr + 1, -1, "i")
        if g == color:
            who = MPI.ROOT if lr == 0 else MPI.PROC_NULL
            inter.Gatherv(None, [gv, cnt] if lr == 0 else None, root=who)
            send = np.concatenate([np.full(j + 1, 50 + j + color, "i") for j in range(rs)])
            inter.Scatterv([send, cnt] if lr == 0 else None, None, root=who)
        else:
            inter.Gatherv(np.full(lr + 1, 7 * lr + color, "i"), None, root=0)
            inter.Scatterv(None, sv, root=0)
        say(f"{name}.rootedv{g}", (None if gv is None else gv.tolist(), sv.tolist()))
    # non-blocking, several at once, and persistent
    a, b, c = np.zeros(2), np.full(sum(cnt), -1, "i"), np.full(rs, -1, "i")
    reqs = [inter.Iallreduce(np.array([lr + 1.0, color]), a, MPI.SUM),
            inter.Iallgatherv(np.full(lr + 1, lr + 20 * color, "i"), [b, cnt]),
            inter.Ialltoall(np.arange(rs, dtype="i") + 10 * lr, c), inter.Ibarrier()]
    MPI.Request.Waitall(reqs)
    p = inter.Allreduce_init(np.array([float(lr)]), d := np.zeros(1), MPI.MAX)
    seen = []
    for _ in range(2):
        p.Start()
        p.Wait()
        seen.append(d.tolist())
    p.Free()
    say(f"{name}.nonblocking", (a.tolist(), b.tolist(), c.tolist(), seen))


# groups split across the zipper in the middle (Create_intercomm over COMM_WORLD)
color = int(rank >= size // 2 + 1)  # unequal groups when size allows
local = world.Split(color, rank)
inter = local.Create_intercomm(0, world, 0 if color else size // 2 + 1, tag=11)
exercise("split", inter, color)
dup, req = inter.Idup()
req.Wait()
exercise("dup", dup, color)
for high in (False, True):
    merged = inter.Merge(high=bool(color) == high)
    say(f"merge{int(high)}", (merged.Get_rank(), merged.Get_size(), merged.allgather(rank)))
    merged.Free()
say("compare", (inter.Compare(inter) == MPI.IDENT, inter.Compare(dup) == MPI.CONGRUENT))
# Split: by parity of the local rank, the key reversing the order; UNDEFINED leaves out
part = inter.Split(MPI.UNDEFINED if inter.Get_rank() == 2 else inter.Get_rank() % 2,
                   -inter.Get_rank())
if part == MPI.COMM_NULL:
    say("split_part", None)
else:
    say("split_part", (part.Get_rank(), part.Get_size(), part.Get_remote_size(),
                       part.allgather(rank)))
    part.Free()
dup.Free()
inter.Free()
local.Free()

# even and odd ranks (each group on both sides of the zipper), Create_from_groups
wg = world.Get_group()
evens, odds = wg.Incl(list(range(0, size, 2))), wg.Incl(list(range(1, size, 2)))
mine, other = (evens, odds) if rank % 2 == 0 else (odds, evens)
inter2 = MPI.Intercomm.Create_from_groups(mine, 0, other, 0, "conformance")
exercise("groups", inter2, rank % 2)
# mpi4py.util.pkl5 on an intercommunicator (it takes mpi4py's private duplicates of it)
from mpi4py.util import pkl5  # noqa: E402

p5 = pkl5.Intercomm(inter2)
say("pkl5", (p5.allgather(("x", rank)), p5.bcast("from0" if inter2.Get_rank() == 0 and
                                                   rank % 2 == 0 else None,
                                                   root=(MPI.ROOT if rank == 0 else
                                                         MPI.PROC_NULL) if rank % 2 == 0
                                                   else 0)))
inter2.Free()
world.Barrier()
every = world.gather(out, root=0)  # one writer: lines of several ranks never interleave
if rank == 0:
    print("\n".join(line for lines in every for line in lines), flush=True)
