"""All-to-all collectives of buffers: Alltoall, Alltoallv, Alltoallw, Allgather, Allgatherv.

Same-cluster blocks move by the native collective straight between the users' buffers. The
other cluster's blocks are gathered at the leader, cross as one message each way and are
scattered; blocks of `DIRECT_BLOCK` bytes or more instead go straight from each rank to each
rank of the other cluster, one message per pair (each still crosses once).
"""

from __future__ import annotations

import itertools

import numpy as np

from .._engine.buffers import Typed, Vector, as_typed, as_vector, as_view
from .._startup.native import MPI
from ..errors import BufferError_, UsageError
from . import direct
from .common import (
    BYTE,
    CHECK,
    I64,
    IN_PLACE,
    T_ALLGATHER,
    T_ALLGATHERV,
    T_ALLTOALL,
    T_ALLTOALLV,
    T_ALLTOALLV_BLOCK,
    T_ALLTOALLW,
    after_copy,
    checked,
    equal_blocks,
    pack,
    same_size,
    sized_blocks,
)
from .transport import Coll

# docs/performance.md, "Alltoall blocks straight to their ranks".
DIRECT_BLOCK = 32 << 10


def _carried(sizes: list[int]) -> list[int]:
    """`sizes` with those of blocks that go straight to their ranks as 0."""
    return [n if n < DIRECT_BLOCK else 0 for n in sizes]


def _by_receiver(theirs: memoryview, sizes: list[int], nl: int, into: memoryview) -> list[int]:
    """Regroup the other cluster's blocks, [their j][my i], into runs per receiver, [my i][their j].

    `sizes` are the blocks' sizes in `theirs`' order; returns each receiver's run's size.
    """
    starts = [0, *itertools.accumulate(sizes)]
    runs = []
    pos = 0
    for i in range(nl):
        first = pos
        for k in range(i, len(sizes), nl):
            n = sizes[k]
            into[pos:pos + n] = theirs[starts[k]:starts[k] + n]
            pos += n
        runs.append(pos - first)
    return runs


# -- alltoall ---------------------------------------------------------------------------------
def alltoall(c: Coll, sendbuf, recvbuf, blocking: bool = False):
    """`blocking`: an Alltoall, not an Ialltoall (large blocks may go `direct`ly)."""
    rb = as_typed(recvbuf, writable=True, op="Alltoall", blocks=c.size)
    sent = None if sendbuf is IN_PLACE else \
        as_typed(sendbuf, writable=False, op="Alltoall", blocks=c.size).view
    nsend = rb.nbytes if sent is None else len(sent)
    if nsend != rb.nbytes or rb.count % c.size:
        raise BufferError_(
            f"Alltoall on rank {c.rank}: send buffer has {nsend} bytes and receive buffer "
            f"{rb.nbytes}; both must hold one equal block per rank ({c.size} ranks)"
        )

    blk = rb.nbytes // c.size

    def steps(sview):
        if not c.contiguous:  # the clusters' ranks interleave: blocks by rank, as Alltoallv
            per = rb.count // c.size
            return _alltoallv(c, equal_blocks(sview, c.size, per, rb.dt, rb.extent),
                              equal_blocks(rb.view, c.size, per, rb.dt, rb.extent))
        return _alltoall(c, sview, rb.view, blk)

    if blocking and sent is not None and blk >= DIRECT_BLOCK and direct.usable(c, blk):
        return direct.Direct(c, lambda: checked(c, steps(sent), -1, rb.nbytes), sent, rb.view,
                             blk)
    # IN_PLACE: slot 4, as Alltoallv's copy: _alltoallv (interleaved clusters) uses 0-3 while
    # this copy is still being sent from
    return checked(c, after_copy(c, 4, rb.view, steps) if sent is None else steps(sent), -1,
                   rb.nbytes)


