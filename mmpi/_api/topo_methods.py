"""Process topologies on bridged communicators: Cartesian, distributed graph, neighbourhoods.

A topology keeps the ranks of the communicator it is made from (`reorder` is accepted and
not acted on: in the default layout the low cluster's ranks come first, so a row-major grid
already cuts between the clusters along its first dimension). Neighbourhood collectives are
messages between neighbours on the communicator's collective context.
"""

from __future__ import annotations

import math
import pickle

from .._collectives.alltoall import w_blocks
from .._collectives.common import IN_PLACE
from .._collectives.transport import dumps
from .._engine.buffers import as_typed, as_vector
from .._startup.native import MPI
from ..errors import BufferError_, RankError, UsageError

PROC_NULL = MPI.PROC_NULL
_T_NEIGHBOR = 32  # + 2 * dimension + (1: sent towards +1, 0: towards -1); graphs: + 0


def cart_coords(dims: list[int], rank: int) -> list[int]:
    """Row-major coordinates of `rank` in a grid of `dims`."""
    out = []
    for d in reversed(dims):
        out.append(rank % d)
        rank //= d
    return out[::-1]


def cart_rank(dims: list[int], periods: list[bool], coords) -> int:
    """The rank at `coords` (wrapped where periodic); PROC_NULL off a non-periodic edge."""
    rank = 0
    for d, p, x in zip(dims, periods, coords, strict=True):
        if not 0 <= x < d:
            if not p:
                return PROC_NULL
            x %= d
        rank = rank * d + x
    return rank


class Topology:
    """Who a rank's neighbours are: sources (in order) and destinations, with the tags."""

    def __init__(self, kind: int, sources: list[int], destinations: list[int],
                 recv_tags: list[int], send_tags: list[int]) -> None:
        self.kind = kind
        self.sources, self.destinations = sources, destinations
        self.recv_tags, self.send_tags = recv_tags, send_tags


def cartesian(dims: list[int], periods: list[bool], rank: int) -> Topology:
    """The neighbours of `rank` in a grid: per dimension, the -1 then the +1 neighbour."""
    coords = cart_coords(dims, rank)
    srcs, dsts, rtags, stags = [], [], [], []
    for d in range(len(dims)):
        for step in (-1, 1):
            c = list(coords)
            c[d] += step
            n = cart_rank(dims, periods, c)
            srcs.append(n)
            dsts.append(n)
            # What the -1 neighbour sent towards its +1 neighbour lands in the -1 slot.
            rtags.append(_T_NEIGHBOR + 2 * d + (1 if step < 0 else 0))
            stags.append(_T_NEIGHBOR + 2 * d + (1 if step > 0 else 0))
    return Topology(MPI.CART, srcs, dsts, rtags, stags)


def graph(sources: list[int], destinations: list[int], kind: int = MPI.DIST_GRAPH) -> Topology:
    """Neighbours of a (distributed) graph: messages between two ranks match in order."""
    return Topology(kind, list(sources), list(destinations),
                    [_T_NEIGHBOR] * len(sources), [_T_NEIGHBOR] * len(destinations))


def graph_arrays(index, edges, size: int, call: str) -> tuple[list[int], list[int]]:
    """MPI's graph `index` (cumulative degrees; mpi4py also takes a leading 0) and `edges`."""
    index, edges = [int(i) for i in index], [int(e) for e in edges]
    if len(index) > 1 and index[0] == 0 and index[-1] == len(edges):
        index = index[1:]
    if len(index) > size or any(b < a for a, b in zip([0, *index], index, strict=False)) or \
            (index and index[-1] != len(edges)):
        raise UsageError(f"{call}: index {index} does not describe {len(edges)} edges over "
                         f"at most {size} nodes")
    if any(not 0 <= e < len(index) for e in edges):
        raise RankError(f"{call}: edges {edges} name nodes outside 0..{len(index) - 1}")
    return index, edges


def graph_neighbors(index: list[int], edges: list[int], rank: int) -> list[int]:
    """The neighbours of node `rank` of an MPI graph."""
    return edges[index[rank - 1] if rank else 0:index[rank]]


def _neighbors(c, topo: Topology, sends: list, recvs: list):
    """Steps: block i of `recvs` from source i, block j of `sends` to destination j."""
    rs = [c.recv(buf, s, t) for buf, s, t in zip(recvs, topo.sources, topo.recv_tags,
                                                  strict=True) if s != PROC_NULL]
    ss = [c.send(buf, d, t) for buf, d, t in zip(sends, topo.destinations, topo.send_tags,
                                                  strict=True) if d != PROC_NULL]
    if rs or ss:
        yield (*rs, *ss)


