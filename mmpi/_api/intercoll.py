"""The buffer collectives of a bridged intercommunicator, as steps (see `_collectives.run`).

Each public function checks its arguments at once and returns the call's steps, so that one
code gives the blocking call (run to the end), the non-blocking one (a request whose steps
advance whenever the rank polls) and the persistent one (the non-blocking call made again at
every `Start`).

Rule 1: a call is non-blocking collectives on the local group's private communicator plus
        messages between the two groups' leaders (local rank 0) on the intercommunicator's
        collective context (`intercore` Rule 2); a rooted call's data goes between the root and
        the other group's leader.
Rule 2: what a leader hands to its group travels with its size: the leader scatters (or
        broadcasts) the sizes first, every rank receives what it was told, and only then
        compares it with its own buffer. Mismatched arguments so raise a UsageError on every
        rank that has a wrong size, and no rank waits in a native collective the others left.
"""

from __future__ import annotations

import numpy as np

from .._collectives.alltoall import w_blocks
from .._collectives.common import displs
from .._engine import buffers as _buffers
from .._startup.native import MPI
from ..errors import BufferError_, RootError, UsageError

BYTE, I64 = MPI.BYTE, MPI.INT64_T
ROOT, PROC_NULL = MPI.ROOT, MPI.PROC_NULL
# the leaders' messages on the intercommunicator's collective context, by kind of call
T_BARRIER, T_ROOTED, T_SWAP, T_PAIR = 1, 2, 3, 4


class Sides:
    """What one call's steps use: the intercommunicator's core, the local group's comm.

    `local` is the bridged communicator of the local group, whose non-blocking collectives
    the steps wait for; `name` the call's, for errors.
    """

    __slots__ = ("core", "local", "name", "rank", "nlocal", "nremote")

    def __init__(self, core, local, name: str) -> None:
        self.core, self.local, self.name = core, local, name
        self.rank = core.rank
        self.nlocal = len(core.local_members)
        self.nremote = core.size

    @property
    def leader(self) -> bool:
        return self.rank == 0

    # -- the leaders' messages (Rule 1) -------------------------------------------------
    def send(self, data, dest: int, tag: int = T_ROOTED):
        p2p = self.core.engine.p2p
        return p2p.isend(self.core.coll, memoryview(data).cast("B"), dest, tag)

    def recv(self, source: int, tag: int = T_ROOTED):
        return self.core.engine.p2p.irecv(self.core.coll, None, source, tag, self.name)

    def swap(self, data, tag: int = T_SWAP):
        """Steps: send `data` to the other leader and return what it sent (leaders only)."""
        out, back = self.send(data, 0, tag), self.recv(0, tag)
        yield (out, back)
        return taken(back)

    # -- the local group's steps (Rule 2) -----------------------------------------------
    def collect(self, mine):
        """Steps: every rank's bytes at the leader: (sizes, concatenation); else (None, None)."""
        local, n = self.local, self.nlocal
        sizes = np.zeros(n, np.int64) if self.leader else None
        size = np.array([len(mine)], np.int64)
        yield local.Igather([size, I64], [sizes, I64] if self.leader else None, 0)._op
        data = None
        if self.leader:
            sizes = sizes.tolist()
            data = bytearray(sum(sizes))
        yield local.Igatherv([mine, BYTE], [data, (sizes, displs(sizes)), BYTE]
                             if self.leader else None, 0)._op
        return sizes, data

    def spread(self, data):
        """Steps: the leader's bytes `data` (None elsewhere) on every rank."""
        size = np.array([len(data) if self.leader else 0], np.int64)
        yield self.local.Ibcast([size, I64], 0)._op
        out = bytearray(data) if self.leader else bytearray(int(size[0]))
        yield self.local.Ibcast([out, BYTE], 0)._op
        return out

    def hand_out(self, blocks):
        """Steps: block i of the leader's `blocks` (None elsewhere) to local rank i."""
        sizes = np.array([len(b) for b in blocks], np.int64) if self.leader else None
        size = np.zeros(1, np.int64)
        yield self.local.Iscatter([sizes, I64] if self.leader else None, [size, I64], 0)._op
        out = bytearray(int(size[0]))
        whole = None
        if self.leader:
            counts = sizes.tolist()
            whole = [b"".join(blocks), (counts, displs(counts)), BYTE]
        yield self.local.Iscatterv(whole, [out, BYTE], 0)._op
        return out

    def error(self, what: str) -> UsageError:
        return UsageError(f"{self.name} on rank {self.rank}: mismatched arguments: {what}")


