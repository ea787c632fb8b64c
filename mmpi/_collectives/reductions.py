"""Barrier and the reductions: Reduce, Allreduce, Reduce_scatter(_block), Scan, Exscan.

The leaders' scheme: a native reduce per cluster, the leaders swap their partials (one
crossing each way) and combine them in rank order, a native bcast per cluster. A large
Allreduce crosses in shares between pairs of ranks instead (see rooted.SPLIT).
"""

from __future__ import annotations

import numpy as np

from .._engine.buffers import Typed, as_typed, plain_pair
from .._startup.native import MPI
from ..errors import BufferError_, UsageError
from . import carried, compiled, generic, objects
from .common import (
    BYTE,
    IN_PLACE,
    PREDEFINED_OPS,
    REDUCE_VIA_RS,
    T_ALLREDUCE,
    T_BARRIER,
    T_REDUCE,
    T_RSB,
    T_SCAN,
    after_copy,
    check_op,
    checked,
    checking,
    combine,
    commutes,
    ireduce,
    same_size,
)
from .rooted import shares, ways
from .transport import Coll


def barrier(c: Coll, blocking: bool = False):
    """Tight: native barrier per cluster, the leaders' token exchange, native barrier again.

    `blocking`: a Barrier, not an Ibarrier (it may run compiled: compiled.py).
    """
    if blocking and compiled.built(c):
        return compiled.Call(c, lambda: barrier(c), compiled.BARRIER)
    if checking(c):  # the check's allgather holds the cluster's ranks as the first barrier would
        return checked(c, _barrier(c, False))
    return _barrier(c, True)


def _barrier(c: Coll, first: bool):
    if first:
        yield c.local.Ibarrier()
    if c.leader:
        yield c.xswap(b"", T_BARRIER)
    yield c.local.Ibarrier()


# -- reduce ----------------------------------------------------------------------------------
def reduce(c: Coll, sendbuf, recvbuf, op, root, blocking: bool = False):
    """`blocking`: a Reduce, not an Ireduce (a small one may run compiled: compiled.py)."""
    root = c.root(root)
    op = check_op(op, "Reduce")
    in_order = not c.contiguous and not commutes(op)  # see generic.py
    if c.rank == root:
        rb = as_typed(recvbuf, writable=True, op="Reduce")
        sb = None if sendbuf is IN_PLACE else as_typed(sendbuf, writable=False, op="Reduce")
        if sb is not None and sb.nbytes != rb.nbytes:
            raise BufferError_(f"Reduce on root {root}: send buffer has {sb.nbytes} bytes, "
                               f"receive buffer {rb.nbytes}")
        if carried.fits(c, rb.nbytes, op):
            if blocking and _compiled(c, rb):
                return compiled.Call(c, lambda: carried.reduce(c, sb, rb, op, root),
                                     compiled.REDUCE, None if sb is None else sb.view, rb.view,
                                     rb.count, rb.dt, op, root)
            return carried.reduce(c, sb, rb, op, root)
        if in_order:
            return checked(c, in_place(c, rb, lambda sb: generic.reduce_to(c, sb, rb, op, root))
                           if sb is None else generic.reduce_to(c, sb, rb, op, root), root,
                           rb.nbytes)
        return checked(c, _reduce_root(c, sb, rb, op), root, rb.nbytes)
    if sendbuf is IN_PLACE:
        raise UsageError(f"Reduce: MPI.IN_PLACE is only valid on the root, not rank {c.rank}")
    sb = as_typed(sendbuf, writable=False, op="Reduce")
    if carried.fits(c, sb.nbytes, op):
        if blocking and _compiled(c, sb):
            return compiled.Call(c, lambda: carried.reduce(c, sb, None, op, root),
                                 compiled.REDUCE, sb.view, None, sb.count, sb.dt, op, root)
        return carried.reduce(c, sb, None, op, root)
    if in_order:
        return checked(c, generic.reduce_to(c, sb, None, op, root), root, sb.nbytes)
    return checked(c, _reduce_other(c, sb, op, root), root, sb.nbytes)


