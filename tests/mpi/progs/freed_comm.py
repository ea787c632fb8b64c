"""A freed communicator refuses calls; persistent requests made on it before still run.

`python freed_comm.py` on a bridged job: on a Dup (across the zipper, its small collectives'
compiled front made first where built) and on a Split inside each cluster, freed: every
collective form named, and the queries mpi4py's COMM_NULL refuses (Get_size, Get_rank, ...),
refuse with a CommError naming the call; its name is MPI_COMM_NULL's. Persistent requests
made before the Free (a Barrier_init, a Bcast_init from the other cluster, a
Send_init/Recv_init pair across) start and complete after it, as natively; once they are
freed, the communicator's native ones are released. Freed, an intercommunicator and the three
topologies refuse their own queries the same way.
"""

import numpy as np

from mmpi import MPI
from mmpi.errors import CommError

w = MPI.COMM_WORLD
rank, size = w.Get_rank(), w.Get_size()
half = size // 2  # the low cluster's ranks come first; ranks r and r + half face each other
peer = (rank + half) % size


def calls_on(d, n):
    """The calls tried on the freed `d` (of `n` ranks), by the name each error must give."""
    return {
        "Barrier": lambda: d.Barrier(),
        "Bcast": lambda: d.Bcast(np.zeros(3), 0),
        "Allreduce": lambda: d.Allreduce(np.ones(2), np.zeros(2)),
        "Reduce": lambda: d.Reduce(np.ones(2), np.zeros(2), root=0),
        "Alltoall": lambda: d.Alltoall(np.ones(n), np.zeros(n)),
        "Ibarrier": lambda: d.Ibarrier(),
        "Iallreduce": lambda: d.Iallreduce(np.ones(2), np.zeros(2)),
        "bcast": lambda: d.bcast(1, 0),
        "allgather": lambda: d.allgather(1),
        "Barrier_init": lambda: d.Barrier_init(),
        "Allreduce_init": lambda: d.Allreduce_init(np.ones(2), np.zeros(2)),
        "Send_init": lambda: d.Send_init(np.ones(2), 0, 1),
        "Recv_init": lambda: d.Recv_init(np.ones(2), 0, 1),
        "Get_size": lambda: d.Get_size(),
        "Get_rank": lambda: d.Get_rank(),
        "Get_group": lambda: d.Get_group(),
        "Is_inter": lambda: d.Is_inter(),
        "Get_topology": lambda: d.Get_topology(),
    }


refused = 0
for make in ("dup", "split"):
    d = w.Dup() if make == "dup" else w.Split(rank < half, rank)
    x = np.arange(3.0)
    d.Barrier()
    d.Bcast(x, 0)
    d.Allreduce(np.ones(2), np.zeros(2))
    keep = [d.Barrier_init()]
    if make == "dup":
        box = np.zeros(3)
        out = np.full(3, float(rank))
        got = np.zeros(3)
        keep += [d.Bcast_init(box, root=half), d.Send_init(out, peer, 9),
                 d.Recv_init(got, peer, 9)]
    core, n = d._core, d.Get_size()
    d.Free()
    for name, call in calls_on(d, n).items():
        try:
            call()
        except CommError as exc:
            assert f"{name} on rank" in str(exc) and "freed" in str(exc), (make, name, exc)
            refused += 1
        else:
            raise AssertionError(f"{make}: {name} on a freed communicator went ahead")
    assert d.Get_name() == "MPI_COMM_NULL", d.Get_name()  # as mpi4py's
    for rnd in range(2):  # the requests made before the Free: started after it, twice
        if make == "dup":
            box[:] = 7.0 + rnd if rank == half else -1.0
        MPI.Prequest.Startall(keep)
        MPI.Request.Waitall(keep)
        if make == "dup":
            assert box.tolist() == [7.0 + rnd] * 3, (rnd, box)
            assert got.tolist() == [float(peer)] * 3, (rnd, got)
    assert core.persistent == len(keep) and core.p2p.comm, "released with requests alive"
    for r in keep:
        r.Free()
    for _ in range(100):  # a release waits for nothing pending: a few progress turns at most
        if not core.p2p.comm:
            break
        w.Iprobe(MPI.ANY_SOURCE, 12345)
    assert core.persistent == 0 and not core.p2p.comm, (make, "not released")

# An intercommunicator and the three topologies refuse their own queries too.
local = w.Split(rank < half, rank)
others = [local.Create_intercomm(0, w, half if rank < half else 0, 5),
          w.Create_cart([size], periods=[True]),
          w.Create_graph(list(range(1, size + 1)), [(r + 1) % size for r in range(size)]),
          w.Create_dist_graph_adjacent([(rank - 1) % size], [(rank + 1) % size])]
queries = {
    "Intercomm": {"Get_remote_size": (), "Get_remote_group": (), "Is_inter": (), "Merge": ()},
    "Cartcomm": {"Get_dim": (), "Get_topo": (), "Get_coords": (0,), "Get_cart_rank": ([0],),
                 "Shift": (0, 1), "Sub": ([True],)},
    "Graphcomm": {"Get_dims": (), "Get_topo": (), "Get_neighbors": (0,)},
    "Distgraphcomm": {"Get_dist_neighbors_count": (), "Get_dist_neighbors": ()},
}
for c in others:
    c.Free()
    for name, args in queries[type(c).__name__].items():
        try:
            getattr(c, name)(*args)
        except CommError as exc:
            assert f"{name} on rank" in str(exc) and "freed" in str(exc), (name, exc)
            refused += 1
        else:
            raise AssertionError(f"{type(c).__name__}.{name} on a freed one went ahead")
local.Free()

w.Barrier()
print(f"rank {rank}: FREED OK {refused} refused", flush=True)