def taken(op) -> bytes:
    """The bytes a leader's receive brought (its spare buffer given back)."""
    data = bytes(op.obj) if op.obj is not None else b""
    op.release()
    return data


def _framed(sizes: list[int], data) -> bytes:
    """One message of block sizes and the blocks: k, k sizes, the bytes (int64 each)."""
    return np.array([len(sizes), *sizes], np.int64).tobytes() + bytes(data)


def _unframed(s: Sides, msg: bytes) -> tuple[list[int], memoryview]:
    k = int(np.frombuffer(msg[:8], np.int64)[0]) if len(msg) >= 8 else -1
    head = 8 * (k + 1)
    sizes = np.frombuffer(msg[8:head], np.int64).tolist() if k >= 0 else []
    if k < 0 or len(msg) < head or sum(sizes) != len(msg) - head:
        raise s.error(f"{len(msg)} bytes arrived that do not hold block sizes and blocks")
    return sizes, memoryview(msg)[head:]


def _blocks(sizes: list[int], data) -> list[memoryview]:
    view = memoryview(data)
    return [view[d:d + n] for d, n in zip(displs(sizes), sizes, strict=True)]


def fill(s: Sides, spec, data) -> None:
    """Put `data` into the receive buffer `spec` (unpacked if derived): exactly its size."""
    t = _buffers.as_typed(spec, writable=True, op=s.name)
    todo = _buffers.take_unpacks()
    if len(data) != t.nbytes:
        raise s.error(f"{len(data)} bytes arrived for a receive buffer of {t.nbytes}")
    t.view[:] = data
    for unpack in todo:
        unpack()


def fill_vector(s: Sides, v, sizes: list[int], data) -> None:
    """Put the blocks of `sizes` in `data` into the vector buffer `v`, one per remote rank."""
    if len(sizes) != s.nremote:
        raise s.error(f"{len(sizes)} blocks arrived for a remote group of {s.nremote}")
    for i, block in enumerate(_blocks(sizes, data)):
        if len(block) != v.nbytes(i):
            raise s.error(f"rank {i} of the remote group sent {len(block)} bytes for a "
                          f"receive block of {v.nbytes(i)}")
        v.block(i)[:] = block


def _root(s: Sides, root) -> int:
    root = int(root)
    if root in (ROOT, PROC_NULL) or 0 <= root < s.nremote:
        return root
    raise RootError(f"{s.name} on rank {s.rank}: root {root} is neither MPI.ROOT, "
                    f"MPI.PROC_NULL nor a rank of the remote group of size {s.nremote}")


def _view(s: Sides, spec) -> memoryview:
    return _buffers.as_view(spec, writable=False, op=s.name)


def _recv_typed(s: Sides, spec):
    """The receive buffer `spec` parsed now (its errors at the call), unpacks held back."""
    t = _buffers.as_typed(spec, writable=True, op=s.name)
    _buffers.take_unpacks()
    return t


# -- the calls --------------------------------------------------------------------------------
def barrier(s: Sides):
    yield s.local.Ibarrier()._op
    if s.leader:
        yield from s.swap(b"", T_BARRIER)
    yield s.local.Ibarrier()._op


def bcast(s: Sides, buf, root):
    root = _root(s, root)
    if root == ROOT:
        return _sent(s, _view(s, buf), 0)
    if root == PROC_NULL:
        return _nothing()
    _recv_typed(s, buf)
    return _bcast_in(s, buf, root)


def _bcast_in(s: Sides, buf, root: int):
    fill(s, buf, (yield from s.spread((yield from _from(s, root)))))


def _from(s: Sides, root: int, every: bool = False):
    """Steps: what `root` of the other group sent, at the leader (None elsewhere).

    `every`: on this rank whatever its rank (the root's own receive from the other leader).
    """
    if not (every or s.leader):
        return None
    r = s.recv(root)
    yield r
    return taken(r)


def _sent(s: Sides, data, dest: int):
    yield s.send(data, dest)


def _nothing():
    return
    yield  # a generator that does nothing


def gather(s: Sides, sendbuf, recvbuf, root, vector: bool):
    """Gather (`vector` False: equal blocks) or Gatherv to `root`."""
    root = _root(s, root)
    if root == ROOT:
        v = _buffers.as_vector(recvbuf, s.nremote, writable=True, op=s.name) if vector \
            else _recv_typed(s, recvbuf)
        return _gather_root(s, recvbuf, v, vector)
    if root == PROC_NULL:
        return _nothing()
    return _gather_up(s, _view(s, sendbuf), root)


