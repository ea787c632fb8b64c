"""Small collectives whose data rides in the collective check: Bcast of at most CARRY bytes.

The general scheme runs the check's allgather and then the call's own native steps. Here the
data is part of the check (`_base.start_check`), so the check is the call's only native round
in each cluster (docs/performance.md, "Small collectives"):
Rule 1: the root sends its data to the other cluster's leader, then runs the check with the
        data in its part: after it every rank of the root's cluster has the data.
Rule 2: the other cluster's leader waits for the data, then runs the check with the data in
        its part; the other ranks run the check at once and wait in it.
Rule 3: whether a call goes this way depends only on its size, which every rank must agree on
        (and the check verifies), never on how a rank passed its buffer: no rank of a cluster
        takes it while another does not.
"""

from __future__ import annotations

from .._buffers import Typed
from .._crossing import Coll, CrossRecv
from .._monitor import Counting
from ._base import CARRY, CHECK, T_BCAST, WORDS, same_size, start_check, verify_check

_HEAD = 24  # bytes of the check's 3 numbers at the start of each rank's part
_PART = 8 * WORDS  # bytes of a rank's part


def fits(c: Coll, nbytes: int) -> bool:
    """Whether a call of `nbytes` carries its data in the check (Rule 3)."""
    return nbytes <= CARRY and c.small(nbytes)


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


__all__ = ["bcast", "fits"]
