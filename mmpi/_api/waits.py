"""Waiting for and testing requests, one or a list of any mix: the helpers of `request`.

A list may mix native requests (mpi4py's) and bridged ones (`request.Request` objects holding
an operation of the bridge, marked by the base `Bridged` here, so that this module needs
nothing of `request`). Every wait polls
the rank's engine with back-off (`_engine.engine` Rule 1): `bind` names it once the bridge
is joined.
"""

from __future__ import annotations

from .._startup.native import MPI
from ..errors import MMPIError

_native = MPI.Request
engine = None  # the rank's engine, set when the bridge is joined (read by request, _runtime.facade)


class Bridged:
    """The mark of mmpi's request class (request.Request's second base)."""

    __slots__ = ()


def bind(rank_engine) -> None:
    """Make waits on native requests poll `rank_engine` too (bridged mode)."""
    global engine
    engine = rank_engine


def wait_native(test, remote: bool = False) -> None:
    """Wait until `test()` holds, progressing the bridge meanwhile (if joined)."""
    if engine is None:
        while not test():
            pass
    else:
        engine.wait_for(test, remote)


def bridged(r) -> bool:
    """Whether `r` is a bridged request (mmpi's class holds native requests too: no `_op`)."""
    return isinstance(r, Bridged) and r._op is not None


def bridged_waitall(reqs: list) -> bool:
    """Waitall of bridged requests, no statuses: the commonest (a window of receives)."""
    for r in reqs:
        if not (r._op.done or r._consumed):
            ops = [q._op for q in reqs if not (q._op.done or q._consumed)]
            # receives from the other cluster alone: the first rounds watch the links only,
            # in C where they can (Engine.wait_plain), and often complete them all
            remote = all([op.remote for op in ops])
            if remote and engine is not None:
                engine.wait_plain(ops)
                if all([op.done for op in ops]):
                    break
            wait_native(all_done(reqs), remote)
            break
    error = None
    for r in reqs:
        if r._pickled:  # its value is dropped, its buffer given back
            try:
                r._result(None)
            except (MMPIError, MPI.Exception) as exc:
                error = error or exc
        elif not r._consumed:
            r._consumed = True
            error = error or r._op.error
    if error is not None:
        raise error
    return True


def natives_only(requests) -> bool:
    return not any(bridged(r) for r in requests)


def test(ready) -> bool:
    if engine is None:
        return ready()
    return engine.test(ready)


def active(r) -> bool:
    if r is None:
        return False
    if bridged(r):
        return not r._consumed
    return _native.__bool__(r)


def all_done(reqs: list):
    """A test for a wait: True once every request has completed.

    Every request not yet complete is tested on each poll (testing a large receive returns its
    sender's credit and frees its buffers: testing only the first pending one halved the 4 MiB
    bandwidth) up to the first receive still without a message, and a complete one is not
    tested again.
    """
    # each request's own test, bound once: a wait polls them many times
    pending = [(r._op.poll, r._op) if bridged(r) else (native_test(r), None) for r in reqs
               if r is not None and not (bridged(r) and r._consumed)]

    def ready() -> bool:
        rest = []
        for i, (done, op) in enumerate(pending):
            if done():
                continue
            rest.append((done, op))
            if op is not None and not op.matched:
                # a receive no message has come for yet: the ones after it wait their turn
                # (else each message that lands tests every receive of a window: quadratic)
                rest += pending[i + 1:]
                break
        pending[:] = rest
        return not pending

    return ready


def native_test(r):
    """A test of native request `r` that does not complete it."""
    return lambda: _native.Get_status(r)


def done(r) -> bool:
    """Whether `r` has completed (native: without completing it; None and inactive: yes)."""
    if r is None:
        return True
    if bridged(r):
        return r._consumed or r._op.poll()
    return _native.Get_status(r)


def peek(r, status) -> None:
    """Fill `status` from a completed request without completing it."""
    if bridged(r):
        r._fill(status)
    elif r is not None and status is not None:
        _native.Get_status(r, status)


def finish(r, status, obj: bool = False):
    """Complete a request known to be done: its status, its object (lowercase API)."""
    if r is None:
        return None
    if bridged(r):
        return r._result(status)
    if obj:
        return _native.wait(r, status)
    _native.Wait(r, status)
    return None