def _gather_root(s: Sides, recvbuf, v, vector: bool):
    sizes, data = _unframed(s, (yield from _from(s, 0, every=True)))
    if vector:
        fill_vector(s, v, sizes, data)
    else:
        fill(s, recvbuf, data)


def _gather_up(s: Sides, mine, root: int):
    sizes, data = yield from s.collect(mine)
    if s.leader:
        yield s.send(_framed(sizes, data), root)


def scatter(s: Sides, sendbuf, recvbuf, root, vector: bool):
    """Scatter (`vector` False: equal blocks) or Scatterv from `root`."""
    root = _root(s, root)
    if root == ROOT:
        if vector:
            v = _buffers.as_vector(sendbuf, s.nremote, writable=False, op=s.name)
            sizes = [v.nbytes(i) for i in range(s.nremote)]
            msg = _framed(sizes, b"".join(v.block(i) for i in range(s.nremote)))
        else:
            whole = _view(s, sendbuf)
            if len(whole) % max(s.nremote, 1):
                raise UsageError(f"{s.name} on rank {s.rank}: {len(whole)} bytes are not "
                                 f"{s.nremote} equal blocks")
            n = len(whole) // max(s.nremote, 1)
            msg = _framed([n] * s.nremote, whole)
        return _sent(s, msg, 0)
    if root == PROC_NULL:
        return _nothing()
    _recv_typed(s, recvbuf)
    return _scatter_down(s, recvbuf, root)


def _scatter_down(s: Sides, recvbuf, root: int):
    blocks, msg = None, (yield from _from(s, root))
    if s.leader:
        sizes, data = _unframed(s, msg)
        blocks = _blocks(sizes, data) if len(sizes) == s.nlocal else [b""] * s.nlocal
    fill(s, recvbuf, (yield from s.hand_out(blocks)))


def allgather(s: Sides, sendbuf, recvbuf, vector: bool):
    """Allgather or Allgatherv: every rank gets the remote group's blocks, in rank order."""
    mine = _view(s, sendbuf)
    v = _buffers.as_vector(recvbuf, s.nremote, writable=True, op=s.name) if vector \
        else _recv_typed(s, recvbuf)
    return _allgather(s, mine, recvbuf, v, vector)


def _allgather(s: Sides, mine, recvbuf, v, vector: bool):
    sizes, data = yield from s.collect(mine)
    theirs = (yield from s.swap(_framed(sizes, data))) if s.leader else None
    sizes, data = _unframed(s, (yield from s.spread(theirs)))
    if vector:
        fill_vector(s, v, sizes, data)
    else:
        fill(s, recvbuf, data)


def _reduced(s: Sides, sendbuf, op):
    """Steps: `op` over this group's send buffers, at the leader, as bytes (None elsewhere)."""
    t = _buffers.as_typed(sendbuf, writable=False, op=s.name)
    out = bytearray(t.nbytes) if s.leader else None
    yield s.local.Ireduce([t.view, t.count, t.dt],
                          [out, t.count, t.dt] if out is not None else None, op, 0)._op
    return out


def allreduce(s: Sides, sendbuf, recvbuf, op):
    _recv_typed(s, recvbuf)
    return _allreduce(s, sendbuf, recvbuf, op)


def _allreduce(s: Sides, sendbuf, recvbuf, op):
    part = yield from _reduced(s, sendbuf, op)
    theirs = (yield from s.swap(part)) if s.leader else None
    fill(s, recvbuf, (yield from s.spread(theirs)))


def reduce(s: Sides, sendbuf, recvbuf, op, root):
    root = _root(s, root)
    if root == ROOT:
        _recv_typed(s, recvbuf)
        return _reduce_root(s, recvbuf)
    if root == PROC_NULL:
        return _nothing()
    return _reduce_up(s, sendbuf, op, root)


def _reduce_root(s: Sides, recvbuf):
    fill(s, recvbuf, (yield from _from(s, 0, every=True)))


def _reduce_up(s: Sides, sendbuf, op, root: int):
    part = yield from _reduced(s, sendbuf, op)
    if s.leader:
        yield s.send(part, root)


def reduce_scatter(s: Sides, sendbuf, recvbuf, op):
    """Reduce_scatter(_block): `op` over the remote group's vectors, split over this group.

    Each rank's block is its receive buffer's size.
    """
    t = _recv_typed(s, recvbuf)
    return _reduce_scatter(s, sendbuf, recvbuf, t.nbytes, op)


