"""mpi4py's init-fini demos, condensed: MPI starts when the program says, as mpi4py's rc says.

argv[1], the mode:
  init         mpi4py.rc.initialize = False; not initialized until MPI.Init() (test_1), whose
               COMM_WORLD, taken before, is the world after it; a second Init is refused
  init_thread  the same with MPI.Init_thread(MPI.THREAD_MULTIPLE) (test_2)
  never        MPI4PY_RC_INITIALIZE=false in the environment and no Init at all (test_3)
  no_rc        mpi4py.rc deleted before the import, MPI4PY_RC_ERRORS=exception (test_5)
Prints `rank R: <mode> <check> <value>` lines (`never`: one line per process, without rank).
"""

import os
import sys

import mpi4py

mode = sys.argv[1]
if mode in ("init", "init_thread"):
    mpi4py.rc.initialize = False
elif mode == "never":
    os.environ["MPI4PY_RC_INITIALIZE"] = "false"
elif mode == "no_rc":
    del mpi4py.rc
    del sys.modules["mpi4py.rc"]
    os.environ["MPI4PY_RC_ERRORS"] = "exception"

from mpi4py import MPI  # noqa: E402

world = MPI.COMM_WORLD  # taken before MPI.Init, used after it
lines = [f"initialized at import {MPI.Is_initialized()}"]
if mode == "never":
    print(f"{mode}: {lines[0]}", flush=True)
    sys.exit(0)
if mode == "init":
    MPI.Init()
elif mode == "init_thread":
    level = MPI.Init_thread(MPI.THREAD_MULTIPLE)
    lines.append(f"level as queried {level == MPI.Query_thread()}")
lines.append(f"initialized {MPI.Is_initialized()} finalized {MPI.Is_finalized()}")
rank, size = world.Get_rank(), world.Get_size()
lines.append(f"sum {world.allreduce(rank)} of {size}")
lines.append(f"errhandler returns {world.Get_errhandler() == MPI.ERRORS_RETURN}")
if mode != "no_rc":
    try:
        MPI.Init()
        lines.append("second Init allowed")
    except MPI.Exception as exc:
        lines.append(f"second Init refused, class {exc.Get_error_class() == MPI.ERR_OTHER}")
every = world.gather(lines, root=0)
if rank == 0:
    print("\n".join(f"rank {r}: {mode} {line}" for r, got in enumerate(every) for line in got),
          flush=True)
if mode != "no_rc":
    MPI.Finalize()
    if rank == 0:  # one process prints after the gather: no lines of two interleave
        print(f"rank {rank}: {mode} finalized {MPI.Is_finalized()}", flush=True)