def _blocks(view, n: int, call: str, what: str) -> list:
    if n == 0:
        return []
    if len(view) % n:
        raise BufferError_(f"{call}: {what} of {len(view)} bytes is not {n} equal blocks")
    k = len(view) // n
    return [view[i * k:(i + 1) * k] for i in range(n)]


def neighbor_allgather(c, topo: Topology, sendbuf, recvbuf):
    sb = as_typed(sendbuf, writable=False, op="Neighbor_allgather").view
    rb = as_typed(recvbuf, writable=True, op="Neighbor_allgather",
                  blocks=max(len(topo.sources), 1)).view
    recvs = _blocks(rb, len(topo.sources), "Neighbor_allgather", "receive buffer")
    return _neighbors(c, topo, [sb] * len(topo.destinations), recvs)


def neighbor_allgatherv(c, topo: Topology, sendbuf, recvbuf):
    sb = as_typed(sendbuf, writable=False, op="Neighbor_allgatherv").view
    rv = as_vector(recvbuf, len(topo.sources), writable=True, op="Neighbor_allgatherv")
    return _neighbors(c, topo, [sb] * len(topo.destinations),
                      [rv.block(i) for i in range(len(topo.sources))])


def neighbor_alltoall(c, topo: Topology, sendbuf, recvbuf):
    if sendbuf is IN_PLACE:
        raise UsageError("Neighbor_alltoall: MPI.IN_PLACE is not allowed")
    sb = as_typed(sendbuf, writable=False, op="Neighbor_alltoall",
                  blocks=max(len(topo.destinations), 1)).view
    rb = as_typed(recvbuf, writable=True, op="Neighbor_alltoall",
                  blocks=max(len(topo.sources), 1)).view
    return _neighbors(c, topo, _blocks(sb, len(topo.destinations), "Neighbor_alltoall",
                                       "send buffer"),
                      _blocks(rb, len(topo.sources), "Neighbor_alltoall", "receive buffer"))


def neighbor_alltoallv(c, topo: Topology, sendbuf, recvbuf):
    sv = as_vector(sendbuf, len(topo.destinations), writable=False, op="Neighbor_alltoallv")
    rv = as_vector(recvbuf, len(topo.sources), writable=True, op="Neighbor_alltoallv")
    return _neighbors(c, topo, [sv.block(j) for j in range(len(topo.destinations))],
                      [rv.block(i) for i in range(len(topo.sources))])


def neighbor_alltoallw(c, topo: Topology, sendbuf, recvbuf):
    name = "Neighbor_alltoallw"
    sends = w_blocks(sendbuf, len(topo.destinations), False, name, c.rank)
    recvs = w_blocks(recvbuf, len(topo.sources), True, name, c.rank)
    return _neighbors(c, topo, [t.view for t in sends], [t.view for t in recvs])


def neighbor_objects(c, topo: Topology, objs: list):
    """Steps of the lowercase neighbourhood exchange: objs[j] to destination j; a list back."""
    sends = [memoryview(dumps(o)) for o in objs]
    ops = [c.recv_sized(s, t) if s != PROC_NULL else None
           for s, t in zip(topo.sources, topo.recv_tags, strict=True)]
    ss = [c.send(buf, d, t) for buf, d, t in zip(sends, topo.destinations, topo.send_tags,
                                                  strict=True) if d != PROC_NULL]
    live = [op for op in ops if op is not None]
    if live or ss:
        yield (*live, *ss)
    out = [None if op is None else pickle.loads(c.received(op)) for op in ops]
    for op in live:
        c.release(op)
    return out


def check_dims(dims, periods, size: int, rank: int) -> tuple[list[int], list[bool]]:
    """Checked grid dimensions and periodicity for Create_cart on a communicator of `size`."""
    dims = [int(d) for d in dims]
    if periods is None or isinstance(periods, bool):  # one flag for every dimension
        periods = [bool(periods)] * len(dims)
    periods = [bool(p) for p in periods]
    if len(periods) != len(dims):
        raise UsageError(f"Create_cart on rank {rank}: {len(dims)} dimensions but "
                         f"{len(periods)} periods")
    if any(d < 1 for d in dims) or math.prod(dims) > size:
        raise RankError(f"Create_cart on rank {rank}: a grid of {dims} needs "
                        f"{math.prod(dims)} ranks, the communicator has {size}")
    return dims, periods
