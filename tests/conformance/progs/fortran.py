"""Fortran-ordered numpy arrays as buffers (mpi4py's mpi-ref-v1 ex-3.08/3.09 do this): sent
in memory order without a datatype, a column and a row picked by derived datatypes, and in a
collective. Every rank talks to a partner in the other cluster when bridged (rank i and
size-1-i). Prints `rank R: <check> <value>`.
"""

import sys

import numpy as np

if sys.argv[1:2] == ["--mmpi"]:
    from mmpi import MPI
else:
    from mpi4py import MPI

world = MPI.COMM_WORLD
rank, size = world.Get_rank(), world.Get_size()
peer = size - 1 - rank
out = []


def say(check, value):
    out.append(f"rank {rank}: {check} {np.asarray(value).tolist()}")


a = np.asfortranarray(np.arange(12, dtype="d").reshape(3, 4) + 100 * rank)
b = np.zeros((3, 4), dtype="d", order="F")
if peer != rank:
    # the whole array, in memory order, as mpi4py sends it
    world.Sendrecv(a, peer, 1, b, peer, 1)
    say("whole", b)
    # a column is contiguous in Fortran order; a row is strided: ex-3.08's vector type
    col = np.zeros(3)
    world.Sendrecv([a, 3, MPI.DOUBLE], peer, 2, col, peer, 2)
    say("first column", col)
    row_type = MPI.DOUBLE.Create_vector(4, 1, 3).Commit()
    row = np.zeros(4)
    world.Sendrecv([a, 1, row_type], peer, 3, row, peer, 3)
    say("first row", row)
    c = np.zeros((3, 4), dtype="d", order="F")
    world.Sendrecv([a, 4, MPI.DOUBLE], peer, 4, [c, 1, row_type], peer, 4)  # into a row of c
    say("into a row", c)
    row_type.Free()
    req = world.Irecv(b, peer, 5)
    world.Send(a, peer, 5)
    req.Wait()
    say("nonblocking", b)
f = np.asfortranarray(np.arange(6, dtype="i").reshape(2, 3)) if rank == 0 else \
    np.zeros((2, 3), dtype="i", order="F")
world.Bcast(f, root=0)
say("bcast", f)
g = np.zeros((size, 2, 3), dtype="i")
world.Allgather(np.asfortranarray(f + rank), g)
say("allgather", g)
every = world.gather(out, root=0)  # one writer: lines of several ranks never interleave
if rank == 0:
    print("\n".join(line for lines in every for line in lines), flush=True)