def _compiled(c: Coll, b: Typed) -> bool:
    """Whether a small Reduce of `b` may run compiled: contiguous elements of a named type."""
    return compiled.built(c) and b.dt.is_predefined and b.extent == b.dt.extent


def _reduce_root(c: Coll, sb: Typed | None, rb: Typed, op):
    send = IN_PLACE if sb is None else sb.spec
    rl = c.local_of(c.rank)
    if c.small(rb.nbytes):
        yield ireduce(c, send, rb.spec, op, rl, rb)
        theirs = yield c.xrecv(c.peer, T_REDUCE)
    else:
        theirs = c.tmp(0, rb.nbytes + 1)  # one spare byte: a larger partial is caught below
        r = c.recv(theirs, c.peer, T_REDUCE)
        yield ireduce(c, send, rb.spec, op, rl, rb)
        yield r
        theirs = theirs[:r.nbytes]
    same_size(c, "data", rb.nbytes, len(theirs))
    combine(op, rb, theirs, c.first)


def _reduce_other(c: Coll, sb: Typed, op, root: int):
    if not c.here(root) and c.leader:
        part = c.tmp(0, sb.nbytes)
        yield ireduce(c, sb.spec, sb.like(part), op, 0, sb)
        yield c.cross(part, root, T_REDUCE)
    else:
        yield ireduce(c, sb.spec, None, op, c.local_of(root) if c.here(root) else 0, sb)


def _copy(c: Coll, b: Typed) -> Typed:
    """A copy of `b` in scratch space (an in-place call's input, kept apart from its output).

    Only from inside a call's steps (see `in_place`).
    """
    tmp = c.tmp(6, b.nbytes)
    tmp[:] = b.view
    return Typed(tmp, b.count, b.dt, b.extent)


def in_place(c: Coll, rb: Typed, steps_of):
    """`steps_of(input)`, the input a copy of `rb` made when the steps start (see after_copy)."""
    return after_copy(c, 6, rb.view, lambda v: steps_of(Typed(v, rb.count, rb.dt, rb.extent)))


# -- allreduce --------------------------------------------------------------------------------
def allreduce(c: Coll, sendbuf, recvbuf, op, blocking: bool = False):
    """`blocking`: an Allreduce, not an Iallreduce (it may run compiled: compiled.py)."""
    if id(op) in PREDEFINED_OPS:
        dt = plain_pair(sendbuf, recvbuf)
        if dt is not None and recvbuf.nbytes < REDUCE_VIA_RS and c.small(recvbuf.nbytes):
            if blocking and compiled.built(c):
                return compiled.Call(c, lambda: allreduce(c, sendbuf, recvbuf, op),
                                     compiled.ALLREDUCE, None if sendbuf is IN_PLACE else sendbuf,
                                     recvbuf, dt, op)
            return checked(c, _allreduce_plain(c, sendbuf, recvbuf, op, dt), -1,
                           recvbuf.nbytes)
    op = check_op(op, "Allreduce")
    rb = as_typed(recvbuf, writable=True, op="Allreduce")
    sb = None if sendbuf is IN_PLACE else as_typed(sendbuf, writable=False, op="Allreduce")
    if sb is not None and sb.nbytes != rb.nbytes:
        raise BufferError_(f"Allreduce on rank {c.rank}: send buffer has {sb.nbytes} bytes, "
                           f"receive buffer {rb.nbytes}")
    if not c.contiguous and not commutes(op):  # see generic.py
        steps = in_place(c, rb, lambda sb: generic.allreduce(c, sb, rb, op)) if sb is None \
            else generic.allreduce(c, sb, rb, op)
    elif ways(c, rb.nbytes):
        steps = _allreduce_split(c, sb, rb, op, ways(c, rb.nbytes))
    else:
        steps = _allreduce(c, sb, rb, op)
    return checked(c, steps, -1, rb.nbytes)