def _alltoall(c: Coll, sview, rview, blk: int):
    # Same-cluster blocks: native alltoallv straight between the users' buffers.
    counts = [blk] * c.nmine
    where = [r * blk for r in c.mine]
    local = c.local.Ialltoallv([sview, (counts, where), BYTE], [rview, (counts, where), BYTE])
    out = sview[c.obase * blk:(c.obase + c.nother) * blk]
    inn = rview[c.obase * blk:(c.obase + c.nother) * blk]
    if blk >= DIRECT_BLOCK:
        rs = [c.recv(inn[j * blk:(j + 1) * blk], r, T_ALLTOALL) for j, r in enumerate(c.theirs)]
        ss = [c.send(out[j * blk:(j + 1) * blk], r, T_ALLTOALL) for j, r in enumerate(c.theirs)]
        yield (*rs, *ss)
        for r, op in zip(c.theirs, rs, strict=True):
            same_size(c, f"data per block (the block from rank {r})", blk, op.nbytes)
    elif c.leader:
        mine = c.tmp(0, c.nmine * c.nother * blk)
        yield c.local.Igather([out, BYTE], [mine, BYTE], 0)
        theirs = c.tmp(1, c.nother * c.nmine * blk)
        n = yield from c.swap(mine, theirs, T_ALLTOALL)
        same_size(c, "blocks for it", len(theirs), n)
        # theirs is [their rank j][my rank i] -> scatter needs [my rank i][their rank j]
        tt = c.tmp(3, len(theirs))
        if c.nmine * c.nother <= 16:  # a few slices: cheaper than numpy's calls
            _by_receiver(theirs, [blk] * (c.nmine * c.nother), c.nmine, tt)
        else:
            t = np.frombuffer(theirs, np.uint8).reshape(c.nother, c.nmine, blk).transpose(1, 0, 2)
            np.copyto(np.frombuffer(tt, np.uint8).reshape(c.nmine, c.nother, blk), t)
        yield c.local.Iscatter([tt, BYTE], [inn, BYTE], 0)
    else:
        yield c.local.Igather([out, BYTE], None, 0)
        yield c.local.Iscatter(None, [inn, BYTE], 0)
    yield local


def alltoallv(c: Coll, sendbuf, recvbuf):
    rv = as_vector(recvbuf, c.size, writable=True, op="Alltoallv")
    if sendbuf is IN_PLACE:
        return checked(c, after_copy(c, 4, rv.base, lambda copy: _alltoallv(
            c, Vector(copy, rv.counts, rv.displs, rv.dt, rv.extent), rv)))
    return checked(c, _alltoallv(c, as_vector(sendbuf, c.size, writable=False,
                                              op="Alltoallv"), rv))


def _alltoallv(c: Coll, sv: Vector, rv: Vector):
    se, re_ = sv.extent, rv.extent
    # Same-cluster blocks: native alltoallv on the users' buffers, in bytes.
    sc = [sv.counts[r] * se for r in c.mine]
    sd = [sv.displs[r] * se for r in c.mine]
    rcn = [rv.counts[r] * re_ for r in c.mine]
    rd = [rv.displs[r] * re_ for r in c.mine]
    if CHECK and c.nmine > 1:
        yield from _same_counts(c, sc, rcn)
    local = c.local.Ialltoallv([sv.base, (sc, sd), BYTE], [rv.base, (rcn, rd), BYTE])
    # Large cross-cluster blocks straight to their ranks. Sender and receiver each decide by
    # their own count of the block (which MPI says agree; if they do not, the sizes below
    # tell). Posted first, so they move while the leaders exchange the rest.
    far = c.theirs
    out_n = [sv.nbytes(j) for j in far]
    rs = [c.recv(rv.block(j), j, T_ALLTOALLV_BLOCK) for j in far if rv.nbytes(j) >= DIRECT_BLOCK]
    ss = [c.send(sv.block(j), j, T_ALLTOALLV_BLOCK)
          for j, n in zip(far, out_n, strict=True) if n >= DIRECT_BLOCK]
    # The smaller ones, with the size of every block: packed, gathered at the leader, one
    # exchange each way, scattered.
    mycounts = np.array(out_n, np.int64)
    packed = pack(c, 0, [sv.block(j) for j, n in zip(far, out_n, strict=True)
                         if n < DIRECT_BLOCK])
    if c.leader:
        allcounts = np.empty((c.nmine, c.nother), np.int64)
        yield c.local.Igather([mycounts, I64], [allcounts, I64], 0)
        totals = [sum(_carried(row)) for row in allcounts.tolist()]
        # One message each way: this cluster's count matrix, then the blocks it carries.
        head = allcounts.nbytes
        mine = c.tmp(1, head + sum(totals))
        mine[:head] = allcounts.tobytes()
        yield c.local.Igatherv([packed, BYTE], [mine[head:], (totals, None), BYTE], 0)
        s = c.cross(mine, c.peer, T_ALLTOALLV)
        msg, r = yield from c.take_sized(c.peer, T_ALLTOALLV)
        yield s
        # [their j][my i], row after row
        flat, theirk, theirs = sized_blocks(c, msg, c.nother * c.nmine, _carried)
        runs = c.tmp(2, len(theirs))
        sizes = _by_receiver(theirs, theirk, c.nmine, runs)
        colc = np.array([flat[i::c.nmine] for i in range(c.nmine)], np.int64)  # [my i][their j]
        del theirs, msg
        c.release(r)
        cnt_for_me = np.empty(c.nother, np.int64)
        yield c.local.Iscatter([colc, I64], [cnt_for_me, I64], 0)
        counts = cnt_for_me.tolist()
        mine_in = c.tmp(3, sizes[0])
        yield c.local.Iscatterv([runs, (sizes, None), BYTE], [mine_in, BYTE], 0)
    else:
        yield c.local.Igather([mycounts, I64], None, 0)
        yield c.local.Igatherv([packed, BYTE], None, 0)
        cnt_for_me = np.empty(c.nother, np.int64)
        yield c.local.Iscatter(None, [cnt_for_me, I64], 0)
        counts = cnt_for_me.tolist()
        mine_in = c.tmp(3, sum(_carried(counts)))
        yield c.local.Iscatterv(None, [mine_in, BYTE], 0)
    # Every block's size is known now: check them all before waiting for the large ones (a
    # block one side sends straight and the other expects through the leaders never comes).
    pos = 0
    for j, got in zip(far, counts, strict=True):
        want = rv.nbytes(j)
        if want != got:
            raise UsageError(
                f"Alltoallv: mismatched counts: rank {c.rank} expects {want} bytes from rank "
                f"{j}, which sends {got}"
            )
        if got < DIRECT_BLOCK:
            rv.block(j)[:] = mine_in[pos:pos + got]
            pos += got
    if rs or ss:
        yield (*rs, *ss)
    yield local


