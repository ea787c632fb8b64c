"""One-sided windows on a communicator across the zipper: operations as messages to the target.

Rule 1: a window has a communicator of its own (a Dup of the one it was made on). An
        operation is one message to its target there (tag T_REQ: a pickled tuple, the target
        datatype as byte runs, see `targets`), applied to the target's memory when the target
        serves (Rule 2). A Get's data, a fetch's result and every acknowledgement come back
        with tag T_REPLY; MPI's order between two ranks keeps a target's replies in request
        order, so each origin expects them in a queue per target.
Rule 2: a rank serves its windows whenever the bridge makes progress: in any mmpi call and
        wait, and all along with a progress thread (MMPI_PROGRESS). A passive-target epoch
        needs nothing else of the target's program; without a thread, a target that makes no
        call delays its origins until it does (MPI allows such weak progress).
Rule 3: a dynamic window's memory is the regions each rank attaches (regions.py).
Rule 4: an operation on this rank's own window is applied in the call, as a native window
        does: a message to itself would wait for the next progress, and an operation of
        another origin that arrived meanwhile would be applied first (mpi4py.util.sync's
        mutex resets its own queue link that way and loses its successor's note).
Rule 5: Fence: each rank learns how many operations of the epoch target it (a reduce-scatter
        of the counts; each operation carries its epoch), serves until it has applied them,
        and collects its own Gets' data; an operation of the next epoch, from an origin out
        of the Fence first, waits until this rank is out too. Lock: a request the target
        grants when it can (shared or exclusive, in arrival order); Unlock and Flush wait
        for an acknowledgement the target sends once it has applied what came before. Post
        sends a note to each origin, Start waits for them; Complete sends one to each target
        after its operations and waits for the target's acknowledgement (so a target's Test
        after any later synchronisation sees it), Wait serves until every origin's has come.
Rule 6: an operation another rank asked for that is wrong here (bytes outside a dynamic
        window's attached memory) is served all the same - counted for its Fence, a fetch
        answered with the error - and its error raised by the synchronisation on this rank
        that ends the operation's epoch (the origin's too, for a fetch). Served inside
        whatever call of this rank made progress (another collective, an earlier Fence for
        an operation of the next epoch), it must not end that call: the rank would leave its
        peers waiting for ever in a collective it left halfway or skipped.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from .. import errors
from .._api.message import Message
from .._api.request import BridgedRequest
from .._engine import buffers as _buffers
from .._engine.op import PENDING, SENT
from .._startup.native import MPI
from ..errors import MMPIError, NotBridged, RankError, UsageError
from . import targets as _rma
from .regions import Regions

T_REQ, T_REPLY, T_POST = 1, 2, 3  # T_POST: Post's note to an origin (Rule 5)
_NO_EPOCH = -1  # operations of a passive-target epoch: no Fence counts them
_REFUSED = "mmpi-refused"  # a reply that is a target's error: (_REFUSED, class name, text)


def create_across(comm, memory, disp_unit: int, flavor: int) -> BridgedWin:
    """A window of `memory` (bytes, writable) on `comm`, a bridged communicator across."""
    if disp_unit <= 0:
        raise UsageError(f"Win.Create: disp_unit must be positive, got {disp_unit}")
    d = comm.Dup()
    shape = d.allgather((disp_unit, len(memory)))
    return BridgedWin(d, memory, [u for u, _ in shape], [n for _, n in shape], flavor)


class BridgedWin(MPI.Win):
    """An MPI.Win across the zipper (Rule 1): calls not written out here raise NotBridged."""

    def __new__(cls, comm, memory: memoryview, units, sizes, flavor: int):
        # a native window of this rank's memory on COMM_SELF lends its handle: mpi4py's buffer
        # protocol (memoryview(win), as mpi4py.util.sync uses) reads memory through it
        own = MPI.Win.Create_dynamic(comm=MPI.COMM_SELF) if flavor == MPI.WIN_FLAVOR_DYNAMIC \
            else MPI.Win.Create(memory if len(memory) else MPI.BOTTOM, 1, comm=MPI.COMM_SELF)
        self = super().__new__(cls, own)
        self._own = own
        return self

    def __init__(self, comm, memory: memoryview, units: list, sizes: list, flavor: int):
        self._comm = comm
        self._mem = memory
        self._units, self._sizes, self._flavor = units, sizes, flavor
        self._regions = Regions() if flavor == MPI.WIN_FLAVOR_DYNAMIC else None
        self._rank, self._size = comm.Get_rank(), comm.Get_size()
        self._name = ""
        self._errhandler = MPI.ERRORS_RETURN
        self._epoch = 0  # Fences so far: the active-target epoch operations carry
        self._sent = [0] * self._size  # operations sent in this Fence epoch, per target
        self._served: dict[int, int] = {}  # epoch -> operations applied here
        self._early: list = []  # operations of an epoch this rank's Fence has not opened yet
        self._expect = [deque() for _ in range(self._size)]  # per target: reply handlers
        self._exclusive = None  # lock state here: exclusive holder, shared holders, queue
        self._shared = 0
        self._queue: deque = deque()
        self._waiting: dict[int, list] = {}  # origins whose lock is not granted yet: what they
        #                                      sent after the request, applied once it is
        self._origins = 0  # PSCW: origins posted to, and the completes come from them
        self._completes = 0
        self._targets: list[int] = []
        self._locked: set[int] = set()  # targets of this rank's passive (or PSCW) epochs
        self._serving = False
        # The first error in an operation another rank asked of this one (Rule 6)
        self._fault: Exception | None = None
        self._outbox: list = []  # sends not known to be complete (Rule 1)
        self._engine = comm._core.engine
        # what _serve looks for, worked out once: it runs on every progress of the bridge
        _, self._any, self._req = comm._peek(MPI.ANY_SOURCE, T_REQ, "Win")
        self._ctx = comm._core.p2p
        self._engine.background.append(self._serve)

    # -- the target's side (Rule 2) ---------------------------------------------------
    def _serve(self) -> bool:
        # never inside itself: a wait in the middle of one request (a reply's send) must not
        # apply the next before it, or a target would not keep each origin's order
        if self._serving or self._comm is None:
            return False
        self._serving = True
        did = False
        try:
            # what has arrived, taken from the matcher as an improbe would, without the
            # progress and back-off of a program's probe: this runs inside progress
            ctx, p2p = self._ctx, self._engine.p2p
            while self._comm is not None:
                found = ctx.queues.peek(self._any, self._req)
                if found is None:
                    break
                self._take(found.source, Message(p2p.take(ctx, found), p2p, True).recv())
                did = True
        finally:
            self._serving = False
        return did

    def _post(self, what, to: int, tag: int) -> None:
        # never a blocking send: a rank's request to itself is served inside the send's wait
        req = self._comm.isend(what, dest=to, tag=tag)
        if not req.Test():
            self._outbox.append(req)
            if len(self._outbox) > 64:
                self._outbox = [r for r in self._outbox if not r.Test()]

    def _reply(self, to: int, what) -> None:
        if to == self._rank:  # to itself: handed over at once, in order (Rule 4)
            handle = self._expect[to].popleft()
            if not (isinstance(what, tuple) and what[:1] == (_REFUSED,)):  # (kept by _take)
                handle(what)
        else:
            self._post(what, to, T_REPLY)

    def _take(self, source: int, req: tuple) -> None:
        """Apply a request of `source`'s; an error in it is kept for later (Rule 6).

        A fetch is answered with the error, for its origin to raise.
        """
        try:
            self._apply(source, req)
        except MMPIError as exc:
            self._fault = self._fault or exc
            kind = req[0]
            if kind in ("put", "get", "acc", "cas") and req[1] != _NO_EPOCH:
                self._served[req[1]] = self._served.get(req[1], 0) + 1  # done with, all the same
            if kind in ("get", "cas") or (kind == "acc" and req[7]):
                # its origin waits for a reply: the error, by name (a bridged rank's error
                # classes are twins that pickle does not find)
                self._reply(source, (_REFUSED, type(exc).__name__, str(exc)))

    def _raise_fault(self) -> None:
        """Raise the error kept by `_take`, once."""
        fault, self._fault = self._fault, None
        if fault is not None:
            raise fault

    def _apply(self, source: int, req: tuple) -> None:
        kind = req[0]
        if source in self._waiting:  # its Lock returned at once; its epoch starts at the grant
            self._waiting[source].append(req)
            return
        if kind in ("put", "get", "acc", "cas") and req[1] > self._epoch:
            # an origin past the Fence this rank is still in: its epoch starts here later
            self._early.append((source, req))
            return
        if kind in ("put", "get", "acc"):
            epoch, runs = req[1], req[3]
            mem, at = self._at(source, req[2], _rma.reach(req[2], runs)[1])
            if kind == "put":
                _rma.put(mem, at, runs, req[4])
            elif kind == "get":
                self._reply(source, _rma.get(mem, at, runs))
            else:
                old = _rma.accumulate(mem, at, runs, req[4], MPI.Op.f2py(req[5]),
                                      _rma.from_wire(req[6]))
                if req[7]:
                    self._reply(source, old)
            if epoch != _NO_EPOCH:
                self._served[epoch] = self._served.get(epoch, 0) + 1
        elif kind == "cas":
            epoch = req[1]
            mem, at = self._at(source, req[2], req[2] + len(req[3]))
            self._reply(source, _rma.compare_and_swap(mem, at, len(req[3]), req[3], req[4]))
            if epoch != _NO_EPOCH:
                self._served[epoch] = self._served.get(epoch, 0) + 1
        elif kind == "lock":
            self._queue.append((source, req[1]))
            self._waiting[source] = []
            self._grant()
        elif kind == "unlock":
            if self._exclusive == source:
                self._exclusive = None
            else:
                self._shared -= 1
            self._reply(source, "done")
            self._grant()
        elif kind == "flush":
            self._reply(source, "done")
        elif kind == "complete":
            self._completes += 1
            self._reply(source, "done")

    def _at(self, source: int, at: int, hi: int) -> tuple[memoryview, int]:
        """The memory an operation's bytes at..hi lie in, and where `at` is in it."""
        if self._regions is None:
            return self._mem, at
        view, base = self._regions.find(at, hi, source, self._rank)
        return view, at - base

    def _grant(self) -> None:
        while self._queue and self._exclusive is None:
            source, exclusive = self._queue[0]
            if exclusive and self._shared:
                return
            self._queue.popleft()
            if exclusive:
                self._exclusive = source
            else:
                self._shared += 1
            self._reply(source, "granted")
            for later in self._waiting.pop(source, ()):
                self._take(source, later)

    def _wait_served(self, done) -> None:
        def poll():
            self._engine.progress()  # serves: _serve is one of its background steps
            return True if done() else PENDING

        if not done():  # a polite wait, the bridge drained now and then (Engine.wait_until)
            self._engine.wait_until(poll, lambda: True if done() else PENDING)

    # -- the origin's side ------------------------------------------------------------
    def _drain(self, target: int) -> None:
        """Take every reply `target` owes this rank, in order (Rule 1)."""
        expect = self._expect[target]
        if target == self._rank:  # its replies come at once, or at a lock's grant (Rule 4);
            self._engine.progress()  # the call serves the others all the same (Rule 2)
            self._wait_served(lambda: not expect)
            return
        while expect:
            got = self._comm.recv(source=target, tag=T_REPLY)
            handle = expect.popleft()
            if isinstance(got, tuple) and got[:1] == (_REFUSED,):  # the target's error
                self._fault = self._fault or getattr(errors, got[1], UsageError)(got[2])
            else:
                handle(got)

    def _send(self, target: int, req: tuple) -> None:
        if target == self._rank:
            self._apply(target, req)  # Rule 4
        else:
            self._post(req, target, T_REQ)

    def _ask(self, target: int, req: tuple) -> None:
        """Send a request the target acknowledges (lock, unlock, flush); `_drain` takes it."""
        self._expect[target].append(lambda _: None)
        self._send(target, req)

    def _epoch_of(self, target: int) -> int:
        """The epoch an operation to `target` belongs to (counted for the next Fence)."""
        if target in self._locked:
            return _NO_EPOCH
        self._sent[target] += 1
        return self._epoch

    def _where(self, name: str, target_rank: int, target, typed, spec):
        """(byte address, runs) of an operation's target part."""
        if not 0 <= target_rank < self._size:
            raise UsageError(f"Win.{name}: target rank {target_rank} is not in the window's "
                             f"group of {self._size}")
        own_dt = spec[-1] if isinstance(spec, (list, tuple)) and \
            isinstance(spec[-1], MPI.Datatype) else typed.dt
        own_count = typed.nbytes // max(own_dt.Get_size(), 1)
        if target is None:
            disp, count, dt = 0, own_count, own_dt
        elif isinstance(target, int):
            disp, count, dt = target, own_count, own_dt
        else:
            t = list(target)
            disp = t[0]
            count = t[1] if len(t) > 1 else own_count
            dt = t[2] if len(t) > 2 else own_dt
        try:
            runs = _rma.runs(dt, count)
        except ValueError as exc:
            raise NotBridged(f"Win.{name}: {exc} is not bridged across the zipper") from None
        at = disp * self._units[target_rank]
        lo, hi = _rma.reach(at, runs)
        if disp < 0 or lo < 0 or (hi > self._sizes[target_rank] and self._regions is None):
            raise UsageError(f"Win.{name}: target rank {target_rank}: displacement {disp}, "
                             f"{count} elements reach bytes {lo}..{hi} of a window of "
                             f"{self._sizes[target_rank]} bytes")
        if dt.Get_size() * count != typed.nbytes:
            raise UsageError(f"Win.{name}: the origin buffer has {typed.nbytes} bytes, the "
                             f"target part {dt.Get_size() * count}")
        return at, runs

    def _out(self, name: str, origin, target_rank: int, target, kind: str, tail) -> None:
        """Send an operation with `origin`'s data: (kind, epoch, at, runs, data, *tail(typed))."""
        typed = _buffers.as_typed(origin, writable=False, op=f"Win.{name}")
        at, runs = self._where(name, target_rank, target, typed, origin)
        self._send(target_rank, (kind, self._epoch_of(target_rank), at, runs,
                                 bytes(typed.view), *tail(typed)))

    def Put(self, origin, target_rank: int, target=None) -> None:
        """Put `origin` into the target's window (complete at the next synchronisation)."""
        self._live("Put")
        if target_rank != MPI.PROC_NULL:  # else nothing to do (MPI)
            self._out("Put", origin, target_rank, target, "put", lambda typed: ())

    def Get(self, origin, target_rank: int, target=None) -> None:
        """Get the target's data into `origin` (there at the next synchronisation)."""
        self._live("Get")
        if target_rank == MPI.PROC_NULL:  # nothing to do (MPI)
            return
        self._fetch("Get", origin, target_rank, target,
                    lambda epoch, at, runs, base: ("get", epoch, at, runs))

    def _fetch(self, name: str, into, target_rank: int, target, request) -> None:
        """An operation whose reply lands in `into`: request(epoch, at, runs, base)."""
        typed = _buffers.as_typed(into, writable=True, op=f"Win.{name}")
        unpacks = _buffers.take_unpacks()
        at, runs = self._where(name, target_rank, target, typed, into)
        view = typed.view

        def fill(data, view=view, unpacks=unpacks):
            view[:] = data
            for unpack in unpacks:
                unpack()

        self._expect[target_rank].append(fill)
        self._send(target_rank, request(self._epoch_of(target_rank), at, runs, typed.dt))

    def Accumulate(self, origin, target_rank: int, target=None, op=MPI.SUM) -> None:
        """Combine `origin` into the target's window with `op`."""
        self._live("Accumulate")
        if target_rank != MPI.PROC_NULL:  # else nothing to do (MPI)
            op = _rma.accumulating(op, "Accumulate")
            self._out("Accumulate", origin, target_rank, target, "acc",
                      lambda typed: (op.py2f(), _rma.wire_type(typed.dt), False))

    def Get_accumulate(self, origin, result, target_rank: int, target=None,
                       op=MPI.SUM) -> None:
        """Accumulate, and the target's data before it into `result`."""
        self._live("Get_accumulate")
        if target_rank == MPI.PROC_NULL:  # nothing to do (MPI)
            return
        op = _rma.accumulating(op, "Get_accumulate")
        data = b""
        if op != MPI.NO_OP and origin is not None:
            data = bytes(_buffers.as_typed(origin, writable=False,
                                           op="Win.Get_accumulate").view)
        self._fetch("Get_accumulate", result, target_rank, target,
                    lambda epoch, at, runs, base: ("acc", epoch, at, runs, data, op.py2f(),
                                                   _rma.wire_type(base), True))

    def Fetch_and_op(self, origin, result, target_rank: int, target_disp: int = 0,
                     op=MPI.SUM) -> None:
        """Combine one element into the target's window; its value before into `result`."""
        _one_each("Fetch_and_op", target_rank, origin=origin, result=result)
        self.Get_accumulate(None if op == MPI.NO_OP else origin, result, target_rank,
                            (target_disp,), op)

    def Compare_and_swap(self, origin, compare, result, target_rank: int,
                         target_disp: int = 0) -> None:
        """Swap one element at the target for `origin` if it equals `compare`."""
        self._live("Compare_and_swap")
        if target_rank == MPI.PROC_NULL:  # nothing to do (MPI)
            return
        new, old, typed = _one_each("Compare_and_swap", target_rank, origin=origin,
                                    compare=compare, result=result)
        at, _ = self._where("Compare_and_swap", target_rank, (target_disp,), typed, result)
        new, old, view = bytes(new.view), bytes(old.view), typed.view
        self._expect[target_rank].append(lambda got: view.__setitem__(slice(None), got))
        self._send(target_rank, ("cas", self._epoch_of(target_rank), at, old, new))

    def Rput(self, origin, target_rank: int, target=None) -> BridgedRequest:
        """Put, as a request (complete at once: the data is copied out)."""
        self.Put(origin, target_rank, target)
        return BridgedRequest.of(SENT)

    def Rget(self, origin, target_rank: int, target=None) -> BridgedRequest:
        """Get, as a request (complete when it returns: the data is waited for here)."""
        self.Get(origin, target_rank, target)
        self._drain(target_rank)
        self._raise_fault()
        return BridgedRequest.of(SENT)

    def Raccumulate(self, origin, target_rank: int, target=None, op=MPI.SUM):
        """Accumulate, as a request (complete at once)."""
        self.Accumulate(origin, target_rank, target, op)
        return BridgedRequest.of(SENT)

    def Rget_accumulate(self, origin, result, target_rank: int, target=None, op=MPI.SUM):
        """Get_accumulate, as a request (complete when it returns)."""
        self.Get_accumulate(origin, result, target_rank, target, op)
        self._drain(target_rank)
        self._raise_fault()
        return BridgedRequest.of(SENT)

    # -- the window itself ------------------------------------------------------------
    def Free(self) -> None:
        """Free the window (collective): nothing left to serve anywhere first."""
        comm = self._live("Free")
        for target in range(self._size):
            self._drain(target)
        MPI.Request.Waitall(self._outbox)
        comm.Barrier()
        self._serve()
        self._engine.background.remove(self._serve)
        self._comm = None
        comm.Free()
        self._own.Free()
        self._raise_fault()

    free = Free

    # -- synchronisation (Rule 5) -------------------------------------------------------
    def Fence(self, assertion: int = 0) -> None:
        """Close the epoch: every operation to and from this rank complete."""
        comm = self._live("Fence")
        counts = np.array(self._sent, np.int64)
        incoming = np.zeros(1, np.int64)
        comm.Reduce_scatter_block(counts, incoming, MPI.SUM)
        epoch, want = self._epoch, int(incoming[0])
        self._wait_served(lambda: self._served.get(epoch, 0) >= want)
        for target in range(self._size):
            self._drain(target)
        self._served.pop(epoch, None)
        self._sent = [0] * self._size
        self._epoch += 1
        fault, self._fault = self._fault, None  # this epoch's; the early ones' are the next's
        early, self._early = self._early, []
        for source, req in early:
            self._take(source, req)
        if fault is not None:
            raise fault

    def Lock(self, rank: int, lock_type: int = MPI.LOCK_EXCLUSIVE, assertion: int = 0):
        """Start a passive-target epoch at `rank`.

        It returns at once, as MPI allows: the target holds this rank's operations until it
        grants the lock, and Unlock (or Flush) waits for the grant with their replies; an
        epoch costs one round trip, not three.
        """
        self._live("Lock")
        if not 0 <= rank < self._size:
            raise UsageError(f"Win.Lock: rank {rank} is not in the window's group")
        self._ask(rank, ("lock", lock_type == MPI.LOCK_EXCLUSIVE))
        self._locked.add(rank)

    def Unlock(self, rank: int) -> None:
        """End the passive-target epoch at `rank`: its operations applied there."""
        self._live("Unlock")
        if rank not in self._locked:
            raise UsageError(f"Win.Unlock: rank {rank} is not locked by rank {self._rank}")
        self._ask(rank, ("unlock",))
        self._drain(rank)
        self._locked.discard(rank)
        self._raise_fault()

    def Lock_all(self, assertion: int = 0) -> None:
        """A shared lock at every rank."""
        self._live("Lock_all")
        for rank in range(self._size):
            self._ask(rank, ("lock", False))  # granted by the time Unlock_all drains (Lock)
        self._locked = set(range(self._size))

    def Unlock_all(self) -> None:
        """End the epoch Lock_all started."""
        self._live("Unlock_all")
        for rank in range(self._size):
            self._ask(rank, ("unlock",))
        for rank in range(self._size):
            self._drain(rank)
        self._locked = set()
        self._raise_fault()

    def Flush(self, rank: int) -> None:
        """Every operation of this rank to `rank` applied there."""
        self._live("Flush")
        self._ask(rank, ("flush",))
        self._drain(rank)
        self._raise_fault()

    Flush_local = Flush

    def Flush_all(self) -> None:
        """Flush to every rank."""
        for rank in range(self._size):
            self.Flush(rank)

    Flush_local_all = Flush_all

    def Sync(self) -> None:
        """The window's memory is the one copy (MPI.WIN_UNIFIED): what has come is applied.

        A program polling its own window with Sync sees the others' operations land.
        """
        self._live("Sync")
        self._engine.progress()

    def _ranks(self, group) -> list[int]:
        if group.Get_size() == 0:  # MPI.GROUP_EMPTY is mpi4py's own: nothing to translate
            return []
        mine = self._comm.Get_group()
        try:
            return list(group.Translate_ranks(list(range(group.Get_size())), mine))
        finally:
            mine.Free()

    def Post(self, group, assertion: int = 0) -> None:
        """Expose the window to the origins in `group`."""
        self._live("Post")
        origins = self._ranks(group)
        self._origins, self._completes = len(origins), 0
        for rank in origins:
            self._post(None, rank, T_POST)

    def Start(self, group, assertion: int = 0) -> None:
        """Start an access epoch to the targets in `group` (once they have posted)."""
        comm = self._live("Start")
        self._targets = self._ranks(group)
        for rank in self._targets:
            comm.recv(source=rank, tag=T_POST)
        self._locked = set(self._targets)  # their operations are not counted by a Fence

    def Complete(self) -> None:
        """End the access epoch Start began."""
        self._live("Complete")
        for rank in self._targets:  # acknowledged: a target's Test after this sees it
            self._ask(rank, ("complete",))
        for rank in self._targets:
            self._drain(rank)
        self._targets, self._locked = [], set()
        self._raise_fault()

    def Wait(self) -> None:
        """End the exposure epoch Post began: every origin's operations applied."""
        self._live("Wait")
        self._wait_served(lambda: self._completes >= self._origins)
        self._origins = self._completes = 0
        self._raise_fault()

    def Test(self) -> bool:
        """Whether the exposure epoch is over (then ended, as Wait)."""
        self._live("Test")
        self._serve()
        if self._completes < self._origins:
            return False
        self._origins = self._completes = 0
        self._raise_fault()
        return True

    # -- what the window shows of itself: memory, group, attributes, names ----------------
    def _live(self, name: str):
        if self._comm is None:
            raise UsageError(f"Win.{name}: the window has been freed")
        return self._comm

    def tomemory(self):
        """The window's memory on this rank."""
        self._live("tomemory")
        if self._flavor == MPI.WIN_FLAVOR_DYNAMIC:  # MPI_BOTTOM, as MPI says
            return MPI.buffer.fromaddress(0, 0)
        return MPI.buffer(self._mem)

    def Shared_query(self, rank: int):
        """(memory, disp_unit) of `rank`'s window memory, where this rank can load and store it.

        As MPI 4.1 says for a window not made by Allocate_shared: only this rank's own memory
        is so here (the others' may lie in the other cluster), so any other rank answers with
        size 0; MPI.PROC_NULL asks for the lowest rank with memory (size 0 unless it is this).
        """
        self._live("Shared_query")
        rank = int(rank)
        if rank == MPI.PROC_NULL:
            rank = next((r for r, n in enumerate(self._sizes) if n), MPI.PROC_NULL)
        elif not 0 <= rank < self._size:
            raise RankError(f"Win.Shared_query on rank {self._rank}: rank {rank} is not in the "
                            f"window's group of size {self._size}")
        if rank == self._rank:
            return MPI.buffer(self._mem), self._units[rank]
        return MPI.buffer.fromaddress(0, 0), self._units[rank] if rank >= 0 else 1

    def Get_group(self):
        """The group of the communicator the window was made on."""
        return self._live("Get_group").Get_group()

    def Get_attr(self, keyval: int):
        """WIN_BASE, WIN_SIZE, WIN_DISP_UNIT, WIN_CREATE_FLAVOR, WIN_MODEL."""
        self._live("Get_attr")
        if keyval == MPI.WIN_BASE:
            return MPI.Get_address(self._mem) if len(self._mem) else 0
        if keyval == MPI.WIN_SIZE:
            return len(self._mem)
        if keyval == MPI.WIN_DISP_UNIT:
            return self._units[self._rank]
        if keyval == MPI.WIN_CREATE_FLAVOR:
            return self._flavor
        if keyval == MPI.WIN_MODEL:
            return MPI.WIN_UNIFIED
        raise NotBridged("Win.Get_attr: attributes of a program's own keyvals are not "
                         "bridged on a window across the zipper")

    def Get_info(self):
        """An empty info object: the window keeps no hints."""
        return MPI.Info.Create()

    def Set_info(self, info) -> None:
        """Hints are accepted and not acted on."""

    def Get_name(self) -> str:
        """The window's name."""
        return self._name

    def Set_name(self, name: str) -> None:
        """Name the window."""
        self._name = name

    def Get_errhandler(self):
        """The window's error handler (a new handle, as MPI gives: the caller frees it)."""
        return MPI.Errhandler(self._errhandler)

    def Set_errhandler(self, errhandler) -> None:
        """Errors raise unless ERRORS_ARE_FATAL/ABORT is set (then the job ends).

        The window keeps a handle of its own, as MPI does: freeing the caller's leaves it.
        """
        self._errhandler = MPI.Errhandler(errhandler)

    def __reduce__(self):
        raise ValueError("cannot serialize 'mpi4py.MPI.Win' instance")

    def __bool__(self) -> bool:
        return self._comm is not None

    def __eq__(self, other) -> bool:
        if other is self:
            return True
        return self._comm is None and isinstance(other, MPI.Win) and not other

    def __ne__(self, other) -> bool:
        return not self == other

    # -- a dynamic window's memory (regions.py) ----------------------------------------
    def Attach(self, memory) -> None:
        """Expose `memory` in this dynamic window, at its address (Rule 1)."""
        self._dynamic("Attach").attach(_buffers.as_view(memory, writable=True, op="Attach"))

    def Detach(self, memory) -> None:
        """Stop exposing `memory` in this dynamic window."""
        self._dynamic("Detach").detach(_buffers.as_view(memory, writable=True, op="Detach"),
                                       self._rank)

    def _dynamic(self, name: str) -> Regions:
        self._live(name)
        if self._regions is None:
            raise UsageError(f"Win.{name}: the window was not made by Win.Create_dynamic")
        return self._regions

    __hash__ = object.__hash__

    group = property(Get_group)
    group_size = property(lambda self: self._size)
    group_rank = property(lambda self: self._rank)
    flavor = property(lambda self: self._flavor)
    model = property(lambda self: MPI.WIN_UNIFIED)
    name = property(Get_name, Set_name)
    info = property(Get_info, Set_info)
    attrs = property(lambda self: (self.Get_attr(MPI.WIN_BASE), len(self._mem),
                                   self._units[self._rank]))