def _allreduce(c: Coll, sb: Typed | None, rb: Typed, op):
    if c.leader:
        yield ireduce(c, IN_PLACE if sb is None else sb.spec, rb.spec, op, 0, rb)
        if c.small(rb.nbytes):
            theirs = yield c.xswap(rb.view, T_ALLREDUCE)
        else:
            theirs = c.tmp(1, rb.nbytes + 1)  # one spare byte: a larger partial is caught
            r = c.recv(theirs, c.peer, T_ALLREDUCE)
            yield (r, c.send(rb.view, c.peer, T_ALLREDUCE))
            theirs = theirs[:r.nbytes]
        same_size(c, "data", rb.nbytes, len(theirs))
        combine(op, rb, theirs, c.first)
    else:
        yield ireduce(c, rb.spec if sb is None else sb.spec, None, op, 0, rb)
    yield c.local.Ibcast(rb.spec, 0)


def _allreduce_plain(c: Coll, sendbuf, recvbuf: np.ndarray, op: MPI.Op, dt: MPI.Datatype):
    """The leaders' scheme for plain numpy arrays (`plain_pair`), small, predefined op.

    The arrays go to mpi4py as they are, without the general argument handling: each
    microsecond of a small call's Python costs several on shared cores (docs/performance.md,
    "Small collectives").
    """
    mine = [recvbuf, dt]
    if c.leader:
        yield c.local.Ireduce(IN_PLACE if sendbuf is IN_PLACE else [sendbuf, dt], mine, op, 0)
        theirs = yield c.xswap(recvbuf, T_ALLREDUCE)
        same_size(c, "data", recvbuf.nbytes, len(theirs))
        op.Reduce_local([theirs, dt], mine)  # theirs op mine: predefined ops commute
    else:
        yield c.local.Ireduce(mine if sendbuf is IN_PLACE else [sendbuf, dt], None, op, 0)
    yield c.local.Ibcast(mine, 0)


def _allreduce_split(c: Coll, sb: Typed | None, rb: Typed, op, k: int):
    """Allreduce of a large buffer through k pairs of ranks, one share of it each.

    Local rank i < k of each cluster gets share i reduced within its cluster, swaps it with
    local rank i of the other cluster and combines in rank order; an in-place allgather then
    gives every rank every share.
    """
    ext = rb.extent
    counts, where = shares(rb.count, k, c.nmine)
    off, nb = where[c.lrank] * ext, counts[c.lrank] * ext
    share = Typed(rb.view[off:off + nb], counts[c.lrank], rb.dt, ext)
    if sb is None:  # in place: the input is rb, and this rank's share of rb is the output
        tmp = c.tmp(2, rb.nbytes)
        tmp[:] = rb.view
        send = rb.like(tmp)
    else:
        send = sb.spec
    yield c.local.Ireduce_scatter(send, share.spec, counts, op)
    if c.lrank < k:
        peer = c.theirs[c.lrank]
        theirs = c.tmp(1, nb + 1)  # one spare byte: a larger share is caught below
        r = c.recv(theirs, peer, T_ALLREDUCE)
        yield (r, c.send(share.view, peer, T_ALLREDUCE))
        same_size(c, f"data in share {c.lrank} of {k}", nb, r.nbytes)
        combine(op, share, theirs[:nb], c.first)
    yield c.local.Iallgatherv(IN_PLACE, [rb.view, counts, where, rb.dt])


