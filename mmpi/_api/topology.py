"""Bridged communicators with a process topology: Cartesian grids, graphs, distributed graphs.

`TopologyMethods` makes them (Create_cart, Create_graph, Create_dist_graph(_adjacent));
`Cartcomm`, `Graphcomm` and `Distgraphcomm` mirror mpi4py's classes, with the neighbourhood
collectives (`topo_methods`).
"""

from __future__ import annotations

import math

from .._startup.native import MPI
from ..errors import MMPIError
from . import topo_methods as topo
from .bridged import _Bridged
from .p2p_methods import as_int
from .persist_methods import add_persistent


class TopologyMethods:
    """Mixin of the bridged communicator: the calls that attach a topology."""

    __slots__ = ()

    def Create_cart(self, dims, periods=None, reorder=False):
        """A Cartesian grid over the first prod(dims) ranks (COMM_NULL for the others)."""
        core = self._core
        dims, periods = topo.check_dims(dims, periods, core.size, core.rank)
        n = 1
        for d in dims:
            n *= d
        sub = self.Split(0 if core.rank < n else MPI.UNDEFINED, core.rank)
        if sub == MPI.COMM_NULL:
            return MPI.COMM_NULL
        cart = Cartcomm(sub._core, "")
        cart._dims, cart._periods = dims, periods
        cart._topo = topo.cartesian(dims, periods, cart._core.rank)
        return cart

    def Cart_map(self, dims, periods=None) -> int:
        """The rank Create_cart would give this process (MPI.UNDEFINED if none)."""
        dims, _ = topo.check_dims(dims, periods, self._core.size, self._core.rank)
        return self._core.rank if self._core.rank < math.prod(dims) else MPI.UNDEFINED

    def Graph_map(self, index, edges) -> int:
        """The rank Create_graph would give this process (MPI.UNDEFINED if none)."""
        index, _ = topo.graph_arrays(index, edges, self._core.size, "Graph_map")
        return self._core.rank if self._core.rank < len(index) else MPI.UNDEFINED

    def Create_graph(self, index, edges, reorder=False):
        """A graph over the first len(index) ranks (COMM_NULL for the others)."""
        core = self._core
        index, edges = topo.graph_arrays(index, edges, core.size, "Create_graph")
        sub = self.Split(0 if core.rank < len(index) else MPI.UNDEFINED, core.rank)
        if sub == MPI.COMM_NULL:
            return MPI.COMM_NULL
        new = Graphcomm(sub._core, "")
        new._index, new._edges = index, edges
        mine = topo.graph_neighbors(index, edges, new._core.rank)
        new._topo = topo.graph(mine, mine, MPI.GRAPH)
        return new

    def Create_dist_graph_adjacent(self, sources, destinations, sourceweights=None,
                                   destweights=None, info=None, reorder=False):
        """A duplicate of this communicator with these neighbours of this rank."""
        new = Distgraphcomm(self.Dup()._core, "")
        new._topo = topo.graph([as_int(s, "source", "Create_dist_graph_adjacent")
                                for s in sources or ()],
                               [as_int(d, "destination", "Create_dist_graph_adjacent")
                                for d in destinations or ()])
        new._weights = (_weights(sourceweights), _weights(destweights))
        return new

    def Create_dist_graph(self, sources, degrees, destinations, weights=None, info=None,
                          reorder=False):
        """A distributed graph from edges that any rank may give.

        The edges are gathered; each rank keeps its own, in the order they were given.
        """
        edges = []
        pos = 0
        for s, d in zip(sources, degrees, strict=True):
            for k in range(d):
                w = weights[pos + k] if weights not in (None, MPI.UNWEIGHTED) else 1
                edges.append((int(s), int(destinations[pos + k]), w))
            pos += d
        every = [e for part in self.allgather(edges) for e in part]
        me = self._core.rank
        ins = [(s, w) for s, d, w in every if d == me]
        outs = [(d, w) for s, d, w in every if s == me]
        weighted = weights not in (None, MPI.UNWEIGHTED)
        return self.Create_dist_graph_adjacent(
            [s for s, _ in ins], [d for d, _ in outs],
            [w for _, w in ins] if weighted else None,
            [w for _, w in outs] if weighted else None)


def _weights(w):
    if w is None or w is MPI.UNWEIGHTED:
        return None
    return [int(x) for x in w]


