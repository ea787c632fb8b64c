"""Rooted collectives of buffers: Bcast, Gather(v), Scatter(v).

Each runs the native collective inside each cluster; what must cross goes between the root and
the other cluster's leader, once. A large Bcast crosses in shares (see `shares`). Each public
function checks its arguments at once and returns the call's steps (a generator, see
`transport` Rule 3).
"""

from __future__ import annotations

import numpy as np

from .._engine.buffers import Typed, as_typed, as_vector
from ..errors import BufferError_, UsageError
from . import carried, compiled
from .common import (
    BYTE,
    I64,
    IN_PLACE,
    T_BCAST,
    T_GATHER,
    T_GATHERV,
    T_SCATTER,
    T_SCATTERV,
    checked,
    displs,
    equal_blocks,
    pack,
    same_size,
    sized_blocks,
)
from .transport import Coll

# From this size up, Allreduce and Bcast cross in k shares, k the smaller cluster's size: k
# pairs of ranks (local rank i of each cluster) swap or pass on share i at once, and an
# allgather in each cluster puts the shares together (docs/performance.md, "Large Allreduce
# and Bcast in shares").
SPLIT = 512 << 10


def ways(c: Coll, nbytes: int) -> int:
    """Into how many shares a collective of `nbytes` crosses (see SPLIT); 0: it does not."""
    k = min(c.nmine, c.nother)
    return k if k > 1 and nbytes >= SPLIT else 0


