"""The bridged communicators: mpi4py's `Intracomm` (and `Cartcomm`, `Distgraphcomm`) API.

Each class is a subclass of mpi4py's, so `isinstance(comm, MPI.Intracomm)` holds; its MPI
handle is MPI_COMM_NULL, so no native function handed one by mistake can silently work on a
single cluster. Every method of mpi4py's class that the bridge does not provide raises
`NotBridged`, naming the call. The methods come from mixins by concern: point-to-point
(`_p2p_api`), collectives (`_coll_api`), communicators and groups (`_create_api`).
"""

from __future__ import annotations

import sys

from . import _topo_api as topo
from ._coll_api import CollectiveMethods
from ._communicator import Core
from ._create_api import CommunicatorMethods
from ._native import MPI
from ._p2p_api import PointToPointMethods, as_int
from .errors import MMPIError, NotBridged
from .wire.layout import Layout

_Intracomm = MPI.Intracomm


class _Bridged(PointToPointMethods, CollectiveMethods, CommunicatorMethods):
    """What every bridged communicator class shares: identity and naming."""

    __slots__ = ()

    def __new__(cls, *args, **kwargs):
        """A new bridged communicator object (its native handle stays MPI_COMM_NULL)."""
        native = next(b for b in cls.__mro__ if b.__module__ == "mpi4py.MPI")
        return native.__new__(cls)

    def __init__(self, core: Core, name: str = "") -> None:
        self._core = core
        self._name = name
        self._tag_ub = core.engine.tag_ub
        self._errhandler = MPI.ERRORS_RETURN
        self._topo = None

    def _wrap(self, core: Core, name: str, cls=None):
        return (cls or Comm)(core, name)

    def __eq__(self, other) -> bool:
        if isinstance(other, _Bridged):
            return other._core is self._core
        if isinstance(other, MPI.Comm):  # a native one: only COMM_NULL, once this is freed
            return self._core.freed and not MPI.Comm.__bool__(other)
        return NotImplemented

    def __ne__(self, other) -> bool:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __hash__(self) -> int:
        return id(self._core)

    def __bool__(self) -> bool:
        return not self._core.freed

    def __reduce__(self):
        if self._core is self._core.engine.communicators[0]:
            return "COMM_WORLD"  # found again by name, as mpi4py's predefined handles
        raise ValueError(f"cannot serialize '{type(self).__name__}' instance")

    # -- info (kept, not interpreted) ----------------------------------------------------
    def Set_info(self, info) -> None:
        """Keep a copy of the hints (the bridge does not act on them)."""
        self._info = info.Dup() if info != MPI.INFO_NULL else MPI.Info.Create()

    def Get_info(self):
        """A copy of the hints set on this communicator."""
        info = getattr(self, "_info", None)
        return info.Dup() if info is not None else MPI.Info.Create()

    @property
    def info(self):
        """The hints set on this communicator."""
        return self.Get_info()

    @info.setter
    def info(self, info) -> None:
        self.Set_info(info)

    # -- a buffer for buffered sends (MPI 4.1: per communicator; here, the process's) ----
    def Attach_buffer(self, buf) -> None:
        """Attach a buffer for this communicator's buffered sends."""
        from ._p2p_api import attached

        attached.size = -1 if buf is MPI.BUFFER_AUTOMATIC else len(memoryview(buf).cast("B"))
        self._buffer = buf

    def Detach_buffer(self):
        """Detach it, once the buffered sends have completed."""
        self.Flush_buffer()
        buf, self._buffer = getattr(self, "_buffer", None), None
        from ._p2p_api import attached

        attached.size = 0
        return buf

    def Flush_buffer(self) -> None:
        """Wait until the buffered sends have completed."""
        from ._p2p_api import attached

        self._core.engine.wait_for(lambda: all([op.poll() for op, _ in attached.pending]))

    def Iflush_buffer(self):
        """Flush_buffer, as a request (complete once it returns)."""
        from ._op import completed
        from .request import BridgedRequest

        self.Flush_buffer()
        return BridgedRequest(completed())

    def __repr__(self) -> str:
        core = self._core
        return (f"<mmpi.{type(self).__name__} {self._name or '(unnamed)'} rank "
                f"{core.rank}/{core.size} ({core.engine.cluster})>")

    def Get_rank(self) -> int:
        """Rank of this process in the communicator."""
        return self._core.rank

    def Get_size(self) -> int:
        """Number of processes in the communicator."""
        return self._core.size

    @property
    def rank(self) -> int:
        """Rank of this process in the communicator."""
        return self._core.rank

    @property
    def size(self) -> int:
        """Number of processes in the communicator."""
        return self._core.size

    @property
    def cluster(self) -> str:
        """Name of this process's cluster: 'low' or 'high' (mmpi's own)."""
        return self._core.engine.cluster

    @property
    def layout(self) -> Layout:
        """Which cluster runs each rank of this communicator (mmpi's own)."""
        owners = self._core.engine.layout.owners
        return Layout.from_owners([owners[w] for w in self._core.members])

    def Get_name(self) -> str:
        """Name of the communicator."""
        return self._name

    def Set_name(self, name: str) -> None:
        """Set the communicator's name."""
        self._name = str(name)

    @property
    def name(self) -> str:
        """Name of the communicator."""
        return self._name

    @name.setter
    def name(self, value: str) -> None:
        self._name = str(value)

    def Is_inter(self) -> bool:
        """A bridged communicator is an intracommunicator."""
        return False

    def Is_intra(self) -> bool:
        """A bridged communicator is an intracommunicator."""
        return True

    @property
    def is_inter(self) -> bool:
        """False: an intracommunicator."""
        return False

    @property
    def is_intra(self) -> bool:
        """True: an intracommunicator."""
        return True

    def Get_topology(self) -> int:
        """MPI.CART, MPI.DIST_GRAPH, or MPI.UNDEFINED for none."""
        return MPI.UNDEFINED if self._topo is None else self._topo.kind

    @property
    def topology(self) -> int:
        """The topology kind."""
        return self.Get_topology()

    @property
    def is_topo(self) -> bool:
        """Whether a topology is attached."""
        return self._topo is not None

    def Abort(self, errorcode: int = 0):
        """Abort the whole bridged job: this cluster aborts, mmpi-run stops the rest."""
        self._core.engine.local.Abort(errorcode)

    # -- error handlers ------------------------------------------------------------------
    def Set_errhandler(self, errhandler) -> None:
        """ERRORS_RETURN: errors raise (MPI.Exception); ERRORS_ARE_FATAL/ABORT: they abort."""
        if errhandler == MPI.ERRORS_RETURN:
            self.__class__ = _plain(type(self))
        elif errhandler in (MPI.ERRORS_ARE_FATAL, MPI.ERRORS_ABORT):
            self.__class__ = _fatal(_plain(type(self)))
        else:
            raise NotBridged("Set_errhandler: only MPI.ERRORS_RETURN, MPI.ERRORS_ARE_FATAL and "
                             "MPI.ERRORS_ABORT are bridged, not user error handlers")
        self._errhandler = errhandler

    def Get_errhandler(self):
        """The error handler set on this communicator."""
        return self._errhandler

    # -- topologies ----------------------------------------------------------------------
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

    def Create_dist_graph_adjacent(self, sources, destinations, sourceweights=None,
                                   destweights=None, info=None, reorder=False):
        """A duplicate of this communicator with these neighbours of this rank."""
        new = Distgraphcomm(self.Dup()._core, "")
        new._topo = topo.graph([as_int(s, "source", "Create_dist_graph_adjacent")
                                for s in sources],
                               [as_int(d, "destination", "Create_dist_graph_adjacent")
                                for d in destinations])
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


