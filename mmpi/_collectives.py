"""Cluster-aware collectives: native MPI inside each cluster, each item across the zipper once.

Every collective here follows MagPIe's wide-area-optimal shape: the part inside a cluster uses
the native (non-blocking) MPI collective on that cluster's own communicator; only what must
cross goes through the forwarder, between one contact rank per cluster (the root, or local rank
0 - the "leader"), as a single aggregated message per direction. Large crossings are pipelined
by the forwarder like any large point-to-point message. Two exceptions: a large Allreduce
or Bcast crosses in shares, between k pairs of ranks at once (see `_SPLIT`), and an Alltoall
or Alltoallv of large blocks sends each such block straight to its rank (see `_DIRECT_BLOCK`).

Rule 1: all ranks of a cluster issue the same native collectives in the same order, and the two
        leaders (or pairs of ranks) exchange internal messages on the communicator's
        collective context with a tag per collective kind, so consecutive collectives can
        never be confused.
Rule 2: cross-cluster reductions combine in canonical order (low partial op high partial) on
        both sides, so allreduce results are bit-identical on every rank; for commutative
        predefined ops this is done in place, needing only one extra buffer.
Rule 3: native calls are non-blocking and waited on through the engine, which keeps draining
        the forwarder link (see _engine Rule 1).
Rule 4: a crossing of at most the eager size goes outside MPI matching, as a collective
        crossing (_engine Rule 5); each side picks the way by its own size, so arguments that
        disagree across the eager size fail on the side left waiting instead of hanging.
"""

from __future__ import annotations

import functools
import itertools
import pickle
from typing import TYPE_CHECKING

import numpy as np
from mpi4py import MPI

from ._buffers import Typed, Vector, as_typed, as_vector, plain_pair
from .errors import BufferError_, RankError, UsageError
from .request import Request

if TYPE_CHECKING:
    from .comm import Comm

IN_PLACE = MPI.IN_PLACE
_BYTE = MPI.BYTE
_I64 = MPI.INT64_T

# Internal tags, one per collective kind (Rule 1).
T_BARRIER, T_BCAST, T_REDUCE, T_ALLREDUCE, T_ALLTOALL, T_ALLTOALLV = 1, 2, 3, 4, 5, 6
T_GATHER, T_GATHERV, T_SCATTER, T_SCATTERV, T_ALLGATHER, T_ALLGATHERV = 7, 8, 9, 10, 11, 12
T_RSB, T_SCAN, T_OBJ_REST = 13, 14, 16
# the pickle forms' own (a crossing of one is never taken for another's)
T_BCAST_OBJ, T_REDUCE_OBJ, T_ALLREDUCE_OBJ, T_GATHER_OBJ = 17, 18, 19, 20
T_SCATTER_OBJ, T_ALLGATHER_OBJ, T_ALLTOALL_OBJ = 21, 22, 23
T_ALLTOALLV_BLOCK = 24  # Alltoallv's large blocks, straight to their ranks


class _Ctx:
    """What a collective needs to know about where it runs."""

    __slots__ = ("e", "k", "L", "me", "other", "o", "nl", "oo", "no", "n", "lrank", "rank",
                 "leader", "peer", "op")

    @staticmethod
    def of(comm: Comm, op: str) -> _Ctx:
        """The context of `comm`'s collectives, for a call of `op`.

        Built once per communicator: every field but `op` is fixed, and on a bridged job's
        oversubscribed cores each microsecond a rank spends before the first message costs
        about three in the call (2+2 ranks: busy work added to every rank of an 8 B
        Allreduce made it 2.8-3.8 us longer per us; benchmarks/busy_slope.py).
        """
        if comm._engine.finalized:  # its check(), without the call when it would pass
            comm._engine.check()
        c = comm._cctx
        if c is None:
            c = comm._cctx = _Ctx(comm, op)
        c.op = op
        return c

    def __init__(self, comm: Comm, op: str) -> None:
        e = comm._engine  # checked by `of`, the one way in
        self.op = op  # the caller's name for it, for error messages
        self.e, self.k = e, comm._coll
        self.L = self.k.comm
        lay = e.layout
        self.me = e.cluster
        self.other = "high" if self.me == "low" else "low"
        self.o, self.nl = lay.offset(self.me), lay.cluster_size(self.me)
        self.oo, self.no = lay.offset(self.other), lay.cluster_size(self.other)
        self.n = lay.size
        self.lrank, self.rank = e.local_rank, e.vrank
        self.leader = self.lrank == 0
        self.peer = self.oo  # the other cluster's leader

    # cross-cluster point-to-point on the collective context
    def send(self, view, dest: int, tag: int) -> Request:
        return self.e.isend(self.k, memoryview(view).cast("B"), dest, tag)

    def recv(self, view, source: int, tag: int, op: str) -> Request:
        r = self.e.irecv(self.k, memoryview(view).cast("B"), source, tag, op)
        if self.e._crossed:  # the sender's part may have come as a crossing (see xrecv)
            self.e.cross_conflict(self.k, source)
        return r

    def recv_sized(self, source: int, tag: int, op: str) -> Request:
        """Receive bytes of a size the sender decides; see `received`."""
        return self.e.irecv(self.k, None, source, tag, op)

    @staticmethod
    def received(req: Request) -> memoryview:
        """The bytes a completed `recv_sized` request brought (until `release`)."""
        return memoryview(req._obj).cast("B")

    @staticmethod
    def release(req: Request | None) -> None:
        """The bytes of a `recv_sized` request are no longer needed (None: nothing to do)."""
        if req is None:
            return
        req._obj = None
        req._release()

    # a small crossing (at most the eager size): engine Rule 5, for the leaders' exchanges
    def small(self, nbytes: int) -> bool:
        return nbytes <= self.e.eager_max

    def xsend(self, view, dest: int, tag: int) -> MPI.Request:
        return self.e.cross_send(self.k, memoryview(view).cast("B"), dest, tag)

    def xrecv(self, source: int, tag: int) -> memoryview:
        return self.e.cross_recv(self.k, source, tag, self.op)

    def xswap(self, mine, tag: int) -> memoryview:
        """The leaders' exchange of small parts as crossings: `mine` out, the other's back."""
        return self.e.cross_swap(self.k, memoryview(mine).cast("B"), self.peer, tag, self.op)

    def cross(self, view, dest: int, tag: int):
        """Send `view` to `dest` in the other cluster: a crossing if small, else a message."""
        return self.xsend(view, dest, tag) if self.small(len(view)) else \
            self.send(view, dest, tag)

    def take(self, into, source: int, tag: int) -> int:
        """Receive `source`'s part into `into` (its expected size); return the size it had.

        A crossing if `into` is small, else through the matcher (which refuses a larger
        part). The sender decides by its own size, so a disagreement about which side of the
        eager size the part is on fails on the receiver (engine Rule 5); a part of another
        size within it is returned unused, for the caller's size check.
        """
        if self.small(len(into)):
            data = self.xrecv(source, tag)
            if len(data) == len(into):
                into[:] = data
            return len(data)
        r = self.recv(into, source, tag, self.op)
        self.wait(r)
        return r.nbytes

    def swap(self, mine, into, tag: int) -> int:
        """The leaders' exchange: `mine` to the other leader, its part into `into` (see take)."""
        if self.small(len(into)):
            s = self.cross(mine, self.peer, tag)
            n = self.take(into, self.peer, tag)
            self.wait(s)
            return n
        r = self.recv(into, self.peer, tag, self.op)  # posted first: straight into `into`
        self.wait(r, self.cross(mine, self.peer, tag))
        return r.nbytes

    # parts of a size only the sender knows (v-collectives' blocks, pickled objects)
    def take_sized(self, source: int, tag: int) -> tuple[memoryview, Request | None]:
        """The bytes `source` sent with `cross`, and what to `release` after use.

        The sender chose a crossing or a message by the size; this takes whichever comes.
        """
        data = self.e.cross_recv(self.k, source, tag, self.op, sized=True)
        if data is not None:
            return data, None
        r = self.e.irecv(self.k, None, source, tag, self.op)
        self.wait(r)
        return self.received(r), r

    def send_obj(self, obj, dest: int, tag: int) -> MPI.Request | Request:
        return self.cross(_dumps(obj), dest, tag)

    def recv_obj(self, source: int, tag: int):
        """The object that `source` sent with `send_obj` (a copy, as in mpi4py)."""
        data, r = self.take_sized(source, tag)
        obj = pickle.loads(data)
        del data
        self.release(r)
        return obj

    def swap_obj(self, obj, tag: int):
        """The leaders' exchange of objects: `obj` to the other leader, its object back."""
        s = self.send_obj(obj, self.peer, tag)
        theirs = self.recv_obj(self.peer, tag)
        self.wait(s)
        return theirs

    def tmp(self, slot: int, nbytes: int) -> memoryview:
        return self.e.scratch(slot, nbytes)

    def wait(self, *reqs) -> None:
        if len(reqs) == 1 and type(reqs[0]) is MPI.Request:  # most waits: one native call
            self.e.wait_one(reqs[0])
            return
        natives = [r for r in reqs if isinstance(r, MPI.Request)]
        ours = [r for r in reqs if isinstance(r, Request)]
        if natives:
            self.e.wait_all(natives)
        if ours:
            Request.Waitall(ours)

    def root(self, root: int) -> tuple[str, int]:
        if not isinstance(root, (int, np.integer)) or not 0 <= root < self.n:
            raise RankError(
                f"{self.op} on rank {self.rank}: root {root!r} is out of range for a communicator "
                f"of size {self.n}"
            )
        return self.e.layout.locate(int(root))