def shares(n: int, k: int, nloc: int) -> tuple[list[int], list[int]]:
    """Counts and displacements of n items in k near-equal shares, over nloc local ranks."""
    counts = [n // k + (i < n % k) if i < k else 0 for i in range(nloc)]
    return counts, displs(counts)


# -- bcast ------------------------------------------------------------------------------------
def bcast(c: Coll, buf, root, blocking: bool = False) -> object:
    """`blocking`: a Bcast, not an Ibcast (a small one may run compiled: compiled.py)."""
    root = c.root(root)
    b = as_typed(buf, writable=c.rank != root, op="Bcast")
    if carried.fits(c, b.nbytes):
        if blocking and compiled.built(c):
            return compiled.Call(c, lambda: carried.bcast(c, b, root), compiled.BCAST, b.view,
                                 root)
        return carried.bcast(c, b, root)
    return checked(c, _bcast(c, b, root), root, b.nbytes)


def _bcast(c: Coll, b: Typed, root: int):
    k = ways(c, b.nbytes)  # the far side takes it in k shares
    if c.here(root):
        xs = []
        if c.rank == root and k:
            counts, where = shares(b.nbytes, k, k)
            xs = [c.send(b.view[d:d + n], c.theirs[i], T_BCAST)
                  for i, (n, d) in enumerate(zip(counts, where, strict=True))]
        elif c.rank == root:
            xs = [c.cross(b.view, c.peer, T_BCAST)]
        yield c.local.Ibcast(b.spec, c.local_of(root))
        if xs:
            yield tuple(xs)
    elif k:
        counts, where = shares(b.nbytes, k, c.nmine)
        n, d = counts[c.lrank], where[c.lrank]
        if n:
            op = c.recv(b.view[d:d + n], root, T_BCAST)
            yield op
            same_size(c, f"data in share {c.lrank} of {k}", n, op.nbytes)
        yield c.local.Iallgatherv(IN_PLACE, [b.view, counts, where, BYTE])
    else:
        if c.leader:
            n = yield from c.take(b.view, root, T_BCAST)
            same_size(c, "data", b.nbytes, n)
        yield c.local.Ibcast(b.spec, 0)


# -- gather -----------------------------------------------------------------------------------
def _check_block(name: str, c: Coll, have: int, blk: int) -> None:
    if have != blk:
        raise BufferError_(f"{name} on root {c.rank}: its own block has {have} bytes but the "
                           f"receive buffer holds blocks of {blk}")


def gather(c: Coll, sendbuf, recvbuf, root):
    root = c.root(root)
    if c.rank != root:
        sb = as_typed(sendbuf, writable=False, op="Gather")
        steps = _gather_other(c, sb, root) if c.contiguous else _gatherv_other(c, sb, root)
        return checked(c, steps, root, sb.nbytes)
    rb = as_typed(recvbuf, writable=True, op="Gather", blocks=c.size)
    if rb.count % c.size:
        raise BufferError_(f"Gather on root {root}: receive buffer of {rb.nbytes} bytes is "
                           f"not {c.size} equal blocks")
    blk = rb.nbytes // c.size
    if sendbuf is IN_PLACE:
        sspec = IN_PLACE
    else:
        sb = as_typed(sendbuf, writable=False, op="Gather")
        _check_block("Gather", c, sb.nbytes, blk)
        sspec = sb.spec
    if not c.contiguous:  # the clusters' ranks interleave: blocks by rank, as Gatherv
        steps = _gatherv_root(c, sspec, equal_blocks(rb.view, c.size, rb.count // c.size,
                                                     rb.dt, rb.extent))
    else:
        steps = _gather_root(c, sspec, rb, blk)
    return checked(c, steps, root, blk)


def _gather_root(c: Coll, sspec, rb: Typed, blk: int):
    theirs = rb.view[c.obase * blk:(c.obase + c.nother) * blk]
    r = None if c.small(len(theirs)) else c.recv(theirs, c.peer, T_GATHER)
    mine = rb.view[c.base * blk:(c.base + c.nmine) * blk]
    yield c.local.Igather(sspec, [mine, BYTE], c.lrank)
    if r is None:
        n = yield from c.take(theirs, c.peer, T_GATHER)
    else:
        yield r
        n = r.nbytes
    same_size(c, "blocks", c.nother * blk, n)


def _gather_other(c: Coll, sb: Typed, root: int):
    if c.here(root):
        yield c.local.Igather(sb.spec, None, c.local_of(root))
    elif c.leader:
        part = c.tmp(0, sb.nbytes * c.nmine)
        yield c.local.Igather(sb.spec, [part, BYTE], 0)
        yield c.cross(part, root, T_GATHER)
    else:
        yield c.local.Igather(sb.spec, None, 0)


def gatherv(c: Coll, sendbuf, recvbuf, root):
    root = c.root(root)
    if c.rank != root:
        return checked(c, _gatherv_other(c, as_typed(sendbuf, writable=False, op="Gatherv"),
                                         root), root)
    rv = as_vector(recvbuf, c.size, writable=True, op="Gatherv")
    sspec = IN_PLACE if sendbuf is IN_PLACE else \
        as_typed(sendbuf, writable=False, op="Gatherv").spec
    return checked(c, _gatherv_root(c, sspec, rv), root)


def _gatherv_root(c: Coll, sspec, rv):
    ext = rv.extent
    cnt = [rv.counts[r] * ext for r in c.mine]
    dsp = [rv.displs[r] * ext for r in c.mine]
    if sspec is IN_PLACE:
        yield c.local.Igatherv(IN_PLACE, [rv.base, (cnt, dsp), BYTE], c.lrank)
    else:
        yield c.local.Igatherv([sspec[0], BYTE], [rv.base, (cnt, dsp), BYTE], c.lrank)
    msg, r = yield from c.take_sized(c.peer, T_GATHERV)
    sizes, _, data = sized_blocks(c, msg, c.nother)
    pos = 0
    for j, rank in enumerate(c.theirs):
        want, got = rv.nbytes(rank), sizes[j]
        if got > want:
            raise UsageError(f"Gatherv: rank {rank} sent {got} bytes, root {c.rank} "
                             f"expects {want}")
        rv.block(rank)[:got] = data[pos:pos + got]
        pos += got
    del sizes, data, msg
    c.release(r)


def _gatherv_other(c: Coll, sb: Typed, root: int):
    if c.here(root):
        yield c.local.Igatherv([sb.view, BYTE], None, c.local_of(root))
    elif c.leader:
        sizes = np.empty(c.nmine, np.int64)
        yield c.local.Igather([np.array([sb.nbytes], np.int64), I64], [sizes, I64], 0)
        # One message: the block sizes, then the blocks.
        msg = c.tmp(0, sizes.nbytes + int(sizes.sum()))
        msg[:sizes.nbytes] = sizes.tobytes()
        yield c.local.Igatherv([sb.view, BYTE],
                               [msg[sizes.nbytes:], (list(map(int, sizes)), None), BYTE], 0)
        yield c.cross(msg, root, T_GATHERV)
    else:
        yield c.local.Igather([np.array([sb.nbytes], np.int64), I64], None, 0)
        yield c.local.Igatherv([sb.view, BYTE], None, 0)


# -- scatter ----------------------------------------------------------------------------------
def scatter(c: Coll, sendbuf, recvbuf, root):
    root = c.root(root)
    if c.rank != root:
        rb = as_typed(recvbuf, writable=True, op="Scatter")
        steps = _scatter_other(c, rb, root) if c.contiguous else _scatterv_other(c, rb, root)
        return checked(c, steps, root, rb.nbytes)
    sb = as_typed(sendbuf, writable=False, op="Scatter", blocks=c.size)
    if sb.count % c.size:
        raise BufferError_(f"Scatter on root {root}: send buffer of {sb.nbytes} bytes is "
                           f"not {c.size} equal blocks")
    blk = sb.nbytes // c.size
    if recvbuf is IN_PLACE:
        rspec = IN_PLACE
    else:
        rb = as_typed(recvbuf, writable=True, op="Scatter")
        _check_block("Scatter", c, rb.nbytes, blk)
        rspec = [rb.view, BYTE]
    if not c.contiguous:  # the clusters' ranks interleave: blocks by rank, as Scatterv
        steps = _scatterv_root(c, equal_blocks(sb.view, c.size, sb.count // c.size, sb.dt,
                                               sb.extent), rspec)
    else:
        steps = _scatter_root(c, sb, rspec, blk)
    return checked(c, steps, root, blk)


def _scatter_root(c: Coll, sb: Typed, rspec, blk: int):
    s = c.cross(sb.view[c.obase * blk:(c.obase + c.nother) * blk], c.peer, T_SCATTER)
    yield c.local.Iscatter([sb.view[c.base * blk:(c.base + c.nmine) * blk], BYTE], rspec,
                           c.lrank)
    yield s


def _scatter_other(c: Coll, rb: Typed, root: int):
    if c.here(root):
        yield c.local.Iscatter(None, [rb.view, BYTE], c.local_of(root))
    elif c.leader:
        want = rb.nbytes * c.nmine
        part = c.tmp(0, want + (not c.small(want)))  # a spare byte: a larger part is caught
        n = yield from c.take(part, root, T_SCATTER)
        same_size(c, "blocks", want, n)
        yield c.local.Iscatter([part[:want], BYTE], [rb.view, BYTE], 0)
    else:
        yield c.local.Iscatter(None, [rb.view, BYTE], 0)


def scatterv(c: Coll, sendbuf, recvbuf, root):
    root = c.root(root)
    if c.rank != root:
        return checked(c, _scatterv_other(c, as_typed(recvbuf, writable=True, op="Scatterv"),
                                          root), root)
    sv = as_vector(sendbuf, c.size, writable=False, op="Scatterv")
    rspec = IN_PLACE if recvbuf is IN_PLACE else \
        [as_typed(recvbuf, writable=True, op="Scatterv").view, BYTE]
    return checked(c, _scatterv_root(c, sv, rspec), root)


def _scatterv_root(c: Coll, sv, rspec):
    ext = sv.extent
    sizes = np.array([sv.nbytes(r) for r in c.theirs], np.int64)
    # One message: the block sizes, then the blocks.
    msg = pack(c, 0, [memoryview(sizes).cast("B")] + [sv.block(r) for r in c.theirs])
    s = c.cross(msg, c.peer, T_SCATTERV)
    cnt = [sv.counts[r] * ext for r in c.mine]
    dsp = [sv.displs[r] * ext for r in c.mine]
    yield c.local.Iscatterv([sv.base, (cnt, dsp), BYTE], rspec, c.lrank)
    yield s


def _scatterv_other(c: Coll, rb: Typed, root: int):
    if c.here(root):
        yield c.local.Iscatterv(None, [rb.view, BYTE], c.local_of(root))
    elif c.leader:
        msg, r = yield from c.take_sized(root, T_SCATTERV)
        sizes, _, data = sized_blocks(c, msg, c.nmine)
        yield c.local.Iscatterv([data, (sizes, None), BYTE], [rb.view, BYTE], 0)
        del sizes, data, msg
        c.release(r)
    else:
        yield c.local.Iscatterv(None, [rb.view, BYTE], 0)