class _Neighborhood:
    """Neighbourhood collectives of a bridged communicator with a topology."""

    __slots__ = ()

    def _ncall(self, name, steps):
        return self._run(name, steps)

    def Neighbor_allgather(self, sendbuf, recvbuf) -> None:
        """Gather one block from every source neighbour."""
        c = self._c("Neighbor_allgather")
        self._ncall("Neighbor_allgather", topo.neighbor_allgather(c, self._topo, sendbuf,
                                                                  recvbuf))

    def Neighbor_allgatherv(self, sendbuf, recvbuf) -> None:
        """Gather blocks of varying size from the source neighbours."""
        c = self._c("Neighbor_allgatherv")
        self._ncall("Neighbor_allgatherv", topo.neighbor_allgatherv(c, self._topo, sendbuf,
                                                                    recvbuf))

    def Neighbor_alltoall(self, sendbuf, recvbuf) -> None:
        """Block j to destination j, block i from source i."""
        c = self._c("Neighbor_alltoall")
        self._ncall("Neighbor_alltoall", topo.neighbor_alltoall(c, self._topo, sendbuf,
                                                                recvbuf))

    def Neighbor_alltoallv(self, sendbuf, recvbuf) -> None:
        """Blocks of varying size to and from the neighbours."""
        c = self._c("Neighbor_alltoallv")
        self._ncall("Neighbor_alltoallv", topo.neighbor_alltoallv(c, self._topo, sendbuf,
                                                                  recvbuf))

    def Neighbor_alltoallw(self, sendbuf, recvbuf) -> None:
        """Blocks in a datatype of their own to and from the neighbours."""
        c = self._c("Neighbor_alltoallw")
        self._ncall("Neighbor_alltoallw", topo.neighbor_alltoallw(c, self._topo, sendbuf,
                                                                  recvbuf))

    def Ineighbor_alltoallw(self, sendbuf, recvbuf):
        """Non-blocking Neighbor_alltoallw."""
        c = self._c("Ineighbor_alltoallw")
        return self._submit("Ineighbor_alltoallw",
                            topo.neighbor_alltoallw(c, self._topo, sendbuf, recvbuf))

    def Ineighbor_allgather(self, sendbuf, recvbuf):
        """Non-blocking Neighbor_allgather."""
        c = self._c("Ineighbor_allgather")
        return self._submit("Ineighbor_allgather",
                            topo.neighbor_allgather(c, self._topo, sendbuf, recvbuf))

    def Ineighbor_allgatherv(self, sendbuf, recvbuf):
        """Non-blocking Neighbor_allgatherv."""
        c = self._c("Ineighbor_allgatherv")
        return self._submit("Ineighbor_allgatherv",
                            topo.neighbor_allgatherv(c, self._topo, sendbuf, recvbuf))

    def Ineighbor_alltoall(self, sendbuf, recvbuf):
        """Non-blocking Neighbor_alltoall."""
        c = self._c("Ineighbor_alltoall")
        return self._submit("Ineighbor_alltoall",
                            topo.neighbor_alltoall(c, self._topo, sendbuf, recvbuf))

    def Ineighbor_alltoallv(self, sendbuf, recvbuf):
        """Non-blocking Neighbor_alltoallv."""
        c = self._c("Ineighbor_alltoallv")
        return self._submit("Ineighbor_alltoallv",
                            topo.neighbor_alltoallv(c, self._topo, sendbuf, recvbuf))

    def neighbor_allgather(self, sendobj):
        """The objects of the source neighbours, in order."""
        c = self._c("neighbor_allgather")
        objs = [sendobj] * len(self._topo.destinations)
        return self._ncall("neighbor_allgather", topo.neighbor_objects(c, self._topo, objs))

    def neighbor_alltoall(self, sendobj):
        """sendobj[j] to destination j; the list of what the sources sent."""
        c = self._c("neighbor_alltoall")
        return self._ncall("neighbor_alltoall",
                           topo.neighbor_objects(c, self._topo, list(sendobj)))

    def _topo_of(self, call: str):
        self._open(call)  # a freed one is COMM_NULL: no topology
        return self._topo

    @property
    def indegree(self) -> int:
        """Number of source neighbours."""
        return len(self._topo_of("indegree").sources)

    @property
    def outdegree(self) -> int:
        """Number of destination neighbours."""
        return len(self._topo_of("outdegree").destinations)

    @property
    def degrees(self) -> tuple[int, int]:
        """(indegree, outdegree)."""
        return self.indegree, self.outdegree

    @property
    def inedges(self) -> list[int]:
        """The source neighbours."""
        return list(self._topo_of("inedges").sources)

    @property
    def outedges(self) -> list[int]:
        """The destination neighbours."""
        return list(self._topo_of("outedges").destinations)

    @property
    def inoutedges(self) -> tuple[list[int], list[int]]:
        """(sources, destinations)."""
        return self.inedges, self.outedges


add_persistent(_Neighborhood, neighbor=True)