# -- reduce_scatter ---------------------------------------------------------------------------
def reduce_scatter_block(c: Coll, sendbuf, recvbuf, op):
    op = check_op(op, "Reduce_scatter_block")
    rb = as_typed(recvbuf, writable=True, op="Reduce_scatter_block",
                  blocks=c.size if sendbuf is IN_PLACE else 1)
    if sendbuf is IN_PLACE:
        if rb.count % c.size:
            raise BufferError_("Reduce_scatter_block: with IN_PLACE the receive buffer must "
                               f"hold {c.size} equal blocks")
        sb, blk = rb, rb.nbytes // c.size
        out = rb.view[:blk]
    else:
        sb = as_typed(sendbuf, writable=False, op="Reduce_scatter_block", blocks=c.size)
        blk = rb.nbytes
        out = rb.view
        if sb.nbytes != blk * c.size:
            raise BufferError_(
                f"Reduce_scatter_block on rank {c.rank}: send buffer has {sb.nbytes} bytes, "
                f"expected {c.size} blocks of the receive buffer's {blk}"
            )
    if not c.contiguous and not commutes(op):
        return checked(c, _reduce_scatter_in_order(c, sb, [blk] * c.size, out, op), -1, blk)
    return checked(c, _reduce_scatter(c, sb, [blk] * c.size, out, op), -1, blk)


def reduce_scatter(c: Coll, sendbuf, recvbuf, recvcounts, op):
    """Reduce, then scatter blocks of `recvcounts[i]` elements to rank i."""
    op = check_op(op, "Reduce_scatter")
    rb = as_typed(recvbuf, writable=True, op="Reduce_scatter")
    if recvcounts is None and sendbuf is not IN_PLACE:  # each rank's block: its receive count
        return _reduce_scatter_counted(c, sendbuf, rb, op)
    return _reduce_scatter_v(c, sendbuf, rb, recvcounts, op)


def _reduce_scatter_counted(c: Coll, sendbuf, rb: Typed, op):
    counts = yield from objects.allgather(c, rb.count)
    return (yield from _reduce_scatter_v(c, sendbuf, rb, counts, op))


def _reduce_scatter_v(c: Coll, sendbuf, rb: Typed, recvcounts, op):
    counts = [int(n) for n in recvcounts] if recvcounts is not None else None
    if counts is None or len(counts) != c.size or any(n < 0 for n in counts):
        raise BufferError_(f"Reduce_scatter on rank {c.rank}: expected {c.size} receive "
                           f"counts >= 0, got {recvcounts!r}")
    sb = rb if sendbuf is IN_PLACE else as_typed(sendbuf, writable=False, op="Reduce_scatter")
    ext = sb.extent
    if sb.count < sum(counts):
        raise BufferError_(f"Reduce_scatter on rank {c.rank}: send buffer holds {sb.count} "
                           f"elements, the counts add up to {sum(counts)}")
    out = rb.view[:counts[c.rank] * ext] if sendbuf is IN_PLACE else rb.view
    if len(out) < counts[c.rank] * ext:
        raise BufferError_(f"Reduce_scatter on rank {c.rank}: receive buffer holds "
                           f"{len(out)} bytes, its block {counts[c.rank] * ext}")
    sb = Typed(sb.view[:sum(counts) * ext], sum(counts), sb.dt, ext)
    sizes, out = [n * ext for n in counts], out[:counts[c.rank] * ext]
    if not c.contiguous and not commutes(op):
        return checked(c, _reduce_scatter_in_order(c, sb, sizes, out, op), -1, sb.nbytes)
    return checked(c, _reduce_scatter(c, sb, sizes, out, op), -1, sb.nbytes)


def _reduce_scatter_in_order(c: Coll, sb: Typed, sizes: list[int], out, op):
    """The whole reduction in rank order everywhere (generic.py), then this rank's block."""
    whole = Typed(c.tmp(7, sb.nbytes), sb.count, sb.dt, sb.extent)
    yield from generic.allreduce(c, _copy(c, sb), whole, op)
    start = sum(sizes[:c.rank])
    out[:] = whole.view[start:start + sizes[c.rank]]