class Comm(_Bridged, _Intracomm):
    """A communicator of the bridged world (mirrors mpi4py.MPI.Intracomm)."""


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

    @property
    def indegree(self) -> int:
        """Number of source neighbours."""
        return len(self._topo.sources)

    @property
    def outdegree(self) -> int:
        """Number of destination neighbours."""
        return len(self._topo.destinations)

    @property
    def degrees(self) -> tuple[int, int]:
        """(indegree, outdegree)."""
        return self.indegree, self.outdegree

    @property
    def inedges(self) -> list[int]:
        """The source neighbours."""
        return list(self._topo.sources)

    @property
    def outedges(self) -> list[int]:
        """The destination neighbours."""
        return list(self._topo.destinations)

    @property
    def inoutedges(self) -> tuple[list[int], list[int]]:
        """(sources, destinations)."""
        return self.inedges, self.outedges


class Cartcomm(_Neighborhood, _Bridged, MPI.Cartcomm):
    """A bridged communicator with a Cartesian topology (mirrors mpi4py.MPI.Cartcomm)."""

    def Get_dim(self) -> int:
        """Number of dimensions."""
        return len(self._dims)

    @property
    def dim(self) -> int:
        """Number of dimensions."""
        return len(self._dims)

    ndim = dim

    @property
    def dims(self) -> list[int]:
        """The grid's extent in each dimension."""
        return list(self._dims)

    @property
    def periods(self) -> list[int]:
        """Periodicity of each dimension (1 or 0)."""
        return [int(p) for p in self._periods]

    def Get_topo(self) -> tuple[list[int], list[int], list[int]]:
        """(dims, periods, coords of this rank)."""
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
        rank = as_int(rank, "rank", "Get_coords")
        if not 0 <= rank < self._core.size:
            raise MMPIError(f"Get_coords: rank {rank} is not in the grid")
        return topo.cart_coords(self._dims, rank)

    def Get_cart_rank(self, coords) -> int:
        """The rank at `coords` (periodic dimensions wrap)."""
        rank = topo.cart_rank(self._dims, self._periods, [int(x) for x in coords])
        if rank == MPI.PROC_NULL:
            raise MMPIError(f"Get_cart_rank: {list(coords)} is outside the grid {self._dims}")
        return rank

    def Shift(self, direction: int, disp: int) -> tuple[int, int]:
        """(source, dest) `disp` steps along `direction` (PROC_NULL off an edge)."""
        me = topo.cart_coords(self._dims, self._core.rank)
        up, down = list(me), list(me)
        up[direction] += disp
        down[direction] -= disp
        return (topo.cart_rank(self._dims, self._periods, down),
                topo.cart_rank(self._dims, self._periods, up))

    def Sub(self, remain_dims):
        """The sub-grid through this rank that keeps the dimensions `remain_dims` marks."""
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


