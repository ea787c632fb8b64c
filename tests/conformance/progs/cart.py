"""A 2-D halo exchange on a Cartesian grid: Compute_dims, Create_cart, Shift, Sendrecv, Sub,
row and column communicators, neighbourhood collectives, Ibarrier and Iallreduce, and a
distributed graph. Prints `rank R: <check> <value>`.
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


dims = MPI.Compute_dims(size, 2)
cart = world.Create_cart(dims, periods=[True, False], reorder=False)
say("cart", (isinstance(cart, MPI.Cartcomm), cart.Get_topo(), cart.dims, cart.periods,
             cart.Get_cart_rank(cart.coords), cart.Get_topology() == MPI.CART))
me = cart.Get_rank()
n = 6
u = np.full((n + 2, n + 2), float(me))
for step in range(3):
    for axis in (0, 1):
        src, dst = cart.Shift(axis, 1)
        say(f"shift{axis}", (src, dst))
        if axis == 0:
            send_up, recv_down = np.ascontiguousarray(u[1, 1:-1]), np.empty(n)
            cart.Sendrecv(send_up, src if src != MPI.PROC_NULL else MPI.PROC_NULL, 1,
                          recv_down, dst, 1)
            if dst != MPI.PROC_NULL:
                u[-1, 1:-1] = recv_down
        else:
            send_left, recv_right = np.ascontiguousarray(u[1:-1, 1]), np.empty(n)
            cart.Sendrecv(send_left, src, 2, recv_right, dst, 2)
            if dst != MPI.PROC_NULL:
                u[1:-1, -1] = recv_right
    u[1:-1, 1:-1] = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:])
    res = np.empty(1)
    req = cart.Iallreduce(np.array([u[1:-1, 1:-1].sum()]), res, MPI.SUM)
    bar = cart.Ibarrier()
    MPI.Request.Waitall([req, bar])
    say(f"step{step}", round(float(res[0]), 6))

rows = cart.Sub([False, True])
cols = cart.Sub([True, False])
say("sub", (rows.Get_size(), rows.Get_rank(), cols.Get_size(), cols.Get_rank(),
            rows.allreduce(me), cols.allreduce(me)))
lib = cart.Dup()  # a library's own communicator
say("lib", lib.allreduce(1))

nb = np.empty(2 * len(dims), "i")
nb.fill(-1)
cart.Neighbor_allgather(np.array([me], "i"), nb)
say("neighbor_allgather", nb.tolist())
say("neighbor_alltoall", cart.neighbor_alltoall([me * 10 + k for k in range(2 * len(dims))]))
a2a = np.full(2 * len(dims), -1, "i")
cart.Neighbor_alltoall(np.arange(2 * len(dims), dtype="i") + 100 * me, a2a)
say("Neighbor_alltoall", a2a.tolist())

graph = world.Create_dist_graph_adjacent([(rank - 1) % size], [(rank + 1) % size])
say("graph", (graph.Get_dist_neighbors_count(), graph.Get_dist_neighbors()[:2]))
say("graph_objs", graph.neighbor_alltoall([("to", (rank + 1) % size)]))
say("graph_none", world.Create_dist_graph_adjacent(None, None).inoutedges)

# MPI-1 graphs (a ring, both neighbours), duplicates keep their topology, the map calls
index, edges = [0], []
for i in range(size):
    index.append(index[-1] + 2)
    edges.extend(((i - 1) % size, (i + 1) % size))
ring = world.Create_graph(index, edges)
say("graph1", (ring.topology == MPI.GRAPH, ring.dims, ring.topo, ring.neighbors,
               ring.Get_neighbors(size - 1), ring.inoutedges))
got = np.full(2, -1, "i")
ring.Neighbor_allgather(np.array([rank], "i"), got)
say("graph1_collectives", (got.tolist(), ring.neighbor_alltoall([rank * 10, rank * 10 + 1])))
rd, cd = ring.Dup(), cart.Dup()
say("dups_keep_topology", (type(rd).__name__, rd.neighbors, type(cd).__name__, cd.Shift(0, 1),
                           rd.neighbor_allgather(rank)))
small = world.Create_graph([1, 2], [1, 0])  # two nodes: the other ranks are left out
say("graph1_small", small == MPI.COMM_NULL or small.neighbors)
say("maps", (world.Cart_map([size], True), world.Graph_map([1, 2], [1, 0])))
# Neighbor_alltoallw on a ring: a datatype per neighbour (a strided one), blocking,
# non-blocking and persistent
ring = world.Create_cart([size], [True])
strided = MPI.INT.Create_vector(2, 1, 2).Commit()
sb = np.array([rank * 10 + 1, rank * 10 + 2, -5, rank * 10 + 3, -6, rank * 10 + 4, 0, 0], "i")
send = [sb, [2, 1], [0, 12], [MPI.INT, strided]]
got = [np.full(8, -1, "i") for _ in range(3)]
counts, displs, types = [1, 2], [0, 16], [strided, MPI.INT]
ring.Neighbor_alltoallw(send, [got[0], counts, displs, types])
ring.Ineighbor_alltoallw(send, [got[1], counts, displs, types]).Wait()
p = ring.Neighbor_alltoallw_init(send, [got[2], counts, displs, types])
p.Start()
p.Wait()
p.Free()
say("neighbor_alltoallw", [g.tolist() for g in got])
strided.Free()
ring.Free()
world.Barrier()
every = world.gather(out, root=0)  # one writer: lines of several ranks never interleave
if rank == 0:
    print("\n".join(line for lines in every for line in lines), flush=True)
