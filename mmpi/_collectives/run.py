"""Running a collective call's steps: to the end at once (blocking), or a little on every poll.

Rule: on one communicator, collective calls run one after the other, in call order, on every
rank: a non-blocking call starts its steps only once the calls before it have completed, and
a blocking call first completes those. Every rank then issues the same native collectives in
the same order on the cluster's native communicator (MPI requires it), and crossings come in
call order (`transport` Rule 1). Calls on different communicators overlap freely.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import TYPE_CHECKING

from .._engine.op import PENDING, Op
from .._startup.native import MPI
from .compiled import Call
from .direct import Direct
from .transport import CrossRecv

if TYPE_CHECKING:
    from .._api.core import Core
    from .._engine.engine import Engine

_Request = MPI.Request
_NATIVE = (MPI.Request, MPI.Prequest)  # what a step may yield to wait for natively


def wait(engine: Engine, w):
    """Wait for what a step yielded; return its value (a crossing's payload, else None)."""
    t = type(w)
    if t in _NATIVE:
        if not w.Test():
            engine.wait_one(w)
        return None
    if t is CrossRecv:
        return w.wait()
    if t is Op or (t is not tuple and isinstance(w, Op)):  # Pending: another call's steps
        if not w.done:
            engine.wait_for(w.poll, w.remote)
        if w.error is not None:
            raise w.error
        return None
    natives = [r for r in w if type(r) is _Request]
    ours = [r for r in w if isinstance(r, Op)]
    if natives:
        engine.wait_all(natives)
    if ours:
        engine.wait_for(lambda: all([o.poll() for o in ours]))
        for o in ours:
            if o.error is not None:
                raise o.error
    return None


def ready(w):
    """What a step yielded, if it is over now (its value), else PENDING."""
    t = type(w)
    if t in _NATIVE:
        return None if w.Test() else PENDING
    if t is CrossRecv:
        return w.ready()
    if t is Op or (t is not tuple and isinstance(w, Op)):
        if not w.poll():
            return PENDING
        if w.error is not None:
            raise w.error
        return None
    natives = [r for r in w if type(r) is _Request]
    ours = [r for r in w if isinstance(r, Op)]
    if natives and not _Request.Testall(natives):
        return PENDING
    if not all([o.poll() for o in ours]):
        return PENDING
    for o in ours:
        if o.error is not None:
            raise o.error
    return None


def blocking(core: Core, name: str, steps: Generator | Call | Direct):
    """Run a collective call's `steps` on `core` to the end; return their result.

    `steps` may be a compiled call instead (`compiled.Call`), which runs them in C if it can,
    or a `direct.Direct` Alltoall, which runs them in one C call if it can.
    """
    if core.pending:
        core.flush()
    core.start(name)
    e = core.engine
    e.departures.enter(core)
    try:
        if type(steps) is Call or type(steps) is Direct:
            if steps.run():
                result = None
            else:
                result = _drive(e, steps.reference())
        else:
            result = _drive(e, steps)
    finally:
        e.departures.leave()
    core.calls += 1
    return result


def _drive(e: Engine, steps: Generator):
    """Run `steps` to the end, waiting for what each yields; their result."""
    try:
        w = steps.send(None)
        while True:
            w = steps.send(wait(e, w))
    except StopIteration as stop:
        return stop.value


class Pending(Op):
    """A non-blocking collective call in flight: an operation whose `poll` runs its steps."""

    __slots__ = ("core", "name", "steps", "waiting", "started", "result")

    def __init__(self, core: Core, name: str, steps: Generator) -> None:
        super().__init__()
        self.core, self.name, self.steps = core, name, steps
        self.waiting = None  # what the current step waits for
        self.started = False
        self.result = None

    def poll(self) -> bool:
        if self.done:
            return True
        self.core.advance()
        return self.done

    def step(self) -> bool:
        """Advance as far as possible without waiting; True if anything moved."""
        core = self.core
        moved = False
        try:
            if not self.started:
                self.started = True
                core.start(self.name)
                self.waiting = self.steps.send(None)
                moved = True
            if core.engine.gone:
                error = core.engine.departures.collective_gone(core, core.calls, self.name)
                if error is not None:
                    raise error
            while True:
                got = ready(self.waiting)
                if got is PENDING:
                    return moved
                moved = True
                self.waiting = self.steps.send(got)
        except StopIteration as stop:
            self.result = stop.value
            self.done = True
            core.calls += 1
        except Exception as exc:  # noqa: BLE001 - the call's error, raised at its Wait
            self.fail(exc)
            self.done = True
        return True


__all__ = ["blocking", "Pending", "wait", "ready"]