def _reduce_scatter(c: Coll, sb: Typed, sizes: list[int], out, op):
    """The whole reduction at the leaders, then a native scatter of this cluster's blocks.

    The leaders swap the blocks of the other cluster's ranks; `sizes` are the blocks' bytes
    by rank.
    """
    starts = [0]
    for n in sizes:
        starts.append(starts[-1] + n)
    full = c.tmp(0, sb.nbytes) if c.leader else None
    yield ireduce(c, sb.spec, sb.like(full) if c.leader else None, op, 0, sb)
    mine_sizes = [sizes[r] for r in c.mine]
    if c.leader:
        theirs_part = _blocks(full, starts, c.theirs)
        mine_part = _blocks(full, starts, c.mine)
        outgoing = c.tmp(3, sum(len(b) for b in theirs_part))
        _join(theirs_part, outgoing)
        mine = Typed(c.tmp(4, sum(mine_sizes)), sum(mine_sizes) // sb.extent, sb.dt, sb.extent)
        _join(mine_part, mine.view)
        theirs = c.tmp(1, len(mine.view))
        n = yield from c.swap(outgoing, theirs, T_RSB)
        same_size(c, "data for it", len(theirs), n)
        combine(op, mine, theirs, c.first)
        yield c.local.Iscatterv([mine.view, (mine_sizes, None), BYTE], [out, BYTE], 0)
    else:
        yield c.local.Iscatterv(None, [out, BYTE], 0)


def _blocks(full, starts, ranks) -> list:
    return [full[starts[r]:starts[r + 1]] for r in ranks]


def _join(blocks, into) -> None:
    pos = 0
    for b in blocks:
        into[pos:pos + len(b)] = b
        pos += len(b)


# -- scan / exscan ----------------------------------------------------------------------------
def scan(c: Coll, sendbuf, recvbuf, op, exclusive: bool):
    name = "Exscan" if exclusive else "Scan"
    op = check_op(op, name)
    rb = as_typed(recvbuf, writable=True, op=name)
    sb = None if sendbuf is IN_PLACE else as_typed(sendbuf, writable=False, op=name)
    if sb is not None and sb.nbytes != rb.nbytes:
        raise BufferError_(f"{name} on rank {c.rank}: send buffer has {sb.nbytes} bytes, "
                           f"receive buffer {rb.nbytes}")
    if not c.contiguous:  # the prefix needs every earlier rank, whichever cluster it is in
        upto = c.rank if exclusive else c.rank + 1
        steps = in_place(c, rb, lambda sb: generic.allreduce(c, sb, rb, op, upto)) \
            if sb is None else generic.allreduce(c, sb, rb, op, upto)
    else:
        steps = _scan(c, sb, rb, op, exclusive)
    return checked(c, steps, -1, rb.nbytes)


def _scan(c: Coll, sb: Typed | None, rb: Typed, op, exclusive: bool):
    """Prefix reduction, first block then second: the first cluster's total crosses once."""
    data = rb if sb is None else sb
    if c.first:
        if exclusive:
            # The first cluster's total goes to the second: an inclusive scan gives it.
            incl = c.tmp(0, rb.nbytes)
            yield c.local.Iscan(data.spec, rb.like(incl), op)
            yield c.local.Iexscan(IN_PLACE if sb is None else sb.spec, rb.spec, op)
            last = incl
        else:
            yield c.local.Iscan(IN_PLACE if sb is None else sb.spec, rb.spec, op)
            last = rb.view
        if c.lrank == c.nmine - 1:
            yield c.cross(last, c.theirs[0], T_SCAN)
        return
    total = c.tmp(1, rb.nbytes)
    if c.leader:
        n = yield from c.take(total, c.obase + c.nother - 1, T_SCAN)
        same_size(c, "data", len(total), n)
    if exclusive:
        part = c.tmp(2, rb.nbytes)
        yield c.local.Iexscan(data.spec, rb.like(part), op)
    else:
        yield c.local.Iscan(IN_PLACE if sb is None else sb.spec, rb.spec, op)
    yield c.local.Ibcast([total, BYTE], 0)
    if exclusive:
        if c.leader:
            rb.view[:] = total
        else:
            op.Reduce_local(rb.like(total), rb.like(part))
            rb.view[:] = part
    else:
        op.Reduce_local(rb.like(total), rb.spec)  # first total op my prefix
