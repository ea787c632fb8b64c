"""Small collectives whose data rides in the collective check: Bcast and Reduce, <= CARRY bytes.

The general scheme runs the check's allgather and then the call's own native steps. Here the
data is part of the check (`common.start_check`), so the check is the call's only native round
in each cluster (docs/performance.md, "Collective checks"):
Rule 1: Bcast: the root sends its data to the other cluster's leader, then runs the check with
        the data in its part: after it every rank of the root's cluster has the data. The
        other cluster's leader waits for the data, then runs the check with it in its part;
        the other ranks run the check at once and wait in it.
Rule 2: Reduce (predefined ops, which commute): every rank runs the check with its data in its
        part; the root and the other cluster's leader each reduce their cluster's parts in
        rank order, that leader sends its cluster's partial to the root, which combines.
Rule 3: whether a call goes this way depends only on its size and op, which every rank must
        agree on (the check verifies the size), never on how a rank passed its buffers: no
        rank of a cluster takes it while another does not.
"""

from __future__ import annotations

from .._engine.buffers import Typed
from .._engine.monitor import Counting
from .common import (
    CARRY,
    CHECK,
    PREDEFINED_OPS,
    T_BCAST,
    T_REDUCE,
    WORDS,
    same_size,
    start_check,
    verify_check,
)
from .transport import Coll, CrossRecv

_HEAD = 24  # bytes of the check's 3 numbers at the start of each rank's part
_PART = 8 * WORDS  # bytes of a rank's part


def fits(c: Coll, nbytes: int, op=None) -> bool:
    """Whether a call of `nbytes` (a reduction: with `op`) carries its data in the check."""
    return nbytes <= CARRY and c.small(nbytes) and (op is None or id(op) in PREDEFINED_OPS)


def _gather(c: Coll, root: int, nbytes: int, data):
    """Run the check with `data` (bytes, or None) in this rank's part; every part's bytes."""
    both, req = start_check(c, root, nbytes)
    raw = memoryview(both).cast("B")
    if data is not None:
        raw[_HEAD:_HEAD + nbytes] = data
    req.Start()
    yield req
    if CHECK:
        verify_check(c, both)
    return raw[_PART:]


def bcast(c: Coll, b: Typed, root: int):
    """Bcast of `b` (`fits`) from `root`."""
    nb = len(b.view)
    if c.here(root):
        me = c.rank == root
        if me:
            c.xsend(b.view, c.peer, T_BCAST)
        if c.nmine > 1:
            lroot = c.local_of(root)
            parts = yield from _gather(c, root, nb, b.view if me else None)
            if type(c.local) is Counting:  # the monitor counts the data, not the check
                c.local.carried(nb, lroot)
            if not me:
                at = lroot * _PART + _HEAD
                b.view[:] = parts[at:at + nb]
        return
    data = None
    if c.leader:
        data = yield CrossRecv(c, root, T_BCAST)
        same_size(c, "data", nb, len(data))
        b.view[:] = data
    if c.nmine > 1:
        parts = yield from _gather(c, root, nb, data)
        if type(c.local) is Counting:
            c.local.carried(nb, 0)
        if not c.leader:
            b.view[:] = parts[_HEAD:_HEAD + nb]


def reduce(c: Coll, sb: Typed | None, rb: Typed | None, op, root: int):
    """Reduce (`fits`) of `sb` (None: in place, at the root) into `rb` (the root's; else None)."""
    mine = rb if sb is None else sb
    nb = len(mine.view)
    sums = c.here(root) and c.rank == root or not c.here(root) and c.leader
    if c.nmine > 1:
        parts = yield from _gather(c, root, nb, mine.view)
        if type(c.local) is Counting:
            c.local.carried_to(nb, c.local_of(root) if c.here(root) else 0)
        if not sums:
            return
        out = rb.view if rb is not None else c.tmp(0, nb)
        out[:] = parts[_HEAD:_HEAD + nb]
        for i in range(1, c.nmine):
            at = i * _PART + _HEAD
            op.Reduce_local(mine.like(parts[at:at + nb]), mine.like(out))
    elif rb is not None:
        out = rb.view
        if sb is not None:
            out[:] = sb.view
    else:
        out = mine.view
    if rb is None:
        c.xsend(out, root, T_REDUCE)
        return
    theirs = yield CrossRecv(c, c.peer, T_REDUCE)
    same_size(c, "data", nb, len(theirs))
    op.Reduce_local(rb.like(theirs), rb.spec)  # theirs op mine: predefined ops commute


__all__ = ["bcast", "fits", "reduce"]
