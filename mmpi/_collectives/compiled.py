"""Small blocking Barrier, Allreduce, Bcast, Reduce in one compiled call (`_backend/ccoll.c`).

The same steps as `reductions.barrier`, `reductions._allreduce_plain`, `carried.bcast` and
`carried.reduce` (the reference, and what runs wherever this does not, the compiled rank path
not built among them): the check, the native reduce, the leaders' crossing and the native
bcast or barrier (a small Bcast or Reduce: the crossing and the check that carries the data),
with no interpreted step between them. On shared cores the
interpreted steps and waits made each turn a waiting rank takes on the CPU several times
longer (docs/performance.md, "Small collectives").

Rule: this path runs only where it does exactly what the reference does: a blocking call, the
compiled rank path on, no monitor counting the collectives' data, no crossing kept for this
call's sender already (it comes first). Anything out of the ordinary in a call (a
mismatch, a crossing of another call) is raised with the reference's own errors.
"""

from __future__ import annotations

import time

import numpy as np

from .._engine import buffers as _buffers
from .._startup.native import MPI
from ..wire import protocol as P
from ..wire.backoff import Backoff
from .common import (
    CARRY,
    CHECK,
    PREDEFINED_NAMES,
    REDUCE_VIA_RS,
    T_ALLREDUCE,
    T_BARRIER,
    T_BCAST,
    T_REDUCE,
    WORDS,
    checking,
    kind_named,
    same_size,
    start_check,
    verify_check,
)
from .transport import Coll

_NO_WORDS = np.zeros(WORDS, np.int64)  # a call without the check
_now = time.perf_counter


def built(c: Coll) -> bool:
    """Whether a call whose buffers were parsed just now may run compiled.

    This rank's backend has lanes (the compiled one), and parsing left no unpacks (a `Call`
    is no generator that `_api.coll_methods._unpacking` could follow with them).
    """
    return c.engine.lanes is not None and not _buffers.unpacks


BARRIER, ALLREDUCE, BCAST, REDUCE = 0, 1, 2, 3  # _backend/ccoll.c's modes
_TAGS = (T_BARRIER, T_ALLREDUCE, T_BCAST, T_REDUCE)
_NAMES = ("Barrier", "Allreduce", "Bcast", "Reduce")  # the front's, by mode


class Call:
    """A blocking call that may run as one compiled call (`run.blocking` runs it).

    `run()` when its turn comes: False if this call cannot take the compiled path (Rule),
    whose steps `reference()` then gives. `args`: Allreduce (sendbuf or None for in place,
    recvbuf, datatype, op); Bcast (the buffer's view, root); Reduce (the send view or None
    for in place, the root's receive view or None, count, datatype, op, root); Barrier none.
    """

    __slots__ = ("c", "reference", "mode", "args")

    def __init__(self, c: Coll, reference, mode: int, *args) -> None:
        self.c, self.reference, self.mode, self.args = c, reference, mode, args

    def run(self) -> bool:
        c = self.c
        e = c.engine
        if e.crossings.monitor is not None or c.local is not c.ctx.comm:
            return False
        source = _source(c, self.mode, self.args)
        if source is not None and e.crossings.kept.get((c.ctx.id, c.ctx.world_of[source])):
            return False  # it comes first, and is Python's to take
        _run(c, e.lanes.small_coll, self.mode, source, *self.args)
        return True


def _source(c: Coll, mode: int, args) -> int | None:
    """The rank whose crossing this rank takes in the call, if any."""
    if mode == BCAST:
        root = args[1]
        return root if c.leader and not c.here(root) else None
    if mode == REDUCE:
        return c.peer if c.rank == args[-1] else None
    return c.peer if c.leader else None


class _Idle:
    """The engine's say in a long compiled wait: `idle(n, crossing)`, n from 0 in each wait.

    Its back-off (True while it naps), a drain and the liveness check once per `drain_every`;
    in the crossing's wait (`crossing`) the crossing a drain kept, once there (n -1: only
    that, before the crossing's wait, if a drain may have run in an earlier wait).
    """

    __slots__ = ("engine", "key", "backoff", "since", "drain_at")

    def __init__(self, engine, key) -> None:
        self.engine, self.key = engine, key  # the rest when a wait first needs it

    def __call__(self, n: int, crossing: int):
        e = self.engine
        if n < 0:
            return e.crossings.take_kept(self.key)
        if n == 0:
            if e.broken is not None:
                raise e.broken
            self.backoff = Backoff()
            self.since = time.monotonic()
            self.drain_at = _now() + e.drain_every
        if _now() >= self.drain_at:
            if e.progress():
                self.backoff.reset()
            if crossing:
                got = e.crossings.take_kept(self.key)
                if got is not None:
                    return got
            e.alive(self.since)
            self.drain_at = _now() + e.drain_every
        self.backoff.idle()
        return True if self.backoff.napping() else None


