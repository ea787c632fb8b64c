"""The collective transport: small crossings outside MPI matching, and the leaders' exchange.

Every cluster-aware collective (see `_collectives`) runs the native collective inside each
cluster and moves what must cross the zipper between one contact rank per cluster (the root,
or the cluster's first rank in the communicator: its "leader"). This module is how it moves.

Rule 1: a crossing of at most the eager size (protocol T_COLL) bypasses the point-to-point
        matcher: the rank that needs one polls its forwarder link for that tag alone and
        takes it as it comes, in order per (context, sender); other waits that meet one keep
        it for later (`_engine.crossings.Crossings`, one per rank). Every rank makes the same
        collective calls in the same order on a communicator, so nothing needs matching;
        each crossing carries its sender's call number, which is checked.
Rule 2: a part whose size only its sender knows is a crossing when small, else a message
        through the matcher on the communicator's collective context; its receiver takes
        whichever comes (`sized`). Each side picks the way by its own size, so arguments that
        disagree across the eager size fail on the side left waiting instead of hanging.
Rule 3: the steps of a collective are generators that yield what they wait for (native
        requests, operations, crossings); `wait` resolves one at once (blocking calls),
        `ready` tells without waiting (non-blocking calls, see `_collectives.run`).
"""

from __future__ import annotations

import pickle
from typing import TYPE_CHECKING

import numpy as np

from .._engine.op import PENDING, Op
from .._startup.native import MPI
from ..errors import RootError

if TYPE_CHECKING:
    from .._api.core import Core

_SCRATCH_MAX = 64 << 20  # larger collective temporaries are not kept


class CrossRecv:
    """A collective's wait for the next crossing from one rank: `wait()` or `ready()`.

    Both give the payload, or None for a `sized` part that came through the matcher.
    """

    __slots__ = ("coll", "source", "tag", "sized", "call", "got")

    def __init__(self, coll: Coll, source: int, tag: int, sized: bool = False) -> None:
        self.coll, self.source, self.tag, self.sized = coll, source, tag, sized
        self.call = coll.call
        self.got = PENDING  # the crossing, once `ready` has found it

    def _check(self, crossing):
        if crossing is None:
            return None
        sent, call, data = crossing
        if sent != self.tag or call != self.call:
            c = self.coll
            raise c.crossings.other_call(c.name, self.source, sent, call, self.tag, self.call)
        return data

    def _first(self):
        c = self.coll
        if not (self.sized or c.crossings.kept):
            return PENDING
        return c.crossings.after_drain(c.ctx, self.source, self.tag, c.name, self.sized,
                                       self.call)

    def wait(self):
        got = self._first()
        if got is PENDING:
            c = self.coll
            got = c.crossings.await_crossing(c.ctx, self.source, self.tag, c.name, self.sized,
                                             self.call)
        return self._check(got)

    def ready(self):
        c = self.coll
        got = self.got
        if got is PENDING:
            got = self._first()
        if got is PENDING:
            c.engine.progress()
            got = c.crossings.after_drain(c.ctx, self.source, self.tag, c.name, self.sized,
                                          self.call)
            if got is PENDING:
                return PENDING
        self.got = got
        return self._check(got)


