"""Buffer conventions of mpi4py that programs lean on: None where a collective allows
MPI.IN_PLACE, `[buffer, count]` vector specs, long doubles through a foreign buffer
interface. Every collective blocking and non-blocking. Prints `rank R: <check> <v>`.
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
    out.append(f"rank {rank}: {check} {np.asarray(value).tolist()}")


def call(name, *args, blocking):
    if blocking:
        getattr(world, name)(*args)
    else:
        getattr(world, "I" + name[0].lower() + name[1:])(*args).Wait()


class HostCAI:
    """A device-array stand-in whose memory is on the host (as mpi4py's tests use)."""

    def __init__(self, a):
        self.a = a
        self.__cuda_array_interface__ = {
            "shape": a.shape, "typestr": a.dtype.str, "version": 3, "strides": None,
            "data": (a.__array_interface__["data"][0], False)}


for blocking in (True, False):
    k = "b" if blocking else "nb"
    for root in range(size):
        g = np.full((size, 2), -1, "i")
        g[rank] = rank * 10 + root
        call("Gather", None if rank == root else g[rank].copy(),
             g if rank == root else None, root, blocking=blocking)
        say(f"{k} gather-none root{root}", g if rank == root else [])
        s = np.full(3, -1, "d")
        sb = np.arange(size * 3, dtype="d") + root if rank == root else None
        if rank == root:
            s = sb.reshape(size, 3)
        call("Scatter", sb, None if rank == root else s, root, blocking=blocking)
        say(f"{k} scatter-none root{root}", s)
        r = np.array([rank + 1.0, root])
        call("Reduce", None if rank == root else r.copy(), r if rank == root else None,
             MPI.SUM, root, blocking=blocking)
        say(f"{k} reduce-none root{root}", r if rank == root else [])
    ag = np.full((size, 2), -1, "i")
    ag[rank] = rank
    call("Allgather", None, ag, blocking=blocking)
    say(f"{k} allgather-none", ag)
    ar = np.array([rank, 2.0 * rank])
    call("Allreduce", None, ar, MPI.SUM, blocking=blocking)
    say(f"{k} allreduce-none", ar)
    aa = np.arange(size, dtype="i") + 100 * rank
    call("Alltoall", None, aa, blocking=blocking)
    say(f"{k} alltoall-none", aa)
    sc = np.array([rank + 1.0])
    call("Scan", None, sc, MPI.SUM, blocking=blocking)
    say(f"{k} scan-none", sc)
    rs = np.arange(size, dtype="d") * (rank + 1)
    call("Reduce_scatter_block", None, [rs, 1, MPI.DOUBLE], MPI.SUM, blocking=blocking)
    say(f"{k} reduce-scatter-block-none", rs[:1])
    # [buffer, count]: every block `count` elements, long doubles in a host CUDA interface
    for count in range(3):
        sg = np.full(count * size, rank, "g")
        rg = np.full(count * size, -1, "g")
        call("Alltoallv", [HostCAI(sg), count], [HostCAI(rg), count], blocking=blocking)
        say(f"{k} alltoallv-count{count}", rg.astype("d"))
        rg = np.full(count, -1, "g")
        call("Scatterv", [HostCAI(np.arange(count * size, dtype="g")), count]
             if rank == 0 else None, HostCAI(rg), 0, blocking=blocking)
        say(f"{k} scatterv-count{count}", rg.astype("d"))

every = world.gather(out, root=0)  # one writer: lines of several ranks never interleave
if rank == 0:
    print("\n".join(line for lines in every for line in lines), flush=True)