def _pack(c: _Ctx, slot: int, blocks: list) -> memoryview:
    """Concatenate byte blocks into scratch buffer `slot`."""
    out = c.tmp(slot, sum(len(b) for b in blocks))
    pos = 0
    for b in blocks:
        out[pos:pos + len(b)] = b
        pos += len(b)
    return out


def _carried(sizes: list[int]) -> list[int]:
    """`sizes` with those of blocks that go straight to their ranks as 0 (see alltoallv)."""
    return [n if n < _DIRECT_BLOCK else 0 for n in sizes]


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


def _sized_blocks(msg: memoryview, k: int, op: str, c: _Ctx,
                  straight: bool = False) -> tuple[list[int], list[int], memoryview]:
    """Split a message of k int64 block sizes followed by the blocks: (sizes, carried, blocks).

    `straight`: blocks of _DIRECT_BLOCK bytes or more are not in the message, only their
    sizes (they went straight to their ranks: alltoallv); `carried` gives those as 0, the
    sizes of what the message holds. Otherwise `carried` is `sizes`.
    """
    head = 8 * k
    sizes = np.frombuffer(msg[:head], np.int64).tolist() if len(msg) >= head else [0] * k
    carried = _carried(sizes) if straight else sizes
    data = msg[head:]
    if len(msg) < head or sum(carried) != len(data):
        raise UsageError(f"{op}: mismatched arguments: rank {c.rank} received {len(msg)} bytes "
                         f"that do not hold {k} block sizes and their blocks")
    return sizes, carried, data


# mpi4py's predefined reduction ops live as long as the module, so their ids are never
# reused: the common case is one set lookup (the full check below compares with OP_NULL,
# 0.8 us a call; Is_commutative, 0.4 us). All of them are commutative.
_PREDEFINED_OPS = frozenset(
    id(getattr(MPI, name)) for name in ("SUM", "PROD", "MAX", "MIN", "LAND", "BAND", "LOR",
                                        "BOR", "LXOR", "BXOR", "MAXLOC", "MINLOC"))


def _op(op, name: str) -> MPI.Op:
    if id(op) in _PREDEFINED_OPS:
        return op
    if not isinstance(op, MPI.Op) or op == MPI.OP_NULL:
        raise UsageError(f"{name}: expected an MPI.Op such as MPI.SUM, got {op!r}")
    return op


def _combine(op: MPI.Op, mine: Typed, theirs: memoryview, mine_is_low: bool) -> None:
    """Set mine := low op high, where `theirs` is the other cluster's partial (Rule 2)."""
    tspec = mine.like(theirs)
    if not mine_is_low or id(op) in _PREDEFINED_OPS or op.Is_commutative():
        op.Reduce_local(tspec, mine.spec)  # theirs op mine
    else:
        op.Reduce_local(mine.spec, tspec)  # mine op theirs, into theirs ...
        mine.view[:] = theirs  # ... then back: non-commutative ops only


def _same_size(op: str, what: str, mine: int, theirs: int, c: _Ctx) -> None:
    if mine != theirs:
        raise UsageError(
            f"{op}: mismatched arguments: rank {c.rank} ({c.me} cluster) has {mine} bytes of "
            f"{what}, the {c.other} cluster has {theirs}"
        )


# MPICH's own Ireduce is slow for large buffers on this machine, while Ireduce_scatter with one
# rank receiving everything is not (doubles, SUM, medians; benchmarks/native_reduce.py):
#   1 MiB, 2 ranks: Ireduce 742 us, Ireduce_scatter to one rank 144 us
#   1 MiB, 4 ranks: Ireduce 1614 us, Ireduce_scatter to one rank 504 us
#   64 KiB, 4 ranks: 51 us against 15 us; 8 B: the same within noise.
_REDUCE_VIA_RS = 16 << 10


def _ireduce(c: _Ctx, send, recv, op: MPI.Op, root: int, like: Typed) -> MPI.Request:
    """Native reduce inside the cluster to local rank `root` (recv: its spec, else None).

    `send` may be IN_PLACE at the root; `like` describes the full-size buffer.
    """
    if like.nbytes < _REDUCE_VIA_RS:
        return c.L.Ireduce(send, recv, op, root)
    counts = [0] * c.nl
    counts[root] = like.count
    if c.lrank != root:
        recv = like.like(_NOTHING)
    elif send is IN_PLACE:
        # MPICH's in-place reduce_scatter copies the result onto itself here (and asserts).
        tmp = c.tmp(2, like.nbytes)
        tmp[:] = like.view
        send = like.like(tmp)
    return c.L.Ireduce_scatter(send, recv, counts, op)


_NOTHING = memoryview(bytearray(0))


# -- objects inside a cluster ----------------------------------------------------------------
# mpi4py's pickle-based collectives (comm.bcast, gather, ...) block inside MPI, and a rank
# blocked there drains nothing from the forwarder: large messages on their way to it then hold
# the forwarder's chunk buffers, and a leader's crossing that needs one never comes (a 2+2
# allreduce of objects hung that way; tests/mpi/progs/pending_then_collective.py). So objects
# move inside a cluster as pickles through the non-blocking buffer collectives, waited on
# through the engine (Rule 3). That costs: 2+2 ranks, small objects, allreduce 125-134 us
# against 77-94 us with mpi4py's blocking ones, alltoall 192-202 against 121-136 us.
def _dumps(obj) -> bytes:
    return pickle.dumps(obj, pickle.HIGHEST_PROTOCOL)