def _same_counts(c: Coll, sends: list[int], recvs: list[int]):
    """Every pair of this cluster agrees on the size of its block (else all ranks fail).

    A native alltoallv given sizes that disagree mixes or cuts the data; MPI leaves it
    undefined, the bridge says who disagrees.
    """
    mine = np.array(sends + recvs, np.int64)
    every = np.empty(2 * c.nmine * c.nmine, np.int64)
    yield c.local.Iallgather([mine, I64], [every, I64])
    table = every.reshape(c.nmine, 2, c.nmine)
    for i in range(c.nmine):
        for j in range(c.nmine):
            sent, expected = int(table[i, 0, j]), int(table[j, 1, i])
            if sent != expected:
                raise UsageError(
                    f"{c.name}: mismatched counts: rank {c.mine[i]} sends {sent} bytes to rank "
                    f"{c.mine[j]}, which expects {expected}"
                )


# -- allgather --------------------------------------------------------------------------------
def allgather(c: Coll, sendbuf, recvbuf):
    rb = as_typed(recvbuf, writable=True, op="Allgather", blocks=c.size)
    if rb.count % c.size:
        raise BufferError_(f"Allgather on rank {c.rank}: receive buffer of {rb.nbytes} bytes "
                           f"is not {c.size} equal blocks")
    blk = rb.nbytes // c.size
    if sendbuf is IN_PLACE:
        sspec = IN_PLACE
    else:
        sb = as_typed(sendbuf, writable=False, op="Allgather")
        if sb.nbytes != blk:
            raise BufferError_(f"Allgather on rank {c.rank}: its own block has {sb.nbytes} "
                               f"bytes but the receive buffer holds blocks of {blk}")
        sspec = [sb.view, BYTE]
    if not c.contiguous:  # the clusters' ranks interleave: blocks by rank, as Allgatherv
        # (IN_PLACE stays: the local Allgatherv finds this rank's block at its displacement;
        # a slice of the receive buffer as the send buffer would alias it, which MPI refuses)
        return checked(c, _allgatherv(c, sspec, equal_blocks(rb.view, c.size,
                                                             rb.count // c.size, rb.dt,
                                                             rb.extent)), -1, blk)
    return checked(c, _allgather(c, sspec, rb.view, blk), -1, blk)


def _allgather(c: Coll, sspec, rview, blk: int):
    mine = rview[c.base * blk:(c.base + c.nmine) * blk]
    theirs = rview[c.obase * blk:(c.obase + c.nother) * blk]
    if sspec is IN_PLACE:
        yield c.local.Iallgather(IN_PLACE, [mine, BYTE])
    else:
        yield c.local.Iallgather(sspec, [mine, BYTE])
    if c.leader:
        n = yield from c.swap(mine, theirs, T_ALLGATHER)
        same_size(c, "blocks", len(theirs), n)
    yield c.local.Ibcast([theirs, BYTE], 0)


