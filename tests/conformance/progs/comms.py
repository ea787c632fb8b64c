"""Communicators made from the world, and from those: groups, Dup, Split, Create, Create_group,
Compare, attributes, Free, a session's world process set; collectives on several communicators
interleaved.

Every rank prints `rank R: <check> <value>` lines that must be the same natively and bridged
(the test compares them); an assertion failure ends the job.
"""
# ruff: noqa: E721  (type(x) == MPI.Group is what mpi4py's tests and programs ask)

import pickle
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


# groups on world ranks
g = world.Get_group()
say("group", (g.Get_size(), g.Get_rank()))
evens = g.Incl(list(range(0, size, 2)))
odds = g.Excl(list(range(0, size, 2)))
say("evens", (evens.Get_size(), evens.Get_rank()))
say("union", MPI.Group.Union(odds, evens).Translate_ranks(list(range(size)), g))
say("intersection", MPI.Group.Intersection(g, evens).Get_size())
say("difference", MPI.Group.Difference(g, evens).Translate_ranks(None, g))
say("range_incl", g.Range_incl([(size - 1, 0, -2)]).Translate_ranks(None, g))
say("compare", (g.Compare(g), g.Compare(MPI.Group.Union(odds, evens)), g.Compare(evens)))
say("isinstance", (isinstance(g, MPI.Group), isinstance(world, MPI.Intracomm),
                   isinstance(world, MPI.Comm)))
# the class as mpi4py's tests compare it: equal to MPI's, not to another or a subclass
cart = world.Create_cart([size])


class MyGroupType(MPI.Group):
    pass


say("type ==", (type(g) == MPI.Group, type(MPI.COMM_SELF.group) == MPI.Group,
                type(world) == MPI.Intracomm, type(world) != MPI.Cartcomm,
                type(cart) == MPI.Cartcomm, type(g) != MPI.Comm, MyGroupType != MPI.Group,
                type(world.Irecv(bytearray(1), MPI.PROC_NULL)) == MPI.Request))
cart.Free()

# Dup and Compare; attributes copied by Dup when their keyval says so
key = MPI.Comm.Create_keyval(copy_fn=lambda comm, k, v: v + 1)
world.Set_attr(key, 41)
dup = world.Dup()
say("dup", (dup.Get_rank(), dup.Get_size(), world.Compare(dup), world.Compare(world)))
say("attr", (world.Get_attr(key), dup.Get_attr(key)))
say("tag_ub_ok", dup.Get_attr(MPI.TAG_UB) >= 32767)