def _displs(sizes) -> list[int]:
    """Where each of consecutive blocks of `sizes` starts."""
    # Plain Python: np.cumsum on a short list took 6 us of the 1 MiB Bcast root's 30 us
    # before its first send (1+1 ranks, idle); this takes under 1.
    return list(itertools.accumulate(sizes[:-1], initial=0)) if len(sizes) else []


# Pickles travel in slots of this size (an 8-byte length, then the pickle's first bytes), so a
# small object takes one native round, as in mpi4py; the rest of a longer pickle follows.
_SLOT = 1024
_HEAD = 8


def _slot(data: bytes) -> bytearray:
    slot = bytearray(_SLOT)
    slot[:_HEAD] = len(data).to_bytes(_HEAD, "little")
    part = data[:_SLOT - _HEAD]
    slot[_HEAD:_HEAD + len(part)] = part
    return slot


def _slot_size(slots, i: int) -> int:
    """Pickle length in slot i; the slot holds all of it if <= _SLOT - _HEAD."""
    return int.from_bytes(slots[i * _SLOT:i * _SLOT + _HEAD], "little")


def _slot_pickle(slots, i: int, rest=b"") -> bytes:
    n = _slot_size(slots, i)
    head = bytes(slots[i * _SLOT + _HEAD:i * _SLOT + _HEAD + min(n, _SLOT - _HEAD)])
    return head + bytes(rest)


def _objects(slots, n: int, rests: dict, own: int = -1, own_data: bytes = b"") -> list:
    """The n objects of `slots`, long ones completed by `rests` (index -> the rest's bytes).

    Slot `own`, if given, is this rank's own object, unpickled from `own_data`.
    """
    return [pickle.loads(own_data) if i == own else
            pickle.loads(_slot_pickle(slots, i, rests.get(i, b""))) for i in range(n)]


def _received(reqs: dict) -> dict:
    """Completed `recv_sized` requests by index -> their bytes (copied; the requests released)."""
    out = {i: bytes(_Ctx.received(r)) for i, r in reqs.items()}
    for r in reqs.values():
        _Ctx.release(r)
    return out


def _local_bcast(c: _Ctx, obj, root: int):
    """Local rank `root`'s `obj`, on every rank of this cluster."""
    data = _dumps(obj) if c.lrank == root else b""
    slot = _slot(data) if c.lrank == root else bytearray(_SLOT)
    c.wait(c.L.Ibcast([slot, _BYTE], root))
    extra = _slot_size(slot, 0) - (_SLOT - _HEAD)
    if c.lrank == root:
        if extra > 0:
            c.wait(c.L.Ibcast([data[_SLOT - _HEAD:], _BYTE], root))
        return pickle.loads(data)  # a copy, as everywhere else (and as in mpi4py)
    rest = bytearray(max(extra, 0))
    if extra > 0:
        c.wait(c.L.Ibcast([rest, _BYTE], root))
    return pickle.loads(_slot_pickle(slot, 0, rest))


def _local_gather(c: _Ctx, obj, root: int) -> list | None:
    """Every local rank's `obj` (copies), in rank order, at local rank `root` (None elsewhere).

    One native round of slots; ranks whose pickle overflows its slot send the rest to the
    root on the collective context (the root learns who from the slots).
    """
    data = _dumps(obj)
    at_root = c.lrank == root
    slots = bytearray(_SLOT * c.nl) if at_root else None
    c.wait(c.L.Igather([_slot(data), _BYTE], [slots, _BYTE] if at_root else None, root))
    if not at_root:
        if len(data) > _SLOT - _HEAD:
            c.wait(c.send(memoryview(data)[_SLOT - _HEAD:], c.o + root, T_OBJ_REST))
        return None
    rests = {i: c.recv_sized(c.o + i, T_OBJ_REST, c.op) for i in range(c.nl)
             if i != root and _slot_size(slots, i) > _SLOT - _HEAD}
    c.wait(*rests.values())
    return _objects(slots, c.nl, _received(rests), root, data)


def _local_scatter(c: _Ctx, objs, root: int):
    """A copy of object i of local rank `root`'s list `objs`, on local rank i.

    One native round of slots; the root sends the rest of a long pickle to its rank.
    """
    mine = bytearray(_SLOT)
    if c.lrank != root:
        c.wait(c.L.Iscatter(None, [mine, _BYTE], root))
        rests = {}
        if _slot_size(mine, 0) > _SLOT - _HEAD:
            r = c.recv_sized(c.o + root, T_OBJ_REST, c.op)
            c.wait(r)
            rests = _received({0: r})
        return _objects(mine, 1, rests)[0]
    parts = [_dumps(o) for o in objs]
    c.wait(c.L.Iscatter([b"".join(_slot(p) for p in parts), _BYTE], [mine, _BYTE], root))
    c.wait(*[c.send(memoryview(p)[_SLOT - _HEAD:], c.o + i, T_OBJ_REST)
             for i, p in enumerate(parts) if i != root and len(p) > _SLOT - _HEAD])
    return pickle.loads(parts[root])


def _local_allgather(c: _Ctx, obj) -> list:
    """Every local rank's `obj`, in rank order, on every rank of this cluster.

    One native round of slots; the overflowing parts of long pickles, if any, in a second.
    """
    data = _dumps(obj)
    slots = bytearray(_SLOT * c.nl)
    c.wait(c.L.Iallgather([_slot(data), _BYTE], [slots, _BYTE]))
    extra = [max(_slot_size(slots, i) - (_SLOT - _HEAD), 0) for i in range(c.nl)]
    rests = {}
    if any(extra):
        buf = bytearray(sum(extra))
        displs = _displs(extra)
        c.wait(c.L.Iallgatherv([data[_SLOT - _HEAD:], _BYTE], [buf, (extra, displs), _BYTE]))
        rests = {i: buf[d:d + n] for i, (n, d) in enumerate(zip(extra, displs, strict=True))}
    return _objects(slots, c.nl, rests)


def _local_alltoall(c: _Ctx, objs: list) -> list:
    """A copy of object i of every local rank's list, in rank order, on local rank i.

    One native round of slots; the rest of a long pickle goes from its rank to its receiver.
    """
    parts = [_dumps(o) for o in objs]
    slots = bytearray(_SLOT * c.nl)
    c.wait(c.L.Ialltoall([b"".join(_slot(p) for p in parts), _BYTE], [slots, _BYTE]))
    sends = [c.send(memoryview(p)[_SLOT - _HEAD:], c.o + j, T_OBJ_REST)
             for j, p in enumerate(parts) if j != c.lrank and len(p) > _SLOT - _HEAD]
    rests = {j: c.recv_sized(c.o + j, T_OBJ_REST, c.op) for j in range(c.nl)
             if j != c.lrank and _slot_size(slots, j) > _SLOT - _HEAD}
    c.wait(*sends, *rests.values())
    return _objects(slots, c.nl, _received(rests), c.lrank, parts[c.lrank])


def _local_reduce(c: _Ctx, obj, op, root: int):
    """`op` over every local rank's `obj`, in rank order, at local rank `root` (else None)."""
    items = _local_gather(c, obj, root)
    return None if items is None else functools.reduce(op, items)