def stub_the_rest(cls: type) -> None:
    """Every instance method of mpi4py's Win that `cls` lacks raises NotBridged by name."""
    own = set().union(*(vars(k) for k in cls.__mro__ if k.__module__.startswith("mmpi")))
    for name in dir(MPI.Win):
        raw = MPI.Win.__dict__.get(name)
        if not name.startswith("_") and name not in own and callable(raw) \
                and not isinstance(raw, (classmethod, staticmethod)):
            setattr(cls, name, _not_bridged(name))


def _not_bridged(name: str):
    def call(self, *args, **kwargs):
        raise NotBridged(f"Win.{name} is not bridged on a window across the zipper")

    call.__name__ = name
    return call

stub_the_rest(BridgedWin)


def _one_each(call: str, rank: int, **bufs) -> list:
    """mpi4py's checks of the atomic calls: one element in each buffer, of one datatype.

    Returns the buffers parsed (`_engine.buffers.Typed`), in the order given; none for PROC_NULL.
    """
    if rank == MPI.PROC_NULL:
        return []
    typed = [_buffers.as_typed(spec, writable=name == "result", op=f"Win.{call}")
             for name, spec in bufs.items()]
    names = list(bufs)
    for name, t in zip(names, typed, strict=True):
        if t.count != 1:
            raise UsageError(f"Win.{call}: {name}: expecting a single element, got {t.count}")
        if t.dt != typed[0].dt:
            raise UsageError(f"Win.{call}: mismatch in {names[0]} and {name} MPI datatypes")
    return typed


__all__ = ["BridgedWin", "create_across"]
