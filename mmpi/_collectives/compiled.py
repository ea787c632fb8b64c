"""Small blocking Barrier and Allreduce in one compiled call (`_ccoll.c`), where built.

The same steps as `reductions.barrier` and `reductions._allreduce_plain` (the reference, and
what runs wherever this does not): the check, the native reduce, the leaders' crossing and
the native bcast or barrier, with no interpreted step between them. On shared cores the
interpreted steps and waits made each turn a waiting rank takes on the CPU several times
longer (docs/performance.md, "Small collectives").

Rule: this path runs only where it does exactly what the reference does: a blocking call, the
compiled rank path on, no monitor counting the collectives' data, no crossing kept for this
communicator's peer already (it would come first). Anything out of the ordinary in a call (a
mismatch, a crossing of another call) is raised with the reference's own errors.
"""

from __future__ import annotations

import time

import numpy as np

from .._crossing import Coll
from ..wire import protocol as P
from ..wire.backoff import Backoff
from ._base import T_ALLREDUCE, T_BARRIER, WORDS, checking, same_size, start_check, verify_check

_NO_WORDS = np.zeros(WORDS, np.int64)  # a Barrier without the check
_NATIVE_DRAIN = 1e-3  # as _engine's waits: drains and liveness once per millisecond
_now = time.perf_counter


def built(c: Coll) -> bool:
    """Whether this rank has the compiled small collectives (an older build may not)."""
    return getattr(c.engine.fast, "small_coll", None) is not None


class Call:
    """A blocking call that may run as one compiled call (`_run.blocking` runs it).

    `run()` when its turn comes: False if this call cannot take the compiled path (Rule),
    whose steps `reference()` then gives.
    """

    __slots__ = ("c", "reference", "allreduce", "args")

    def __init__(self, c: Coll, reference, allreduce: bool, *args) -> None:
        self.c, self.reference, self.allreduce, self.args = c, reference, allreduce, args

    def run(self) -> bool:
        c = self.c
        small_coll = _usable(c)
        if small_coll is None:
            return False
        _run(c, small_coll, self.allreduce, *self.args)
        return True


def _usable(c: Coll):
    """`small_coll` if this call may take the compiled path, else None (Rule)."""
    e = c.engine
    if e.crossings.monitor is not None or c.local is not c.ctx.comm:
        return None
    if c.leader and e.crossings.kept.get((c.ctx.id, c.ctx.world_of[c.peer])):
        return None
    return e.fast.small_coll


class _Idle:
    """The engine's say in a long compiled wait: `idle(n, crossing)`, n from 0 in each wait.

    Its back-off (True while it naps), a drain and the liveness check once per millisecond;
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
            self.drain_at = _now() + _NATIVE_DRAIN
        if _now() >= self.drain_at:
            if e.progress():
                self.backoff.reset()
            if crossing:
                got = e.crossings.take_kept(self.key)
                if got is not None:
                    return got
            e.alive(self.since)
            self.drain_at = _now() + _NATIVE_DRAIN
        self.backoff.idle()
        return True if self.backoff.napping() else None


def _run(c: Coll, small_coll, allreduce: bool, sendbuf=None, recvbuf=None, dt=None,
         op=None) -> None:
    """One call's steps in C; the reference's errors for what C hands back."""
    e = c.engine
    if e.p2p.fanout.held:
        e.p2p.fanout.flush()
    if checking(c):
        words, req = start_check(c, -1, recvbuf.nbytes if allreduce else -1)
        check = req.handle
    else:
        words, check = _NO_WORDS, 0
    key = None
    link = me = peer = 0
    if c.leader:
        peer = c.ctx.world_of[c.peer]
        key = (c.ctx.id, peer)
        link = e.handles[P.route(e.vrank, peer, e.nfwd)]
        me = e.vrank
    got = small_coll(
        c.local.handle, check, words, WORDS, c.nmine, True, allreduce,
        sendbuf, recvbuf, recvbuf.size if allreduce else 0,
        dt.handle if allreduce else 0, op.handle if allreduce else 0,
        link, me, peer, c.ctx.id, T_ALLREDUCE if allreduce else T_BARRIER, c.call,
        len(e.tests), len(e.first), _Idle(e, key), e.crossings.keep)
    if c.leader:
        e.heard[P.route(e.vrank, peer, e.nfwd)] = time.monotonic()
    if got is None:
        return
    if got[0] == 1:
        verify_check(c, words)
    elif got[0] == 2:
        raise e.crossings.other_call(c.name, c.peer, got[1], got[2],
                                     T_ALLREDUCE if allreduce else T_BARRIER, c.call)
    same_size(c, "data", recvbuf.nbytes, got[1])