# -- bcast ------------------------------------------------------------------------------------
# From this size up, Allreduce and Bcast cross in k shares, k the smaller cluster's size: k
# pairs of ranks (local rank i of each cluster) swap or pass on share i at once, and an
# allgather in each cluster puts the shares together (for Allreduce after a reduce-scatter,
# in place of the leader's reduce and bcast). Each item still crosses once, in k messages
# instead of one; the cores share the work and fewer ranks wait idle for a leader. 2+2 ranks,
# against the one-message scheme: Allreduce, three alternating mmpi-bench runs each, bridged
# medians 512 KiB 1387 against 1966 us, 1 MiB 2194 against 2932 us, 4 MiB 7725 against
# 9671 us; Bcast, the same way: 512 KiB 508 against 518 us, 1 MiB 698 against 782 us, 4 MiB
# 1971 against 2614 us (and in alternating calls, 1 MiB better or equal in 8 runs of 8).
# Below, the split lost: Allreduce 64 KiB 548-777 against 467-698 us, 256 KiB the same.
_SPLIT = 512 << 10


def _ways(c: _Ctx, nbytes: int) -> int:
    """Into how many shares a collective of `nbytes` crosses (see _SPLIT); 0: it does not."""
    k = min(c.nl, c.no)
    return k if k > 1 and nbytes >= _SPLIT else 0


