"""mpi4py.rc options set before the import hold under the bridge as natively.

argv: NAME=VALUE ... (errors=..., initialize=false, thread_level=..., finalize=false,
irecv_bufsz=N, recv_mprobe=false, fast_reduce=false). Prints `rank R: <check> <value>` lines:
the error handler of COMM_WORLD, of a Dup and of a Split (inherited), collectives' answers,
and what object receives of a small and a large object give (irecv: the large one must fit
irecv_bufsz, as in mpi4py).
"""

import sys

import mpi4py

for arg in sys.argv[1:]:
    name, value = arg.split("=")
    setattr(mpi4py.rc, name, int(value) if value.isdigit() else
            {"true": True, "false": False}.get(value, value))

from mpi4py import MPI  # noqa: E402

NAMES = {"ERRORS_RETURN": MPI.ERRORS_RETURN, "ERRORS_ARE_FATAL": MPI.ERRORS_ARE_FATAL,
         "ERRORS_ABORT": MPI.ERRORS_ABORT}


def name_of(handler) -> str:
    return next((k for k, v in NAMES.items() if handler == v), "other")


if not MPI.Is_initialized():
    MPI.Init()
world = MPI.COMM_WORLD
rank = world.Get_rank()
dup = world.Dup()
half = world.Split(rank % 2, rank)
lines = [f"world {name_of(world.Get_errhandler())}", f"dup {name_of(dup.Get_errhandler())}",
         f"split {name_of(half.Get_errhandler())}", f"sum {world.allreduce(rank)}"]
peer = (rank + world.Get_size() // 2) % world.Get_size()  # across the zipper when bridged
for size in (10, 1000):
    s = world.isend("x" * size, peer, 3)
    try:
        got = len(world.irecv(source=MPI.ANY_SOURCE, tag=3).wait())
    except MPI.Exception as exc:
        got = "truncated" if exc.Get_error_class() == MPI.ERR_TRUNCATE else "error"
    s.wait()
    lines.append(f"irecv{size} {got}")
lines.append(f"recv {len(world.sendrecv('y' * 5000, peer, 4, None, MPI.ANY_SOURCE, 4))}")
lines.append(f"reduce {world.allreduce([rank], op=MPI.SUM)} {world.reduce(rank, MPI.MAX, 0)}")
dup.Free()
half.Free()
every = world.gather([f"rank {rank}: {x}" for x in lines], root=0)
if rank == 0:
    print("\n".join(line for lines in every for line in lines), flush=True)
if not mpi4py.rc.finalize:
    MPI.Finalize()
