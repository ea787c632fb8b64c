"""Spawn under mmpi-run: a rank of each cluster starts children in its own cluster.

`python spawn.py` (a rank) or `python spawn.py child` (what it spawns). The children run
plain mpi4py (they are no ranks of the bridged world); the parent and its children talk over
the native intercommunicator Spawn gives. Then an MPIPoolExecutor, which spawns its workers
the same way. Each parent prints `rank R: children <what they said>` and `rank R: pool <...>`.
"""

import sys

from mpi4py import MPI

if sys.argv[1:2] == ["child"]:
    parent = MPI.Comm.Get_parent()
    assert parent != MPI.COMM_NULL
    msg = parent.bcast(None, root=0)
    world = MPI.COMM_WORLD
    parent.gather((msg, world.Get_rank(), world.Get_size(), world.Get_size() == 2), root=0)
    parent.Disconnect()
    sys.exit(0)

if __name__ == "__main__":
    from mpi4py.futures import MPIPoolExecutor

    world = MPI.COMM_WORLD
    rank = world.Get_rank()
    if rank in (0, world.Get_size() - 1):  # one rank in each cluster
        inter = MPI.COMM_SELF.Spawn(sys.executable, [__file__, "child"], maxprocs=2)
        inter.bcast(("hello", rank), root=MPI.ROOT)
        got = inter.gather(None, root=MPI.ROOT)
        inter.Disconnect()
        print(f"rank {rank}: children {got}", flush=True)
    if rank == 0:
        with MPIPoolExecutor(max_workers=2) as pool:
            print(f"rank {rank}: pool {list(pool.map(pow, [2, 3, 4], [5, 2, 3]))}", flush=True)
    world.Barrier()
    # and the bridged world still works after
    print(f"rank {rank}: after {world.allreduce(1)}", flush=True)