def _reduce_scatter(s: Sides, sendbuf, recvbuf, nbytes: int, op):
    part = yield from _reduced(s, sendbuf, op)
    _, wanted = yield from s.collect(np.array([nbytes], np.int64).tobytes())
    blocks = None
    if s.leader:
        theirs = yield from s.swap(part)
        want = np.frombuffer(wanted, np.int64).tolist()
        # a vector of the wrong length gives every rank nothing: each says so (Rule 2)
        blocks = _blocks(want, theirs) if sum(want) == len(theirs) else [b""] * s.nlocal
    fill(s, recvbuf, (yield from s.hand_out(blocks)))


def alltoall(s: Sides, sendbuf, recvbuf, vector: bool):
    """Alltoall(v): block j of local rank i goes to remote rank j, as its block i."""
    if vector:
        sv = _buffers.as_vector(sendbuf, s.nremote, writable=False, op=s.name)
        rv = _buffers.as_vector(recvbuf, s.nremote, writable=True, op=s.name)
        out = [sv.nbytes(j) for j in range(s.nremote)]
        mine = np.array(out, np.int64).tobytes() + b"".join(
            sv.block(j) for j in range(s.nremote))
        return _alltoall(s, mine, recvbuf, rv)
    whole = _view(s, sendbuf)
    if len(whole) % max(s.nremote, 1):
        raise UsageError(f"{s.name} on rank {s.rank}: {len(whole)} bytes are not "
                         f"{s.nremote} equal blocks")
    n = len(whole) // max(s.nremote, 1)
    _recv_typed(s, recvbuf)
    return _alltoall(s, np.full(s.nremote, n, np.int64).tobytes() + bytes(whole), recvbuf,
                     None)


def _alltoall(s: Sides, mine: bytes, recvbuf, rv):
    # each rank's message: its nremote block sizes, then its blocks
    sizes, data = yield from s.collect(mine)
    blocks = None
    if s.leader:
        theirs = yield from s.swap(_framed(sizes, data))
        rows_sizes, rows = _unframed(s, theirs)
        blocks = _for_each_rank(s, rows_sizes, rows)
    got = yield from s.hand_out(blocks)
    sizes, data = _unframed(s, got)
    if rv is not None:
        fill_vector(s, rv, sizes, data)
    else:
        fill(s, recvbuf, data)


def alltoallw(s: Sides, sendbuf, recvbuf):
    """Alltoallw: block j, in a datatype of its own, straight to remote rank j.

    One message per pair, an empty one too: a block of the wrong size is an error, not a wait.
    """
    recvs = w_blocks(recvbuf, s.nremote, True, s.name, s.rank)
    sends = [t.view for t in w_blocks(sendbuf, s.nremote, False, s.name, s.rank)]
    return _alltoallw(s, sends, recvs)


def _alltoallw(s: Sides, sends, recvs):
    p2p, ctx = s.core.engine.p2p, s.core.coll
    ops = [p2p.irecv(ctx, r.view, i, T_PAIR, s.name) for i, r in enumerate(recvs)]
    ops += [p2p.isend(ctx, memoryview(v).cast("B"), j, T_PAIR) for j, v in enumerate(sends)]
    yield tuple(ops)
    for i, (op, r) in enumerate(zip(ops, recvs, strict=False)):
        if op.nbytes != len(r.view):
            raise BufferError_(f"{s.name} on rank {s.rank}: remote rank {i} sent {op.nbytes} "
                               f"bytes for a receive block of {len(r.view)}")


def _for_each_rank(s: Sides, row_sizes: list[int], rows) -> list[bytes]:
    """The remote ranks' rows (block sizes, then blocks), regrouped for each local rank.

    For local rank j: the blocks the remote ranks sent it, in their rank order, framed.
    """
    per = [([], []) for _ in range(s.nlocal)]
    if len(row_sizes) != s.nremote:
        return [b""] * s.nlocal
    for row in _blocks(row_sizes, rows):
        k = s.nlocal
        head = np.frombuffer(row[:8 * k], np.int64).tolist() if len(row) >= 8 * k else []
        if len(head) != k or sum(head) != len(row) - 8 * k:
            return [b""] * s.nlocal
        for j, block in enumerate(_blocks(head, row[8 * k:])):
            per[j][0].append(len(block))
            per[j][1].append(block)
    return [_framed(sizes, b"".join(blocks)) for sizes, blocks in per]


__all__ = ["Sides", "barrier", "bcast", "gather", "scatter", "allgather", "allreduce",
           "reduce", "reduce_scatter", "alltoall", "alltoallw", "taken", "T_BARRIER",
           "T_ROOTED", "T_SWAP"]