# Split by halves (across the zipper for most layouts) and by parity, keys reversed
half = world.Split(rank * 2 // size, -rank)
par = world.Split(rank % 2, rank)
none = world.Split(MPI.UNDEFINED if rank == 0 else 0, 0)
say("half", (half.Get_rank(), half.Get_size()))
say("par", (par.Get_rank(), par.Get_size()))
say("undefined", none == MPI.COMM_NULL)

# collectives interleaved on three communicators
x = np.array([rank + 1.0])
for i in range(3):
    a, b, c = np.empty(1), np.empty(1), np.empty(1)
    half.Allreduce(x, a)
    par.Allreduce(x * 10, b)
    dup.Allreduce(x * 100, c)
    say(f"interleaved{i}", (a[0], b[0], c[0]))
    say(f"bcast{i}", par.bcast(("from", rank) if par.Get_rank() == 0 else None, root=0))
    recv = np.empty(half.Get_size(), np.int64)
    half.Allgather(np.array([rank], np.int64), recv)
    say(f"allgather{i}", recv.tolist())
    say(f"gather{i}", par.gather(rank, root=par.Get_size() - 1))
    say(f"alltoall{i}", dup.alltoall([rank * 100 + j for j in range(size)]))

# point-to-point on a derived communicator: ring within each parity class
if par.Get_size() > 1:
    right, left = (par.Get_rank() + 1) % par.Get_size(), (par.Get_rank() - 1) % par.Get_size()
    buf = np.empty(3, np.int64)
    st = MPI.Status()
    par.Sendrecv(np.array([rank, 7, 9]), right, 5, buf, left, 5, st)
    say("par_ring", (buf.tolist(), st.Get_source(), st.Get_tag()))
    say("par_obj", par.sendrecv({"r": rank}, right, 3, None, left, 3))

# Create (collective over world) and Create_group (members only)
sub = world.Create(evens)
say("create", "null" if sub == MPI.COMM_NULL else (sub.Get_rank(), sub.Get_size(),
                                                   sub.allreduce(rank)))
# MPI 2.2's disjoint Create: each rank passes its own group (mpi4py.futures does this)
mine = world.Get_group().Incl([0]) if rank == 0 else world.Get_group().Excl([0])
dis = world.Create(mine)
say("create_disjoint", (dis.Get_rank(), dis.Get_size(), dis.allreduce(rank)))
dis.Free()
if rank % 2 == 1:
    grp = world.Create_group(odds, tag=7)
    say("create_group", (grp.Get_rank(), grp.Get_size(), grp.allreduce(rank)))
    grp.Free()

# Create_from_group (no parent); groups of COMM_SELF compared with the world's
if rank % 2 == 0:
    fg = MPI.Intracomm.Create_from_group(evens, "org.example.evens")
    say("create_from_group", (fg.Get_rank(), fg.Get_size(), fg.allreduce(rank)))
    fg.Free()
wg, sg = world.Get_group(), MPI.COMM_SELF.Get_group()
say("group_compare", (MPI.Group.Compare(MPI.GROUP_EMPTY, wg) == MPI.UNEQUAL,
                      MPI.Group.Compare(sg, wg.Incl([rank])) == MPI.IDENT,
                      MPI.Group.Translate_ranks(sg, [0], wg),
                      MPI.Group.Translate_ranks(wg, [size - 1, 0])))  # on the class, no group
say("scatter_none", (world.scatter(None, size - 1), world.scatter(iter(range(size)), 0)))
# a program's subclass around a bridged communicator, and mpi4py.util.pkl5 (one such)
from mpi4py.util import pkl5  # noqa: E402  (after the MPI import the program chose)


class MyComm(MPI.Intracomm):
    pass


mine = MyComm(world.Dup())
clone = mine.Clone()
say("subclass", (isinstance(mine, MyComm), mine.allreduce(rank), type(clone).__name__,
                 isinstance(clone, MyComm)))
clone.free()
mine.free()
p5 = pkl5.Intracomm(world)
say("pkl5", (p5.sendrecv(("x", rank), (rank + 1) % size, 0, None, (rank - 1) % size, 0),
             p5.gather(rank, size - 1), p5.bcast("b" * rank, 1), p5.alltoall(list(range(size)))))
say("pickle_world_copy", pickle.loads(pickle.dumps(MPI.Intracomm(world))) == world)

# attribute callbacks that make and free communicators themselves
kv = MPI.Comm.Create_keyval(copy_fn=lambda _o, _k, v: MPI.Comm.Dup(v),
                            delete_fn=lambda _o, _k, v: MPI.Comm.Free(v))
a, inner = world.Dup(), world.Dup()
a.Set_attr(kv, inner)
b = a.Dup()
got = b.Get_attr(kv)
say("attr_copy_dups", (got != inner, got.allreduce(rank), b.allreduce(1)))
b.Free()
a.Delete_attr(kv)
say("attr_delete_frees", (got == MPI.COMM_NULL, inner == MPI.COMM_NULL))
a.Free()
MPI.Comm.Free_keyval(kv)

# a communicator of a communicator; Split_type keeps shared memory inside a node
quarter = half.Split(half.Get_rank() % 2, 0)
say("quarter", (quarter.Get_rank(), quarter.Get_size(), quarter.allreduce(rank)))
node = world.Split_type(MPI.COMM_TYPE_SHARED, key=rank)
say("split_type_member", node.Get_rank() < node.Get_size())

# names
dup.Set_name("my dup")
say("name", dup.Get_name())

# a session's world process set: its size, its group, a communicator made from it
session = MPI.Session.Init()
info = session.Get_pset_info("mpi://WORLD")
sgroup = session.Create_group("mpi://WORLD")
scomm = MPI.Intracomm.Create_from_group(sgroup, "mmpi.test.session")
pgroup = MPI.Group.Create_from_session_pset(session, "mpi://WORLD")
say("session world", (info.Get("mpi_size"), sgroup.Get_size(), sgroup.Get_rank(),
                      scomm.allreduce(rank), pgroup.Get_size()))
for x in (scomm, sgroup, pgroup, info):
    x.Free()
session.Finalize()

for c in (quarter, half, par, dup):
    c.Free()
say("freed", dup == MPI.COMM_NULL)
world.Barrier()
every = world.gather(out, root=0)  # one writer: lines of several ranks never interleave
if rank == 0:
    print("\n".join(line for lines in every for line in lines), flush=True)