class Distgraphcomm(_Neighborhood, _Bridged, MPI.Distgraphcomm):
    """A bridged communicator with a distributed graph (mirrors mpi4py.MPI.Distgraphcomm)."""

    def Get_dist_neighbors_count(self) -> tuple[int, int, bool]:
        """(indegree, outdegree, weighted)."""
        return self.indegree, self.outdegree, self._weights[0] is not None

    def Get_dist_neighbors(self):
        """(sources, destinations, (sourceweights, destweights) or None)."""
        w = None if self._weights[0] is None else (list(self._weights[0]),
                                                   list(self._weights[1] or []))
        return self.inedges, self.outedges, w


_FATAL: dict[type, type] = {}


def _plain(cls: type) -> type:
    return getattr(cls, "_plain_class", cls)


def _fatal(cls: type) -> type:
    """`cls` with every public method aborting the job on an MPI error (ERRORS_ARE_FATAL)."""
    fatal = _FATAL.get(cls)
    if fatal is None:
        methods = {}
        for name in dir(cls):
            attr = getattr(cls, name)
            if not name.startswith("_") and callable(attr) and not isinstance(attr, type) \
                    and name not in ("Set_errhandler", "Get_errhandler", "Abort"):
                methods[name] = _aborting(name, attr)
        fatal = _FATAL[cls] = type(cls.__name__, (cls,), {**methods, "_plain_class": cls,
                                                           "__module__": cls.__module__})
    return fatal


def _aborting(name: str, method):
    def call(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except (MMPIError, MPI.Exception) as exc:
            print(f"mmpi: {name} on rank {self._core.rank}: {exc} (MPI.ERRORS_ARE_FATAL); "
                  "aborting", file=sys.stderr, flush=True)
            self._core.engine.local.Abort(1)

    call.__name__ = name
    call.__doc__ = method.__doc__
    return call


def _not_bridged(cls_name: str, name: str):
    def call(self, *args, **kwargs):
        raise NotBridged(f"{name} is not bridged yet: mmpi does not provide "
                         f"MPI.{cls_name}.{name} on a bridged communicator")

    call.__name__ = name
    call.__doc__ = "Not bridged yet: raises NotBridged."
    return call


def _stub_the_rest(cls, native) -> None:
    """Every public callable of mpi4py's class that `cls` lacks raises NotBridged by name."""
    mine = set()
    for base in cls.__mro__:
        if base is native or base in native.__mro__:
            break
        mine |= set(vars(base))
    for name in dir(native):
        if name.startswith("_") or name in mine:
            continue
        attr = getattr(native, name)
        if callable(attr) and not isinstance(attr, type):
            setattr(cls, name, _not_bridged(native.__name__, name))


for _cls, _native in ((Comm, _Intracomm), (Cartcomm, MPI.Cartcomm),
                      (Distgraphcomm, MPI.Distgraphcomm)):
    _stub_the_rest(_cls, _native)
del _cls, _native

__all__ = ["Comm", "Cartcomm", "Distgraphcomm"]