def allgatherv(c: Coll, sendbuf, recvbuf):
    rv = as_vector(recvbuf, c.size, writable=True, op="Allgatherv")
    sspec = IN_PLACE if sendbuf is IN_PLACE else \
        [as_typed(sendbuf, writable=False, op="Allgatherv").view, BYTE]
    return checked(c, _allgatherv(c, sspec, rv))


def _allgatherv(c: Coll, sspec, rv: Vector):
    ext = rv.extent
    cnt = [rv.counts[r] * ext for r in c.mine]
    dsp = [rv.displs[r] * ext for r in c.mine]
    yield c.local.Iallgatherv(sspec, [rv.base, (cnt, dsp), BYTE])
    total = sum(rv.nbytes(r) for r in c.theirs)
    theirs = c.tmp(0, total)
    if c.leader:
        mine = pack(c, 1, [rv.block(r) for r in c.mine])
        n = yield from c.swap(mine, theirs, T_ALLGATHERV)
        same_size(c, "blocks", total, n)
    yield c.local.Ibcast([theirs, BYTE], 0)
    pos = 0
    for r in c.theirs:
        k = rv.nbytes(r)
        rv.block(r)[:] = theirs[pos:pos + k]
        pos += k


def alltoallw(c: Coll, sendbuf, recvbuf):
    """Alltoallw: block j of each rank, in a datatype of its own, to rank j.

    Every pair of ranks exchanges exactly one message (an empty one too), straight between
    them (natively within a cluster, through the forwarder across), so a block of the wrong
    size is an error on its receiver, never a wait for a message that does not come.
    """
    recvs = w_blocks(recvbuf, c.size, True, c.name, c.rank)
    sends = [bytes(r.view) for r in recvs] if sendbuf is IN_PLACE else \
        [t.view for t in w_blocks(sendbuf, c.size, False, c.name, c.rank)]
    return checked(c, _alltoallw(c, sends, recvs))


def w_blocks(spec, n: int, writable: bool, name: str, rank: int) -> list[Typed]:
    """The n blocks of an Alltoallw buffer [buf, counts, displs (bytes), datatypes]."""
    parts = list(spec) if isinstance(spec, (list, tuple)) else []
    if len(parts) == 3 and isinstance(parts[1], tuple):
        parts = [parts[0], *parts[1], parts[2]]
    if len(parts) != 4 or any(len(p) != n for p in parts[1:]):
        raise UsageError(f"{name} on rank {rank}: expected [buffer, counts, displacements, "
                         f"datatypes] with one of each per rank ({n})")
    if parts[0] is None or parts[0] is MPI.BOTTOM:
        return [_absolute(k, d, dt, writable, name)
                for k, d, dt in zip(parts[1], parts[2], parts[3], strict=True)]
    whole = as_view(parts[0], writable=writable, op=name)
    return [as_typed([whole[d:], k, dt], writable=writable, op=name)
            for k, d, dt in zip(parts[1], parts[2], parts[3], strict=True)]


def _absolute(count: int, displ: int, dt, writable: bool, name: str) -> Typed:
    """A block at MPI.BOTTOM: `count` of `dt`, whose displacements are addresses, plus `displ`.

    Its bytes are the memory from its lowest address on, described by the same datatype
    moved to start there (the packing and unpacking of `as_typed` then apply).
    """
    if count == 0:
        return as_typed(None, writable=writable, op=name)
    tlb, textent = dt.Get_true_extent()
    extent = dt.Get_extent()[1]
    memory = MPI.buffer.fromaddress(displ + tlb, textent + (count - 1) * extent,
                                    readonly=not writable)
    moved = MPI.Datatype.Create_struct([count], [-tlb], [dt]).Commit()
    try:
        return as_typed([memoryview(memory).cast("B"), 1, moved], writable=writable, op=name)
    finally:
        moved.Free()  # a receive unpacks through a duplicate of its own


def _alltoallw(c: Coll, sends: list, recvs: list[Typed]):
    ops = [c.recv(r.view, j, T_ALLTOALLW) for j, r in enumerate(recvs)]
    ops += [c.send(view, j, T_ALLTOALLW) for j, view in enumerate(sends)]
    yield tuple(ops)
    for j, (op, r) in enumerate(zip(ops, recvs, strict=False)):
        if op.nbytes != len(r.view):
            raise BufferError_(f"{c.name} on rank {c.rank}: rank {j} sent {op.nbytes} bytes "
                               f"for a receive block of {len(r.view)}")