def _run(c: Coll, small_coll, mode: int, source: int | None, *args) -> None:
    """One call's steps in C; the reference's errors for what C hands back."""
    e = c.engine
    if e.p2p.fanout.held:
        e.p2p.fanout.flush()
    sendbuf = recvbuf = None
    count = dt = op = 0
    sends, part, root, dest = False, 0, -1, None
    if mode == ALLREDUCE:
        sendbuf, recvbuf, dt, op = args
        count, nbytes, dt, op = recvbuf.size, recvbuf.nbytes, dt.handle, op.handle
    elif mode == BCAST:
        recvbuf, root = args
        nbytes = len(recvbuf)
        sends = c.rank == root
        part = c.local_of(root) if c.here(root) else 0
        if sends:
            dest = c.peer
    elif mode == REDUCE:
        sendbuf, recvbuf, count, dt, op, root = args
        nbytes = len(recvbuf if sendbuf is None else sendbuf)
        dt, op = dt.handle, op.handle
        part = c.rank == root if c.here(root) else c.leader  # it sums its cluster's parts
        sends = not c.here(root) and c.leader
        if sends:
            dest = root
    else:
        nbytes = -1
    if mode >= BCAST and c.nmine >= 2 or mode < BCAST and checking(c):
        words, req = start_check(c, root, nbytes)
        check = req.handle
    else:
        words, check = _NO_WORDS, 0
    link = peer = route = 0
    if source is not None or dest is not None:
        peer = c.ctx.world_of[source if dest is None else dest]
        route = P.route(e.vrank, peer, e.nfwd)
        link = e.handles[route]
    got = small_coll(
        mode, c.local.handle, check, words, WORDS, c.nmine, CHECK, sendbuf, recvbuf, count,
        dt, op, link, e.vrank, peer, c.ctx.id, _TAGS[mode], c.call, sends, part,
        len(e.tests), len(e.first),
        _Idle(e, None if source is None else (c.ctx.id, peer)), e.crossings.keep)
    if source is not None:
        e.heard[route] = time.monotonic()
    if got is not None:
        _fail(c, words, mode, got, nbytes, source)
    if c.core.front is None:
        c.core.front = front(c)


def _fail(c: Coll, words, mode: int, got: tuple, nbytes: int, source: int | None) -> None:
    """Raise the reference's error for what the compiled steps handed back."""
    if got[0] == 1:
        verify_check(c, words)
    elif got[0] == 2:
        raise c.crossings.other_call(c.name, source, got[1], got[2], _TAGS[mode], c.call)
    same_size(c, "data", nbytes, got[1])


def front(c: Coll):
    """The compiled front of c's small blocking collectives (_backend/cfront.c), or False.

    Made after this communicator's first compiled call, so that where its cluster checks its
    calls the check's persistent allgather is there already (made by every rank of the
    cluster in the same call: a collective of its own). Without the check (CHECK off) a Bcast
    would make it in a later call: no front then.
    """
    e = c.engine
    if e.lanes is None or not CHECK or c.local is not c.ctx.comm:
        return False
    words = check = None
    if c.nmine >= 2:
        words, req = c.check_request(WORDS)
        check = req.handle
    ops = tuple(getattr(MPI, name) for name in PREDEFINED_NAMES)
    return e.lanes.Front(
        core=c.core, coll=c, local=c.ctx.comm, engine=e, crossings=e.crossings,
        kept=e.crossings.kept, departures=e.departures, fanout=e.p2p.fanout,
        unpacks=_buffers.unpacks, heard=e.heard, ndarrays=_buffers.NDARRAYS, ndarray=np.ndarray,
        in_place=MPI.IN_PLACE, ops=ops, idle=_Idle, keep=e.crossings.keep,
        fail=lambda mode, got, nbytes, source: _fail(c, words, mode, got, nbytes,
                                                     None if source < 0 else source),
        world_of=tuple(c.ctx.world_of), local_of=tuple(c.ctx.local_of),
        handles=e.handles, words=words, names=_NAMES,
        local_handle=c.ctx.comm.handle, check_handle=check or 0, size=c.size, rank=c.rank,
        nmine=c.nmine, leader=c.leader, peer=c.peer, me=e.vrank, ctx=c.ctx.id, nfwd=e.nfwd,
        nwords=WORDS, verify=CHECK, checks=checking(c), carry=CARRY, eager_max=e.eager_max,
        split_from=REDUCE_VIA_RS, tests=len(e.tests), first=len(e.first),
        kinds=tuple(kind_named(n) for n in _NAMES), tags=_TAGS)