def _shares(n: int, k: int, nloc: int) -> tuple[list[int], list[int]]:
    """Counts and displacements of n items in k near-equal shares, over nloc local ranks."""
    counts = [n // k + (i < n % k) if i < k else 0 for i in range(nloc)]
    return counts, _displs(counts)


def barrier(comm: Comm) -> None:
    """Native barrier per cluster, the leaders' token exchange, native barrier again."""
    c = _Ctx.of(comm, "Barrier")
    e, L = c.e, c.L  # straight to the engine: see Engine.cross_swap
    e.wait_one(L.Ibarrier())
    if c.leader:
        e.cross_swap(c.k, b"", c.peer, T_BARRIER, "Barrier")
    e.wait_one(L.Ibarrier())


def bcast(comm: Comm, buf, root: int) -> None:
    c = _Ctx.of(comm, "Bcast")
    rc, rl = c.root(root)
    b = as_typed(buf, writable=c.rank != root, op="Bcast")
    k = _ways(c, b.nbytes)  # the far side takes it in k shares
    if rc == c.me:
        xs = []
        if c.rank == root and k:
            counts, displs = _shares(b.nbytes, k, k)
            xs = [c.send(b.view[d:d + n], c.oo + i, T_BCAST)
                  for i, (n, d) in enumerate(zip(counts, displs, strict=True))]
        elif c.rank == root:
            xs = [c.cross(b.view, c.peer, T_BCAST)]
        c.wait(c.L.Ibcast(b.spec, rl))
        if xs:
            c.wait(*xs)
    elif k:
        counts, displs = _shares(b.nbytes, k, c.nl)
        n, d = counts[c.lrank], displs[c.lrank]
        if n:
            r = c.recv(b.view[d:d + n], root, T_BCAST, "Bcast")
            c.wait(r)
            _same_size("Bcast", f"data in share {c.lrank} of {k}", n, r.nbytes, c)
        c.wait(c.L.Iallgatherv(IN_PLACE, [b.view, counts, displs, _BYTE]))
    else:
        if c.leader:
            _same_size("Bcast", "data", b.nbytes, c.take(b.view, root, T_BCAST), c)
        c.wait(c.L.Ibcast(b.spec, 0))


def bcast_obj(comm: Comm, obj, root: int):
    c = _Ctx.of(comm, "bcast")
    rc, rl = c.root(root)
    if rc == c.me:
        x = (c.send_obj(obj, c.peer, T_BCAST_OBJ),) if c.rank == root else ()
        obj = _local_bcast(c, obj, rl)
        c.wait(*x)
        return obj
    if c.leader:
        obj = c.recv_obj(root, T_BCAST_OBJ)
    return _local_bcast(c, obj, 0)


# -- reduce / allreduce -------------------------------------------------------------------------
def reduce(comm: Comm, sendbuf, recvbuf, op, root: int) -> None:
    c = _Ctx.of(comm, "Reduce")
    rc, rl = c.root(root)
    op = _op(op, "Reduce")
    if c.rank == root:
        rb = as_typed(recvbuf, writable=True, op="Reduce")
        sb = None if sendbuf is IN_PLACE else as_typed(sendbuf, writable=False, op="Reduce")
        if sb is not None and sb.nbytes != rb.nbytes:
            raise BufferError_(f"Reduce on root {root}: send buffer has {sb.nbytes} bytes, "
                               f"receive buffer {rb.nbytes}")
        if c.small(rb.nbytes):
            c.wait(_ireduce(c, IN_PLACE if sb is None else sb.spec, rb.spec, op, rl, rb))
            theirs = c.xrecv(c.peer, T_REDUCE)
        else:
            theirs = c.tmp(0, rb.nbytes + 1)  # one spare byte: a larger partial is caught below
            r = c.recv(theirs, c.peer, T_REDUCE, "Reduce")
            c.wait(_ireduce(c, IN_PLACE if sb is None else sb.spec, rb.spec, op, rl, rb))
            c.wait(r)
            theirs = theirs[:r.nbytes]
        _same_size("Reduce", "data", rb.nbytes, len(theirs), c)
        _combine(op, rb, theirs, c.me == "low")
        return
    if sendbuf is IN_PLACE:
        raise UsageError(f"Reduce: MPI.IN_PLACE is only valid on the root, not rank {c.rank}")
    sb = as_typed(sendbuf, writable=False, op="Reduce")
    contact = rl if rc == c.me else 0
    if rc != c.me and c.leader:
        part = c.tmp(0, sb.nbytes)
        c.wait(_ireduce(c, sb.spec, sb.like(part), op, 0, sb))
        c.wait(c.cross(part, root, T_REDUCE))
    else:
        c.wait(_ireduce(c, sb.spec, None, op, contact, sb))


def allreduce(comm: Comm, sendbuf, recvbuf, op) -> None:
    c = _Ctx.of(comm, "Allreduce")
    if id(op) in _PREDEFINED_OPS:
        dt = plain_pair(sendbuf, recvbuf)
        if dt is not None and recvbuf.nbytes < _PLAIN_MAX and c.small(recvbuf.nbytes):
            _allreduce_plain(c, sendbuf, recvbuf, op, dt)
            return
    op = _op(op, "Allreduce")
    rb = as_typed(recvbuf, writable=True, op="Allreduce")
    sb = None if sendbuf is IN_PLACE else as_typed(sendbuf, writable=False, op="Allreduce")
    if sb is not None and sb.nbytes != rb.nbytes:
        raise BufferError_(f"Allreduce on rank {c.rank}: send buffer has {sb.nbytes} bytes, "
                           f"receive buffer {rb.nbytes}")
    k = _ways(c, rb.nbytes)
    if k:
        _allreduce_split(c, sb, rb, op, k)
        return
    if c.leader:
        c.wait(_ireduce(c, IN_PLACE if sb is None else sb.spec, rb.spec, op, 0, rb))
        if c.small(rb.nbytes):
            theirs = c.xswap(rb.view, T_ALLREDUCE)
        else:
            theirs = c.tmp(1, rb.nbytes + 1)  # one spare byte: a larger partial is caught
            r = c.recv(theirs, c.peer, T_ALLREDUCE, "Allreduce")
            c.wait(r, c.send(rb.view, c.peer, T_ALLREDUCE))
            theirs = theirs[:r.nbytes]
        _same_size("Allreduce", "data", rb.nbytes, len(theirs), c)
        _combine(op, rb, theirs, c.me == "low")
    else:
        c.wait(_ireduce(c, rb.spec if sb is None else sb.spec, None, op, 0, rb))
    c.wait(c.L.Ibcast(rb.spec, 0))


# A small Allreduce of plain numpy arrays (see `plain_pair`) with a predefined op skips the
# general argument handling: it is the same leader scheme on the same messages, with the arrays
# handed to mpi4py as they are. Each microsecond of Python in a call costs several on the
# bridged job's oversubscribed cores (see `_Ctx.of`). 8 B of float32, 2+2 ranks, mmpi-bench
# alternating with the general path, 20 rounds: 68.5 us bridged against 78.7 (medians), and
# faster in 15 of the 20 (benchmarks/RESULTS.md, "... a short path for small Allreduces").
_PLAIN_MAX = _REDUCE_VIA_RS  # from there on the native reduce goes another way (_ireduce)


def _allreduce_plain(c: _Ctx, sendbuf, recvbuf: np.ndarray, op: MPI.Op,
                     dt: MPI.Datatype) -> None:
    """The leader scheme of `allreduce` for arrays `plain_pair` accepted, small, predefined op."""
    mine = [recvbuf, dt]
    if c.leader:
        c.wait(c.L.Ireduce(IN_PLACE if sendbuf is IN_PLACE else [sendbuf, dt], mine, op, 0))
        theirs = c.xswap(recvbuf, T_ALLREDUCE)
        _same_size("Allreduce", "data", recvbuf.nbytes, len(theirs), c)
        op.Reduce_local([theirs, dt], mine)  # theirs op mine: predefined ops commute (Rule 2)
    else:
        c.wait(c.L.Ireduce(mine if sendbuf is IN_PLACE else [sendbuf, dt], None, op, 0))
    c.wait(c.L.Ibcast(mine, 0))


def _allreduce_split(c: _Ctx, sb: Typed | None, rb: Typed, op: MPI.Op, k: int) -> None:
    """Allreduce of a large buffer through k pairs of ranks, one share of it each.

    Local rank i < k of each cluster gets share i reduced within its cluster, swaps it with
    local rank i of the other cluster and combines in canonical order (Rule 2); an in-place
    allgather then gives every rank every share.
    """
    ext = rb.extent
    counts, displs = _shares(rb.count, k, c.nl)
    off, nb = displs[c.lrank] * ext, counts[c.lrank] * ext
    share = Typed(rb.view[off:off + nb], counts[c.lrank], rb.dt, ext)
    if sb is None:  # in place: the input is rb, and this rank's share of rb is the output
        tmp = c.tmp(2, rb.nbytes)
        tmp[:] = rb.view
        send = rb.like(tmp)
    else:
        send = sb.spec
    c.wait(c.L.Ireduce_scatter(send, share.spec, counts, op))
    if c.lrank < k:
        peer = c.oo + c.lrank
        theirs = c.tmp(1, nb + 1)  # one spare byte: a larger share is caught below
        r = c.recv(theirs, peer, T_ALLREDUCE, "Allreduce")
        c.wait(r, c.send(share.view, peer, T_ALLREDUCE))
        _same_size("Allreduce", f"data in share {c.lrank} of {k}", nb, r.nbytes, c)
        _combine(op, share, theirs[:nb], c.me == "low")
    c.wait(c.L.Iallgatherv(IN_PLACE, [rb.view, counts, displs, rb.dt]))


def _obj_op(op):
    return op if callable(op) else _op(op, "reduce")


def reduce_obj(comm: Comm, obj, op, root: int):
    c = _Ctx.of(comm, "reduce")
    rc, rl = c.root(root)
    op = _obj_op(op)
    if rc == c.me:
        part = _local_reduce(c, obj, op, rl)
        if c.rank == root:
            theirs = c.recv_obj(c.peer, T_REDUCE_OBJ)
            return op(part, theirs) if c.me == "low" else op(theirs, part)
        return None
    part = _local_reduce(c, obj, op, 0)
    if c.leader:
        c.wait(c.send_obj(part, root, T_REDUCE_OBJ))
    return None


def allreduce_obj(comm: Comm, obj, op):
    c = _Ctx.of(comm, "allreduce")
    op = _obj_op(op)
    part = _local_reduce(c, obj, op, 0)
    if c.leader:
        theirs = c.swap_obj(part, T_ALLREDUCE_OBJ)
        part = op(part, theirs) if c.me == "low" else op(theirs, part)
    return _local_bcast(c, part, 0)


# -- alltoall ---------------------------------------------------------------------------------
# From this block size up, Alltoall's cross-cluster blocks go straight from each rank to each
# rank of the other cluster (each still crosses once, in nl*no messages per direction) instead
# of being gathered at the leader, crossing as one message and scattered. The leader scheme
# copies every block twice more and keeps the other ranks idle while one pair of leaders
# crosses; for small blocks its single message still wins. 2+2 ranks, `mmpi-bench alltoall`,
# 3 to 11 alternating runs per size, bridged medians, leader against direct: 16 KiB 461 against
# 433 us (lost in 3 of 7), 32 KiB 736 against 475 us, 64 KiB 770 against 627 us, 128 KiB
# 970 against 720 us, 256 KiB 2148 against 885 us, 1 MiB 6497 against 2812 us; 1 KiB
# 256 against 309 us.
_DIRECT_BLOCK = 32 << 10


def alltoall(comm: Comm, sendbuf, recvbuf) -> None:
    c = _Ctx.of(comm, "Alltoall")
    rb = as_typed(recvbuf, writable=True, op="Alltoall")
    if sendbuf is IN_PLACE:
        sview = c.tmp(2, rb.nbytes)
        sview[:] = rb.view
    else:
        sview = as_typed(sendbuf, writable=False, op="Alltoall").view
    if len(sview) != rb.nbytes or rb.count % c.n:
        raise BufferError_(
            f"Alltoall on rank {c.rank}: send buffer has {len(sview)} bytes and receive buffer "
            f"{rb.nbytes}; both must hold one equal block per rank ({c.n} ranks)"
        )
    blk = rb.nbytes // c.n
    # Same-cluster blocks: native alltoallv straight between the users' buffers.
    counts = [blk] * c.nl
    displs = [(c.o + j) * blk for j in range(c.nl)]
    local = c.L.Ialltoallv([sview, (counts, displs), _BYTE], [rb.view, (counts, displs), _BYTE])
    # Cross-cluster blocks: straight to their ranks (large blocks, see _DIRECT_BLOCK), or
    # gathered at the leader, one message each way, scattered.
    out = sview[c.oo * blk:(c.oo + c.no) * blk]
    inn = rb.view[c.oo * blk:(c.oo + c.no) * blk]
    if blk >= _DIRECT_BLOCK:
        rs = [c.recv(inn[j * blk:(j + 1) * blk], c.oo + j, T_ALLTOALL, "Alltoall")
              for j in range(c.no)]
        ss = [c.send(out[j * blk:(j + 1) * blk], c.oo + j, T_ALLTOALL) for j in range(c.no)]
        c.wait(*rs, *ss)
        for j, r in enumerate(rs):
            _same_size("Alltoall", f"data per block (the block from rank {c.oo + j})", blk,
                       r.nbytes, c)
    elif c.leader:
        mine = c.tmp(0, c.nl * c.no * blk)
        c.wait(c.L.Igather([out, _BYTE], [mine, _BYTE], 0))
        theirs = c.tmp(1, c.no * c.nl * blk)
        _same_size("Alltoall", "blocks for it", len(theirs), c.swap(mine, theirs, T_ALLTOALL), c)
        # theirs is [their rank j][my rank i] -> scatter needs [my rank i][their rank j]
        tt = c.tmp(3, len(theirs))
        if c.nl * c.no <= 16:  # a few slices: cheaper than numpy's calls (see alltoallv)
            _by_receiver(theirs, [blk] * (c.nl * c.no), c.nl, tt)
        else:
            t = np.frombuffer(theirs, np.uint8).reshape(c.no, c.nl, blk).transpose(1, 0, 2)
            np.copyto(np.frombuffer(tt, np.uint8).reshape(c.nl, c.no, blk), t)
        c.wait(c.L.Iscatter([tt, _BYTE], [inn, _BYTE], 0))
    else:
        c.wait(c.L.Igather([out, _BYTE], None, 0))
        c.wait(c.L.Iscatter(None, [inn, _BYTE], 0))
    c.wait(local)


def alltoallv(comm: Comm, sendbuf, recvbuf) -> None:
    c = _Ctx.of(comm, "Alltoallv")
    rv = as_vector(recvbuf, c.n, writable=True, op="Alltoallv")
    if sendbuf is IN_PLACE:
        copy = c.tmp(4, len(rv.base))
        copy[:] = rv.base
        sv = Vector(copy, rv.counts, rv.displs, rv.dt, rv.extent)
    else:
        sv = as_vector(sendbuf, c.n, writable=False, op="Alltoallv")
    se, re_ = sv.extent, rv.extent
    # Same-cluster blocks: native alltoallv on the users' buffers, in bytes.
    sc = [sv.counts[c.o + j] * se for j in range(c.nl)]
    sd = [sv.displs[c.o + j] * se for j in range(c.nl)]
    rcn = [rv.counts[c.o + j] * re_ for j in range(c.nl)]
    rd = [rv.displs[c.o + j] * re_ for j in range(c.nl)]
    local = c.L.Ialltoallv([sv.base, (sc, sd), _BYTE], [rv.base, (rcn, rd), _BYTE])
    # Cross-cluster blocks of at least _DIRECT_BLOCK bytes: straight to their ranks, as in
    # Alltoall. Sender and receiver each decide by their own count of the block (which MPI
    # says agree; if they do not, the sizes below tell). Posted first, so they move while
    # the leaders exchange the rest.
    far = range(c.oo, c.oo + c.no)
    out_n = [sv.nbytes(j) for j in far]
    rs = [c.recv(rv.block(j), j, T_ALLTOALLV_BLOCK, "Alltoallv")
          for j in far if rv.nbytes(j) >= _DIRECT_BLOCK]
    ss = [c.send(sv.block(j), j, T_ALLTOALLV_BLOCK)
          for j, n in zip(far, out_n, strict=True) if n >= _DIRECT_BLOCK]
    # The smaller ones, with the size of every block: packed, gathered at the leader, one
    # exchange each way, scattered.
    mycounts = np.array(out_n, np.int64)
    packed = _pack(c, 0, [sv.block(j) for j, n in zip(far, out_n, strict=True)
                          if n < _DIRECT_BLOCK])
    # (The matrices are tiny: Python lists, not numpy calls, which cost about a microsecond
    # each and several on oversubscribed cores; see _Ctx.of.)
    if c.leader:
        allcounts = np.empty((c.nl, c.no), np.int64)
        c.wait(c.L.Igather([mycounts, _I64], [allcounts, _I64], 0))
        totals = [sum(_carried(row)) for row in allcounts.tolist()]
        # One message each way: this cluster's count matrix, then the blocks it carries.
        head = allcounts.nbytes
        mine = c.tmp(1, head + sum(totals))
        mine[:head] = allcounts.tobytes()
        c.wait(c.L.Igatherv([packed, _BYTE], [mine[head:], (totals, None), _BYTE], 0))
        s = c.cross(mine, c.peer, T_ALLTOALLV)
        msg, r = c.take_sized(c.peer, T_ALLTOALLV)
        c.wait(s)
        # [their j][my i], row after row
        flat, theirk, theirs = _sized_blocks(msg, c.no * c.nl, "Alltoallv", c, straight=True)
        runs = c.tmp(2, len(theirs))
        sizes = _by_receiver(theirs, theirk, c.nl, runs)
        colc = np.array([flat[i::c.nl] for i in range(c.nl)], np.int64)  # [my i][their j]
        del theirs, msg
        c.release(r)
        cnt_for_me = np.empty(c.no, np.int64)
        c.wait(c.L.Iscatter([colc, _I64], [cnt_for_me, _I64], 0))
        counts = cnt_for_me.tolist()
        mine_in = c.tmp(3, sizes[0])
        c.wait(c.L.Iscatterv([runs, (sizes, None), _BYTE], [mine_in, _BYTE], 0))
    else:
        c.wait(c.L.Igather([mycounts, _I64], None, 0))
        c.wait(c.L.Igatherv([packed, _BYTE], None, 0))
        cnt_for_me = np.empty(c.no, np.int64)
        c.wait(c.L.Iscatter(None, [cnt_for_me, _I64], 0))
        counts = cnt_for_me.tolist()
        mine_in = c.tmp(3, sum(_carried(counts)))
        c.wait(c.L.Iscatterv(None, [mine_in, _BYTE], 0))
    # Every block's size is known now: check them all before waiting for the large ones (a
    # block one side sends straight and the other expects through the leaders never comes).
    pos = 0
    for j, got in enumerate(counts):
        want = rv.nbytes(c.oo + j)
        if want != got:
            raise UsageError(
                f"Alltoallv: mismatched counts: rank {c.rank} expects {want} bytes from rank "
                f"{c.oo + j}, which sends {got}"
            )
        if got < _DIRECT_BLOCK:
            rv.block(c.oo + j)[:] = mine_in[pos:pos + got]
            pos += got
    if rs or ss:
        c.wait(*rs, *ss)
    c.wait(local)


def alltoall_obj(comm: Comm, objs):
    c = _Ctx.of(comm, "alltoall")
    objs = list(objs)
    if len(objs) != c.n:
        raise UsageError(f"alltoall: rank {c.rank} passed {len(objs)} objects for {c.n} ranks")
    local = _local_alltoall(c, objs[c.o:c.o + c.nl])
    out = objs[c.oo:c.oo + c.no]
    gathered = _local_gather(c, out, 0)
    if c.leader:
        theirs = c.swap_obj(gathered, T_ALLTOALL_OBJ)  # [their j][my i]
        mine = _local_scatter(c, [[theirs[j][i] for j in range(c.no)] for i in range(c.nl)], 0)
    else:
        mine = _local_scatter(c, None, 0)
    res = [None] * c.n
    res[c.o:c.o + c.nl] = local
    res[c.oo:c.oo + c.no] = mine
    return res


# -- gather / scatter -------------------------------------------------------------------------
def gather(comm: Comm, sendbuf, recvbuf, root: int) -> None:
    c = _Ctx.of(comm, "Gather")
    rc, rl = c.root(root)
    if c.rank == root:
        rb = as_typed(recvbuf, writable=True, op="Gather")
        if rb.count % c.n:
            raise BufferError_(f"Gather on root {root}: receive buffer of {rb.nbytes} bytes is "
                               f"not {c.n} equal blocks")
        blk = rb.nbytes // c.n
        if sendbuf is IN_PLACE:
            sspec = IN_PLACE
        else:
            sb = as_typed(sendbuf, writable=False, op="Gather")
            _check_block("Gather", c, sb.nbytes, blk)
            sspec = sb.spec
        theirs = rb.view[c.oo * blk:(c.oo + c.no) * blk]
        r = None if c.small(len(theirs)) else c.recv(theirs, c.peer, T_GATHER, "Gather")
        c.wait(c.L.Igather(sspec, [rb.view[c.o * blk:(c.o + c.nl) * blk], _BYTE], rl))
        if r is None:
            n = c.take(theirs, c.peer, T_GATHER)
        else:
            c.wait(r)
            n = r.nbytes
        _same_size("Gather", "blocks", c.no * blk, n, c)
        return
    sb = as_typed(sendbuf, writable=False, op="Gather")
    if rc == c.me:
        c.wait(c.L.Igather(sb.spec, None, rl))
    elif c.leader:
        part = c.tmp(0, sb.nbytes * c.nl)
        c.wait(c.L.Igather(sb.spec, [part, _BYTE], 0))
        c.wait(c.cross(part, root, T_GATHER))
    else:
        c.wait(c.L.Igather(sb.spec, None, 0))


def _check_block(op: str, c: _Ctx, have: int, blk: int) -> None:
    if have != blk:
        raise BufferError_(f"{op} on root {c.rank}: its own block has {have} bytes but the "
                           f"receive buffer holds blocks of {blk}")


def gatherv(comm: Comm, sendbuf, recvbuf, root: int) -> None:
    c = _Ctx.of(comm, "Gatherv")
    rc, rl = c.root(root)
    if c.rank == root:
        rv = as_vector(recvbuf, c.n, writable=True, op="Gatherv")
        sspec = IN_PLACE if sendbuf is IN_PLACE else \
            as_typed(sendbuf, writable=False, op="Gatherv").spec
        ext = rv.extent
        cnt = [rv.counts[c.o + j] * ext for j in range(c.nl)]
        dsp = [rv.displs[c.o + j] * ext for j in range(c.nl)]
        if sspec is IN_PLACE:
            native = c.L.Igatherv(IN_PLACE, [rv.base, (cnt, dsp), _BYTE], rl)
        else:
            native = c.L.Igatherv([sspec[0], _BYTE], [rv.base, (cnt, dsp), _BYTE], rl)
        c.wait(native)
        msg, r = c.take_sized(c.peer, T_GATHERV)
        sizes, _, data = _sized_blocks(msg, c.no, "Gatherv", c)
        pos = 0
        for j in range(c.no):
            want, got = rv.nbytes(c.oo + j), sizes[j]
            if got > want:
                raise UsageError(f"Gatherv: rank {c.oo + j} sent {got} bytes, root {root} "
                                 f"expects {want}")
            rv.block(c.oo + j)[:got] = data[pos:pos + got]
            pos += got
        del sizes, data, msg
        c.release(r)
        return
    sb = as_typed(sendbuf, writable=False, op="Gatherv")
    if rc == c.me:
        c.wait(c.L.Igatherv([sb.view, _BYTE], None, rl))
    elif c.leader:
        sizes = np.empty(c.nl, np.int64)
        c.wait(c.L.Igather([np.array([sb.nbytes], np.int64), _I64], [sizes, _I64], 0))
        # One message: the block sizes, then the blocks.
        msg = c.tmp(0, sizes.nbytes + int(sizes.sum()))
        msg[:sizes.nbytes] = sizes.tobytes()
        c.wait(c.L.Igatherv([sb.view, _BYTE],
                            [msg[sizes.nbytes:], (list(map(int, sizes)), None), _BYTE], 0))
        c.wait(c.cross(msg, root, T_GATHERV))
    else:
        c.wait(c.L.Igather([np.array([sb.nbytes], np.int64), _I64], None, 0))
        c.wait(c.L.Igatherv([sb.view, _BYTE], None, 0))


def scatter(comm: Comm, sendbuf, recvbuf, root: int) -> None:
    c = _Ctx.of(comm, "Scatter")
    rc, rl = c.root(root)
    if c.rank == root:
        sb = as_typed(sendbuf, writable=False, op="Scatter")
        if sb.count % c.n:
            raise BufferError_(f"Scatter on root {root}: send buffer of {sb.nbytes} bytes is "
                               f"not {c.n} equal blocks")
        blk = sb.nbytes // c.n
        if recvbuf is IN_PLACE:
            rspec = IN_PLACE
        else:
            rb = as_typed(recvbuf, writable=True, op="Scatter")
            _check_block("Scatter", c, rb.nbytes, blk)
            rspec = [rb.view, _BYTE]
        s = c.cross(sb.view[c.oo * blk:(c.oo + c.no) * blk], c.peer, T_SCATTER)
        c.wait(c.L.Iscatter([sb.view[c.o * blk:(c.o + c.nl) * blk], _BYTE], rspec, rl))
        c.wait(s)
        return
    rb = as_typed(recvbuf, writable=True, op="Scatter")
    if rc == c.me:
        c.wait(c.L.Iscatter(None, [rb.view, _BYTE], rl))
    elif c.leader:
        want = rb.nbytes * c.nl
        part = c.tmp(0, want + (not c.small(want)))  # a spare byte: a larger part is caught
        _same_size("Scatter", "blocks", want, c.take(part, root, T_SCATTER), c)
        c.wait(c.L.Iscatter([part[:want], _BYTE], [rb.view, _BYTE], 0))
    else:
        c.wait(c.L.Iscatter(None, [rb.view, _BYTE], 0))


def scatterv(comm: Comm, sendbuf, recvbuf, root: int) -> None:
    c = _Ctx.of(comm, "Scatterv")
    rc, rl = c.root(root)
    if c.rank == root:
        sv = as_vector(sendbuf, c.n, writable=False, op="Scatterv")
        ext = sv.extent
        sizes = np.array([sv.nbytes(c.oo + j) for j in range(c.no)], np.int64)
        # One message: the block sizes, then the blocks.
        msg = _pack(c, 0, [memoryview(sizes).cast("B")]
                    + [sv.block(c.oo + j) for j in range(c.no)])
        s = c.cross(msg, c.peer, T_SCATTERV)
        cnt = [sv.counts[c.o + j] * ext for j in range(c.nl)]
        dsp = [sv.displs[c.o + j] * ext for j in range(c.nl)]
        rspec = IN_PLACE if recvbuf is IN_PLACE else \
            [as_typed(recvbuf, writable=True, op="Scatterv").view, _BYTE]
        c.wait(c.L.Iscatterv([sv.base, (cnt, dsp), _BYTE], rspec, rl))
        c.wait(s)
        return
    rb = as_typed(recvbuf, writable=True, op="Scatterv")
    if rc == c.me:
        c.wait(c.L.Iscatterv(None, [rb.view, _BYTE], rl))
    elif c.leader:
        msg, r = c.take_sized(root, T_SCATTERV)
        sizes, _, data = _sized_blocks(msg, c.nl, "Scatterv", c)
        c.wait(c.L.Iscatterv([data, (sizes, None), _BYTE], [rb.view, _BYTE], 0))
        del sizes, data, msg
        c.release(r)
    else:
        c.wait(c.L.Iscatterv(None, [rb.view, _BYTE], 0))


def gather_obj(comm: Comm, obj, root: int):
    c = _Ctx.of(comm, "gather")
    rc, rl = c.root(root)
    if rc == c.me:
        part = _local_gather(c, obj, rl)
        if c.rank != root:
            return None
        theirs = c.recv_obj(c.peer, T_GATHER_OBJ)
        return part + theirs if c.me == "low" else theirs + part
    part = _local_gather(c, obj, 0)
    if c.leader:
        c.wait(c.send_obj(part, root, T_GATHER_OBJ))
    return None


def scatter_obj(comm: Comm, objs, root: int):
    c = _Ctx.of(comm, "scatter")
    rc, rl = c.root(root)
    if rc == c.me:
        mine = None
        if c.rank == root:
            objs = list(objs)
            if len(objs) != c.n:
                raise UsageError(f"scatter: root {root} passed {len(objs)} objects for {c.n} "
                                 "ranks")
            c.wait(c.send_obj(objs[c.oo:c.oo + c.no], c.peer, T_SCATTER_OBJ))
            mine = objs[c.o:c.o + c.nl]
        return _local_scatter(c, mine, rl)
    part = c.recv_obj(root, T_SCATTER_OBJ) if c.leader else None
    return _local_scatter(c, part, 0)


# -- allgather --------------------------------------------------------------------------------
def allgather(comm: Comm, sendbuf, recvbuf) -> None:
    c = _Ctx.of(comm, "Allgather")
    rb = as_typed(recvbuf, writable=True, op="Allgather")
    if rb.count % c.n:
        raise BufferError_(f"Allgather on rank {c.rank}: receive buffer of {rb.nbytes} bytes "
                           f"is not {c.n} equal blocks")
    blk = rb.nbytes // c.n
    if sendbuf is IN_PLACE:
        sspec = IN_PLACE
    else:
        sb = as_typed(sendbuf, writable=False, op="Allgather")
        _check_block("Allgather", c, sb.nbytes, blk)
        sspec = [sb.view, _BYTE]
    mine = rb.view[c.o * blk:(c.o + c.nl) * blk]
    theirs = rb.view[c.oo * blk:(c.oo + c.no) * blk]
    c.wait(c.L.Iallgather(sspec, [mine, _BYTE]))
    if c.leader:
        _same_size("Allgather", "blocks", len(theirs), c.swap(mine, theirs, T_ALLGATHER), c)
    c.wait(c.L.Ibcast([theirs, _BYTE], 0))


def allgatherv(comm: Comm, sendbuf, recvbuf) -> None:
    c = _Ctx.of(comm, "Allgatherv")
    rv = as_vector(recvbuf, c.n, writable=True, op="Allgatherv")
    ext = rv.extent
    cnt = [rv.counts[c.o + j] * ext for j in range(c.nl)]
    dsp = [rv.displs[c.o + j] * ext for j in range(c.nl)]
    sspec = IN_PLACE if sendbuf is IN_PLACE else \
        [as_typed(sendbuf, writable=False, op="Allgatherv").view, _BYTE]
    c.wait(c.L.Iallgatherv(sspec, [rv.base, (cnt, dsp), _BYTE]))
    total = sum(rv.nbytes(c.oo + j) for j in range(c.no))
    theirs = c.tmp(0, total)
    if c.leader:
        mine = _pack(c, 1, [rv.block(c.o + j) for j in range(c.nl)])
        _same_size("Allgatherv", "blocks", total, c.swap(mine, theirs, T_ALLGATHERV), c)
    c.wait(c.L.Ibcast([theirs, _BYTE], 0))
    pos = 0
    for j in range(c.no):
        k = rv.nbytes(c.oo + j)
        rv.block(c.oo + j)[:] = theirs[pos:pos + k]
        pos += k


def allgather_obj(comm: Comm, obj):
    c = _Ctx.of(comm, "allgather")
    part = _local_allgather(c, obj)
    theirs = None
    if c.leader:
        theirs = c.swap_obj(part, T_ALLGATHER_OBJ)
    theirs = _local_bcast(c, theirs, 0)
    return part + theirs if c.me == "low" else theirs + part


# -- reduce_scatter_block / scan / exscan -----------------------------------------------------
def reduce_scatter_block(comm: Comm, sendbuf, recvbuf, op) -> None:
    c = _Ctx.of(comm, "Reduce_scatter_block")
    op = _op(op, "Reduce_scatter_block")
    rb = as_typed(recvbuf, writable=True, op="Reduce_scatter_block")
    if sendbuf is IN_PLACE:
        if rb.count % c.n:
            raise BufferError_("Reduce_scatter_block: with IN_PLACE the receive buffer must "
                               f"hold {c.n} equal blocks")
        sb, blk = rb, rb.nbytes // c.n
        out = rb.view[:blk]
    else:
        sb = as_typed(sendbuf, writable=False, op="Reduce_scatter_block")
        blk = rb.nbytes
        out = rb.view
        if sb.nbytes != blk * c.n:
            raise BufferError_(
                f"Reduce_scatter_block on rank {c.rank}: send buffer has {sb.nbytes} bytes, "
                f"expected {c.n} blocks of the receive buffer's {blk}"
            )
    full = c.tmp(0, sb.nbytes) if c.leader else None
    full_spec = sb.like(full) if c.leader else None
    c.wait(_ireduce(c, sb.spec, full_spec, op, 0, sb))
    if c.leader:
        fv = full
        mine = Typed(fv[c.o * blk:(c.o + c.nl) * blk], c.nl * blk // sb.extent, sb.dt, sb.extent)
        theirs = c.tmp(1, c.nl * blk)
        n = c.swap(fv[c.oo * blk:(c.oo + c.no) * blk], theirs, T_RSB)
        _same_size("Reduce_scatter_block", "data for it", len(theirs), n, c)
        _combine(op, mine, theirs, c.me == "low")
        c.wait(c.L.Iscatter([mine.view, _BYTE], [out, _BYTE], 0))
    else:
        c.wait(c.L.Iscatter(None, [out, _BYTE], 0))


def scan(comm: Comm, sendbuf, recvbuf, op, exclusive: bool) -> None:
    name = "Exscan" if exclusive else "Scan"
    c = _Ctx.of(comm, name)
    op = _op(op, name)
    rb = as_typed(recvbuf, writable=True, op=name)
    sb = None if sendbuf is IN_PLACE else as_typed(sendbuf, writable=False, op=name)
    data = rb if sb is None else sb
    if c.me == "low":
        if exclusive:
            # The low cluster's total goes to the high cluster: an inclusive scan gives it.
            incl = c.tmp(0, rb.nbytes)
            c.wait(c.L.Iscan(data.spec, rb.like(incl), op))
            c.wait(c.L.Iexscan(IN_PLACE if sb is None else sb.spec, rb.spec, op))
            last = incl
        else:
            c.wait(c.L.Iscan(IN_PLACE if sb is None else sb.spec, rb.spec, op))
            last = rb.view
        if c.lrank == c.nl - 1:
            c.wait(c.cross(last, c.peer, T_SCAN))
        return
    total = c.tmp(1, rb.nbytes)
    if c.leader:
        _same_size(name, "data", len(total), c.take(total, c.o - 1, T_SCAN), c)
    if exclusive:
        part = c.tmp(2, rb.nbytes)
        c.wait(c.L.Iexscan(data.spec, rb.like(part), op))
    else:
        c.wait(c.L.Iscan(IN_PLACE if sb is None else sb.spec, rb.spec, op))
    c.wait(c.L.Ibcast([total, _BYTE], 0))
    if exclusive:
        if c.leader:
            rb.view[:] = total
        else:
            op.Reduce_local(rb.like(total), rb.like(part))
            rb.view[:] = part
    else:
        op.Reduce_local(rb.like(total), rb.spec)  # low total op my prefix
