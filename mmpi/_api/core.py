"""A communicator as the engine and the collectives see it: a group of world ranks and contexts.

`COMM_WORLD` is the first one; every communicator made from it (see `create`) is another
`Core` over the same engine, with contexts of its own. The public classes in `comm.py` hold a
Core and check arguments; everything below them works in the communicator's ranks.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Generator

import numpy as np

from .._collectives.run import blocking
from .._collectives.transport import Coll
from .._engine import op as _op
from .._engine.buffers import KNOWN, PLAIN
from .._engine.context import Context
from .._engine.engine import Engine
from .._engine.matching import Posted
from .._startup.native import MPI
from ..errors import CommError
from .request import BridgedRequest

_made_ready: set = set()  # the lanes recv_setup was called on


def _compiled_posts(engine: Engine, ctx: Context, size: int) -> tuple:
    """`post(buf, rank, tag)` of Irecv's and Isend's common cases, compiled, or (None, None).

    The backend's lanes (mmpi/_backend/cpost.c); without them (the Python backend) every
    call takes the reference steps.
    """
    lanes = engine.lanes
    if lanes is None:
        return None, None
    if lanes not in _made_ready:
        lanes.recv_setup(_op.Op, _op.Op(matched=False), Posted, BridgedRequest, MPI.Request, _op,
                        PLAIN, MPI.ANY_SOURCE, MPI.ANY_TAG, _op.SENT, np.ndarray, MPI.Datatype,
                        KNOWN)
        _made_ready.add(lanes)
    p2p = engine.p2p
    receiver = lanes.Receiver(engine, ctx.queues.posted, ctx.queues.unexpected, ctx.local_of,
                             size, engine.tag_ub)
    sender = lanes.Sender(engine, p2p, p2p.fanout, tuple(ctx.world_of), ctx.local_of,
                         engine.handles, engine.vrank, ctx.id, p2p.eager_max, size,
                         engine.tag_ub)
    return receiver.post, sender.post


def _consecutive(ranks: tuple[int, ...]) -> bool:
    return not ranks or ranks[-1] - ranks[0] == len(ranks) - 1


class Core:
    """One communicator on this rank: its members, this rank, its two contexts, its calls."""

    def __init__(self, engine: Engine, members: tuple[int, ...], rank: int, p2p: Context,
                 coll: Context) -> None:
        self.engine = engine
        self.members = members  # world rank of each rank
        self.rank = rank
        self.size = len(members)
        self.p2p = p2p  # the user's point-to-point messages
        # Irecv's and Isend's common cases compiled, or None
        self.post_recv, self.post_send = _compiled_posts(engine, p2p, self.size)
        self.coll = coll  # the collectives' own messages
        self.mine = coll.from_local  # the ranks in this cluster, by native rank (ascending)
        self.theirs = tuple(r for r in range(self.size) if coll.local_of[r] < 0)
        self.contiguous = _consecutive(self.mine) and _consecutive(self.theirs)
        self.calls = 0  # collective calls completed on this communicator
        # small blocking Barrier, Bcast, Allreduce, Reduce compiled (_collectives.compiled):
        # None until the first compiled one, then the front or False
        self.front = None
        self.call_name = ""  # the collective call in progress, for errors
        self.pending: deque = deque()  # non-blocking collective calls, in call order
        self._collective: Coll | None = None
        self._advancing = False
        self.freed = False
        self.persistent = 0  # persistent requests made on it, not freed (see hold)
        self.starting = 0  # such a request's Start is under way (see check_live)
        self.locks: dict = {}  # the program's locks on this communicator (MPI._comm_lock)
        # [duplicate, last tag, ...] (MPI._commctx_intra, _commctx_inter)
        self.pickled_ctx: list | None = None
        engine.communicators.append(self)

    @property
    def spans(self) -> bool:
        """Whether both clusters have ranks in this communicator."""
        return bool(self.theirs)

    @property
    def collective(self) -> Coll:
        """The collectives' view of this communicator (made on first use)."""
        c = self._collective
        if c is None:
            c = self._collective = Coll(self)
        return c

    def counted(self, monitor):
        """The collectives' native communicator, counting their data if `monitor` is set."""
        if monitor is None:
            return self.coll.comm
        from .._engine.monitor import Counting

        return Counting(self.coll.comm, [self.members[r] for r in self.mine], monitor)

    def recount(self, monitor) -> None:
        """Monitoring was switched: the collectives use the counting communicator or not."""
        if self._collective is not None:
            self._collective.local = self.counted(monitor)

    def start(self, name: str) -> Coll:
        """A collective call `name` starts its steps now."""
        c = self.collective
        c.name = self.call_name = name
        c.call = self.calls
        return c

    # -- non-blocking collective calls (see _collectives.run) ---------------------------
    def submit(self, pending) -> None:
        """Queue a non-blocking collective call; it runs once those before it have."""
        self.pending.append(pending)
        if len(self.pending) == 1:
            self.engine.background.append(self.advance)
        _op.NEW_WORK = True  # for a progress thread (see _runtime.progress)
        self.advance()

    def advance(self) -> bool:
        """Run the queued calls as far as they go without waiting; True if any moved.

        A step may progress the engine, which advances the background work, this among it:
        that inner call returns at once (a generator cannot be re-entered).
        """
        if self._advancing:
            return False
        self._advancing = True
        moved = False
        try:
            while self.pending:
                head = self.pending[0]
                if head.step():
                    moved = True
                if not head.done:
                    break
                self.pending.popleft()
        finally:
            self._advancing = False
        if not self.pending and self.advance in self.engine.background:
            self.engine.background.remove(self.advance)
        return moved

    def flush(self) -> None:
        """Complete every queued non-blocking call (a blocking one is about to run)."""
        while self.pending:
            last = self.pending[-1]
            self.engine.wait_for(last.poll)

    def run(self, name: str, steps: Generator):
        """Run a blocking collective call's steps to the end (see _collectives.run)."""
        return blocking(self, name, steps)

    def check_open(self, call: str) -> None:
        """Raise if the program has freed this communicator.

        As `check_live`, whether MPI is finalized or not: for a query such as Get_size.
        """
        if self.freed and not self.starting:
            raise CommError(f"{call} on rank {self.rank}: the communicator was freed "
                            "(it is MPI.COMM_NULL now; MPI_ERR_COMM)")

    def check_live(self, call: str) -> Engine:
        """The engine, if `call` may run on this communicator; else raise why not.

        Not after MPI's finalize (the engine says so), nor once the program has freed the
        communicator: mpi4py's freed communicator is `MPI.COMM_NULL`, which refuses calls. A
        persistent request made on it before still starts (`starting`), as natively.
        """
        e = self.engine
        if e.finalized:
            e.check()
        self.check_open(call)
        return e

    # -- freeing -------------------------------------------------------------------------
    def free(self) -> None:
        """Mark this communicator freed; release it once nothing is pending on it.

        MPI lets a program free a communicator with calls still pending on it, which then
        complete normally: until they have, its contexts keep receiving (a background step
        releases them).
        """
        if self.freed:
            return
        self.freed = True
        self.post_recv = self.post_send = None  # a call now takes the Python path, which refuses
        self.front = False  # its check's request goes with the release
        e = self.engine
        if self in e.communicators:
            e.communicators.remove(self)
        self._release_soon()

    def hold(self, by: int) -> None:
        """A persistent request on this communicator was made (+1) or freed (-1).

        Until the last is freed, a freed communicator stays (MPI: its requests may still
        start); then it goes as `free` would have let it.
        """
        self.persistent += by
        if self.freed and not self.persistent:
            self._release_soon()

    def _release_soon(self) -> None:
        e = self.engine
        if (self.persistent or self.busy()) and not e.finalized:
            e.retired(self.coll.id, self.calls)  # in case finalize comes before the release
            if not self.persistent:  # else the last one's `hold(-1)` calls again
                e.background.append(self._release_when_idle)
            return
        self.release()

    def busy(self) -> bool:
        """Whether calls on this communicator are pending.

        Collectives, posted receives, synchronous sends within the cluster not acknowledged
        yet (the answer comes on it).
        """
        if self.pending or self.p2p.queues.posted or self.coll.queues.posted:
            return True
        ids = (self.p2p.id, self.coll.id)
        return any(type(k) is tuple and k[0] in ids for k in self.engine.p2p.syncs)

    def _release_when_idle(self) -> bool:
        if not (self.busy() and not self.engine.finalized):
            self.engine.background.remove(self._release_when_idle)
            self.release()
        return False

    def release(self) -> None:
        """Stop receiving on this communicator's contexts and release its native ones."""
        finalized = self.engine.finalized
        self.engine.retired(self.coll.id, self.calls)
        if self._collective is not None and not finalized:
            self._collective.free_check()
        for ctx in (self.p2p, self.coll):
            self.engine.unregister(ctx)
            if not finalized:
                ctx.comm.Free()


def world(engine: Engine) -> Core:
    """The bridged COMM_WORLD: every world rank, contexts 0 (point-to-point) and 1."""
    lay = engine.layout
    members = tuple(range(lay.size))
    here = lay.vranks(engine.cluster)
    p2p = Context(0, engine.local.Dup(), members, here)
    coll = Context(1, engine.local.Dup(), members, here, "coll")
    engine.register(p2p)
    engine.register(coll)
    return Core(engine, members, engine.vrank, p2p, coll)


__all__ = ["Core", "world"]