class Coll:
    """One communicator's collective context: who is who across the zipper, and the moves.

    Built once per communicator (every field but `name` and `call` is fixed); ranks are the
    communicator's. `first`: this cluster's ranks come first in rank order (reductions
    combine first-block op second-block, so results are the same on every rank).
    """

    __slots__ = ("engine", "crossings", "p2p", "core", "ctx", "local", "first", "base",
                 "nmine", "obase", "nother", "size", "lrank", "rank", "leader", "peer",
                 "mine", "theirs", "contiguous", "name", "call", "_scratch", "_check")

    def __init__(self, core: Core) -> None:
        e = core.engine
        self.engine, self.crossings, self.p2p = e, e.crossings, e.p2p
        self.core = core
        self.ctx = core.coll
        self.local = core.counted(e.monitor)  # the native communicator of this cluster's members
        self.size = core.size
        self.rank = core.rank
        mine, theirs = core.mine, core.theirs
        self.mine, self.theirs = mine, theirs  # this cluster's ranks and the other's
        # Both clusters' ranks each a block of consecutive ranks: what the block-moving
        # algorithms need (others take the generic ones).
        self.contiguous = core.contiguous
        self.nmine, self.nother = len(mine), len(theirs)
        self.base = mine[0]
        self.obase = theirs[0] if theirs else -1
        self.first = not theirs or mine[0] < theirs[0]
        self.lrank = self.local.Get_rank()
        self.leader = self.lrank == 0
        self.peer = self.obase  # the other cluster's leader
        self.name = ""  # the call's name, for errors
        self.call = 0  # the call's number on this communicator
        self._scratch: dict[int, bytearray] = {}
        self._check = None  # the collective check's buffer and persistent request (common)

    # cross-cluster point-to-point on the collective context
    def send(self, view, dest: int, tag: int) -> Op:
        return self.p2p.isend(self.ctx, memoryview(view).cast("B"), dest, tag)

    def recv(self, view, source: int, tag: int) -> Op:
        op = self.p2p.irecv(self.ctx, memoryview(view).cast("B"), source, tag, self.name)
        if self.crossings.kept:  # the sender's part may have come as a crossing (Rule 2)
            self.crossings.conflict(self.ctx, source, self.call)
        return op

    def recv_sized(self, source: int, tag: int) -> Op:
        """Receive bytes of a size the sender decides; see `received`."""
        return self.p2p.irecv(self.ctx, None, source, tag, self.name)

    @staticmethod
    def received(op: Op) -> memoryview:
        """The bytes a completed `recv_sized` operation brought (until `release`)."""
        return memoryview(op.obj).cast("B")

    @staticmethod
    def release(op: Op | None) -> None:
        """The bytes of a `recv_sized` operation are no longer needed (None: nothing to do)."""
        if op is not None:
            op.obj = None
            op.release()

    def small(self, nbytes: int) -> bool:
        """Whether a part of `nbytes` crosses as a crossing (Rule 1)."""
        return nbytes <= self.engine.eager_max

    def xsend(self, view, dest: int, tag: int) -> Op:
        return self.crossings.send(self.ctx, memoryview(view).cast("B"),
                                   self.ctx.world_of[dest], tag, self.call)

    def xrecv(self, source: int, tag: int) -> CrossRecv:
        return CrossRecv(self, source, tag)

    def xswap(self, mine, tag: int) -> CrossRecv:
        """The leaders' exchange of small parts: `mine` out now, the other's back (a wait)."""
        self.xsend(mine, self.peer, tag)  # complete at once
        return CrossRecv(self, self.peer, tag)

    def cross(self, view, dest: int, tag: int):
        """Send `view` to `dest` in the other cluster: a crossing if small, else a message."""
        return self.xsend(view, dest, tag) if self.small(len(view)) else \
            self.send(view, dest, tag)

    def take(self, into, source: int, tag: int):
        """Receive `source`'s part into `into` (its expected size); return the size it had.

        A crossing if `into` is small, else through the matcher (which refuses a larger
        part). A part of another size within the eager size is returned unused, for the
        caller's size check (Rule 2). A generator: `n = yield from c.take(...)`.
        """
        if self.small(len(into)):
            data = yield CrossRecv(self, source, tag)
            if len(data) == len(into):
                into[:] = data
            return len(data)
        op = self.recv(into, source, tag)
        yield op
        return op.nbytes

    def swap(self, mine, into, tag: int):
        """The leaders' exchange: `mine` to the other leader, its part into `into` (see take)."""
        if self.small(len(into)):
            s = self.cross(mine, self.peer, tag)
            n = yield from self.take(into, self.peer, tag)
            yield s
            return n
        op = self.recv(into, self.peer, tag)  # posted first: straight into `into`
        yield (op, self.cross(mine, self.peer, tag))
        return op.nbytes

    def take_sized(self, source: int, tag: int):
        """The bytes `source` sent with `cross`, and what to `release` after use (generator)."""
        data = yield CrossRecv(self, source, tag, sized=True)
        if data is not None:
            return data, None
        op = self.p2p.irecv(self.ctx, None, source, tag, self.name)
        yield op
        return self.received(op), op

    def send_obj(self, obj, dest: int, tag: int):
        return self.cross(dumps(obj), dest, tag)

    def recv_obj(self, source: int, tag: int):
        """The object that `source` sent with `send_obj` (a copy, as in mpi4py); generator."""
        data, op = yield from self.take_sized(source, tag)
        obj = pickle.loads(data)
        del data
        self.release(op)
        return obj

    def swap_obj(self, obj, tag: int):
        """The leaders' exchange of objects: `obj` out, the other leader's back (generator)."""
        s = self.send_obj(obj, self.peer, tag)
        theirs = yield from self.recv_obj(self.peer, tag)
        yield s
        return theirs

    def check_request(self, words: int):
        """The collective check's int64 buffer and its persistent allgather (made once).

        The buffer holds this rank's `words`, then every rank's. The allgather runs on the
        plain native communicator: the check is not the program's traffic, so the monitor
        does not count it.
        """
        if self._check is None:
            both = np.zeros(words * (self.nmine + 1), np.int64)
            req = self.ctx.comm.Allgather_init([both[:words], MPI.INT64_T],
                                               [both[words:], MPI.INT64_T])
            self._check = (both, req)
        return self._check

    def free_check(self) -> None:
        """Free the check's persistent request (its communicator is being freed)."""
        if self._check is not None:
            self._check[1].Free()
            self._check = None

    def tmp(self, slot: int, nbytes: int) -> memoryview:
        """A reusable temporary of `nbytes` (slot: one per buffer in a call).

        Fresh buffers are slow to communicate (docs/performance.md, "Buffers: reuse and fresh
        pages"). One call at a time runs on a communicator, so its slots serve every call;
        very large temporaries are not kept.
        """
        buf = self._scratch.get(slot)
        if buf is None or len(buf) < nbytes:
            buf = bytearray(nbytes)
            if nbytes <= _SCRATCH_MAX:
                self._scratch[slot] = buf
        return memoryview(buf)[:nbytes]

    def root(self, root) -> int:
        """`root` checked and as an int (mpi4py takes any integral number)."""
        if isinstance(root, (float, np.floating)) and float(root).is_integer():
            root = int(root)
        if not isinstance(root, (int, np.integer)) or not 0 <= root < self.size:
            raise RootError(
                f"{self.name} on rank {self.rank}: root {root!r} is out of range for a "
                f"communicator of size {self.size}"
            )
        return int(root)

    def here(self, rank: int) -> bool:
        """Whether communicator rank `rank` is in this cluster."""
        return self.ctx.local_of[rank] >= 0

    def local_of(self, rank: int) -> int:
        """The native rank of `rank` (in this cluster) in `local`."""
        return self.ctx.local_of[rank]


def dumps(obj) -> bytes:
    return pickle.dumps(obj, pickle.HIGHEST_PROTOCOL)


__all__ = ["CrossRecv", "Coll", "PENDING", "dumps"]
