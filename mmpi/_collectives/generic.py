"""Reductions in strict rank order where the clusters' ranks interleave.

The cluster-aware reductions combine one partial per cluster. That is exact for commutative
ops and, when each cluster's ranks are consecutive, for any op. For a non-commutative op on
a communicator whose clusters' ranks interleave (and for every prefix reduction there), each
rank's contribution is gathered instead and folded in rank order. Correct, and each byte still
crosses once, but the whole reduction happens where it is needed.
"""

from __future__ import annotations

from .._engine.buffers import Typed
from .._startup.native import MPI
from .alltoall import _allgatherv
from .common import equal_blocks
from .rooted import _gatherv_other, _gatherv_root
from .transport import Coll

BYTE = MPI.BYTE


def _fold(op, parts: list[memoryview], like: Typed, upto: int, into) -> bool:
    """Into := parts[0] op ... op parts[upto - 1]; False if there is nothing to fold."""
    if upto <= 0:
        return False
    acc = bytearray(parts[0])
    for part in parts[1:upto]:
        nxt = bytearray(part)
        op.Reduce_local(like.like(memoryview(acc)), like.like(memoryview(nxt)))  # nxt = acc op nxt
        acc = nxt
    into[:] = acc
    return True


def reduce_to(c: Coll, data: Typed, out: Typed | None, op, root: int):
    """Reduce in rank order to `root` (`out` there: where the result goes)."""
    n, nb = c.size, data.nbytes
    if c.rank != root:
        yield from _gatherv_other(c, data, root)
        return
    everything = c.tmp(5, n * nb)
    yield from _gatherv_root(c, data.spec,
                             equal_blocks(everything, n, data.count, data.dt, data.extent))
    parts = [everything[i * nb:(i + 1) * nb] for i in range(n)]
    _fold(op, parts, data, n, out.view)


def allreduce(c: Coll, data: Typed, out: Typed, op, upto: int | None = None):
    """Reduce in rank order on every rank; `upto`: a prefix of that many ranks only (scans).

    Returns whether `out` was written (an empty prefix leaves it alone).
    """
    n, nb = c.size, data.nbytes
    everything = c.tmp(5, n * nb)
    everything[c.rank * nb:(c.rank + 1) * nb] = data.view
    yield from _allgatherv(c, [data.view, BYTE],
                           equal_blocks(everything, n, data.count, data.dt, data.extent))
    parts = [everything[i * nb:(i + 1) * nb] for i in range(n)]
    return _fold(op, parts, data, n if upto is None else upto, out.view)