class Cartcomm(_Neighborhood, TopologyMethods, _Bridged, MPI.Cartcomm):
    """A bridged communicator with a Cartesian topology (mirrors mpi4py.MPI.Cartcomm)."""

    def Get_dim(self) -> int:
        """Number of dimensions."""
        self._open("Get_dim")
        return len(self._dims)

    @property
    def dim(self) -> int:
        """Number of dimensions."""
        return self.Get_dim()

    ndim = dim

    @property
    def dims(self) -> list[int]:
        """The grid's extent in each dimension."""
        self._open("dims")
        return list(self._dims)

    @property
    def periods(self) -> list[int]:
        """Periodicity of each dimension (1 or 0)."""
        self._open("periods")
        return [int(p) for p in self._periods]

    def Get_topo(self) -> tuple[list[int], list[int], list[int]]:
        """(dims, periods, coords of this rank)."""
        self._open("Get_topo")
        return self.dims, self.periods, self.Get_coords(self._core.rank)

    @property
    def topo(self):
        """(dims, periods, coords)."""
        return self.Get_topo()

    @property
    def coords(self) -> list[int]:
        """Coordinates of this rank."""
        return self.Get_coords(self._core.rank)

    def Get_coords(self, rank: int) -> list[int]:
        """Coordinates of `rank`."""
        self._open("Get_coords")
        rank = as_int(rank, "rank", "Get_coords")
        if not 0 <= rank < self._core.size:
            raise MMPIError(f"Get_coords: rank {rank} is not in the grid")
        return topo.cart_coords(self._dims, rank)

    def Get_cart_rank(self, coords) -> int:
        """The rank at `coords` (periodic dimensions wrap)."""
        self._open("Get_cart_rank")
        rank = topo.cart_rank(self._dims, self._periods, [int(x) for x in coords])
        if rank == MPI.PROC_NULL:
            raise MMPIError(f"Get_cart_rank: {list(coords)} is outside the grid {self._dims}")
        return rank

    def Shift(self, direction: int, disp: int) -> tuple[int, int]:
        """(source, dest) `disp` steps along `direction` (PROC_NULL off an edge)."""
        self._open("Shift")
        me = topo.cart_coords(self._dims, self._core.rank)
        up, down = list(me), list(me)
        up[direction] += disp
        down[direction] -= disp
        return (topo.cart_rank(self._dims, self._periods, down),
                topo.cart_rank(self._dims, self._periods, up))

    def Sub(self, remain_dims):
        """The sub-grid through this rank that keeps the dimensions `remain_dims` marks."""
        self._open("Sub")
        keep = [bool(k) for k in remain_dims]
        me = topo.cart_coords(self._dims, self._core.rank)
        color = 0
        for d, k in enumerate(keep):
            if not k:
                color = color * self._dims[d] + me[d]
        sub = self.Split(color, self._core.rank)
        dims = [d for d, k in zip(self._dims, keep, strict=True) if k]
        periods = [p for p, k in zip(self._periods, keep, strict=True) if k]
        cart = Cartcomm(sub._core, "")
        cart._dims, cart._periods = dims, periods
        cart._topo = topo.cartesian(dims, periods, cart._core.rank)
        return cart


class Graphcomm(_Neighborhood, TopologyMethods, _Bridged, MPI.Graphcomm):
    """A bridged communicator with a graph topology (mirrors mpi4py.MPI.Graphcomm)."""

    def Get_dims(self) -> tuple[int, int]:
        """(number of nodes, number of edges)."""
        self._open("Get_dims")
        return len(self._index), len(self._edges)

    dims = property(Get_dims, doc="(number of nodes, number of edges)")
    nnodes = property(lambda self: self.Get_dims()[0], doc="Number of nodes.")
    nedges = property(lambda self: self.Get_dims()[1], doc="Number of edges.")
    index = property(lambda self: self.Get_topo()[0], doc="Cumulative degrees of the nodes.")
    edges = property(lambda self: self.Get_topo()[1], doc="The neighbours of every node.")

    def Get_topo(self) -> tuple[list[int], list[int]]:
        """(index, edges)."""
        self._open("Get_topo")
        return list(self._index), list(self._edges)

    topo = property(Get_topo, doc="(index, edges)")

    def Get_neighbors_count(self, rank: int) -> int:
        """Number of neighbours of `rank`."""
        return len(self.Get_neighbors(rank))

    def Get_neighbors(self, rank: int) -> list[int]:
        """The neighbours of `rank`."""
        self._open("Get_neighbors")
        rank = as_int(rank, "rank", "Get_neighbors")
        if not 0 <= rank < len(self._index):
            raise MMPIError(f"Get_neighbors: rank {rank} is not a node of the graph")
        return topo.graph_neighbors(self._index, self._edges, rank)

    nneighbors = property(lambda self: len(self._topo_of("nneighbors").sources),
                          doc="Number of neighbours.")
    neighbors = property(lambda self: list(self._topo_of("neighbors").sources),
                         doc="This rank's neighbours.")


class Distgraphcomm(_Neighborhood, TopologyMethods, _Bridged, MPI.Distgraphcomm):
    """A bridged communicator with a distributed graph (mirrors mpi4py.MPI.Distgraphcomm)."""

    def Get_dist_neighbors_count(self) -> tuple[int, int, bool]:
        """(indegree, outdegree, weighted)."""
        self._open("Get_dist_neighbors_count")
        return self.indegree, self.outdegree, self._weights[0] is not None

    def Get_dist_neighbors(self):
        """(sources, destinations, (sourceweights, destweights) or None)."""
        self._open("Get_dist_neighbors")
        w = None if self._weights[0] is None else (list(self._weights[0]),
                                                   list(self._weights[1] or []))
        return self.inedges, self.outedges, w


__all__ = ["TopologyMethods", "Cartcomm", "Graphcomm", "Distgraphcomm"]
