"""Requests of the bridged world: mpi4py's `MPI.Request` API over bridged and native operations.

`Request` is what `MPI.Request` names under mmpi-run: a subclass of mpi4py's own, so a native
request (from `COMM_SELF`, say) is still one (`isinstance` holds for both), `MPI.Request()` is
the null request, and the class methods (`Waitall`, `Testany`, ...) take any mix of native and
bridged requests. A `BridgedRequest` is one operation of the bridge (an `_op.Op`, or a
non-blocking collective call); its handle is MPI_REQUEST_NULL, its methods are ours. Every
wait polls the engine with back-off (see `_engine` Rule 1).
"""

from __future__ import annotations

import pickle
from collections.abc import Sequence

from ._native import MPI
from ._native_lists import natively as _natively
from ._op import Op, empty_status, fill_status, status_at
from ._standin import StandIn, dispatch_unbound, pickle_natively
from .errors import MMPIError

_native = MPI.Request
_new = _native.__new__
_engine = None  # the rank's engine, set when the bridge is joined


def bind(engine) -> None:
    """Make waits on native requests poll `engine` too (bridged mode)."""
    global _engine
    _engine = engine


def _wait_native(test, remote: bool = False) -> None:
    if _engine is None:
        while not test():
            pass
    else:
        _engine.wait_for(test, remote)


def _bridged(r) -> bool:
    return isinstance(r, BridgedRequest)


class Request(_native, metaclass=StandIn):
    """A non-blocking operation: a native MPI request, or one of the bridge (mpi4py's API)."""

    _stands_for = _native

    # -- one request, native: polite waits -----------------------------------------------
    def Wait(self, status: MPI.Status | None = None) -> bool:
        """Wait for this request to complete."""
        if isinstance(self, BridgedRequest):
            return type(self).Wait(self, status)
        _wait_native(lambda: _native.Test(self, status))  # not Get_status: see _natively
        return True

    def wait(self, status: MPI.Status | None = None):
        """Wait for completion; return the received object (None for sends)."""
        if isinstance(self, BridgedRequest):
            return type(self).wait(self, status)
        got = []
        _wait_native(lambda: got.append(_native.test(self, status)) or got[-1][0])
        return got[-1][1]

    # -- many requests, any mix ----------------------------------------------------------
    @classmethod
    def Waitall(cls, requests: Sequence, statuses: list | None = None) -> bool:
        """Wait for all requests; raise the first error after all have completed."""
        reqs = list(requests)
        if statuses is None and all([type(r) is BridgedRequest for r in reqs]):
            return _bridged_waitall(reqs)
        if _natives_only(reqs):
            return _natively(_wait_native, "Waitall", requests, statuses)
        _wait_native(_all_done(reqs))
        error = None
        for i, r in enumerate(reqs):
            try:
                _finish(r, status_at(statuses, i))
            except (MMPIError, MPI.Exception) as exc:
                error = error or exc
        if error is not None:
            raise error
        return True

    @classmethod
    def waitall(cls, requests: Sequence, statuses: list | None = None) -> list:
        """Wait for all requests; return the list of received objects."""
        if _natives_only(requests):
            return _natively(_wait_native, "waitall", requests, statuses)
        reqs = list(requests)
        _wait_native(_all_done(reqs))
        return [_finish(r, status_at(statuses, i), obj=True) for i, r in enumerate(reqs)]

    @classmethod
    def Testall(cls, requests: Sequence, statuses: list | None = None) -> bool:
        """True (and all completed) if every request has completed, else False."""
        if _natives_only(requests):
            return _natively(_wait_native, "Testall", requests, statuses)
        reqs = list(requests)
        if not _test(lambda: all([_done(r) for r in reqs])):
            return False
        return cls.Waitall(reqs, statuses)

    @classmethod
    def testall(cls, requests: Sequence, statuses: list | None = None):
        """(flag, received objects or None)."""
        if _natives_only(requests):
            return _natively(_wait_native, "testall", requests, statuses)
        reqs = list(requests)
        if not _test(lambda: all([_done(r) for r in reqs])):
            return False, None
        return True, cls.waitall(reqs, statuses)

    @classmethod
    def _any(cls, requests: Sequence, wait: bool) -> int | None:
        """Index of a completed active request; UNDEFINED if none is active; None if none done."""
        reqs = list(requests)
        if not any(_active(r) for r in reqs):
            return MPI.UNDEFINED
        found: list[int] = []

        def ready() -> bool:
            for i, r in enumerate(reqs):
                if _active(r) and _done(r):
                    found.append(i)
                    return True
            return False

        if wait:
            _wait_native(ready)
        elif not _test(ready):
            return None
        return found[0]

    @classmethod
    def Waitany(cls, requests: Sequence, status: MPI.Status | None = None) -> int:
        """Wait for any one request; return its index (MPI.UNDEFINED if none is active)."""
        if _natives_only(requests):
            return _natively(_wait_native, "Waitany", requests, status)
        i = cls._any(requests, True)
        if i != MPI.UNDEFINED:
            _finish(requests[i], status)
        else:
            empty_status(status)
        return i

    @classmethod
    def waitany(cls, requests: Sequence, status: MPI.Status | None = None):
        """(index, object) of the first request to complete."""
        if _natives_only(requests):
            return _natively(_wait_native, "waitany", requests, status)
        i = cls._any(requests, True)
        if i == MPI.UNDEFINED:
            empty_status(status)
            return i, None
        return i, _finish(requests[i], status, obj=True)

    @classmethod
    def Testany(cls, requests: Sequence, status: MPI.Status | None = None):
        """(index, flag): a completed request's index, or (UNDEFINED, flag)."""
        if _natives_only(requests):
            return _natively(_wait_native, "Testany", requests, status)
        i = cls._any(requests, False)
        if i is None:
            return MPI.UNDEFINED, False
        if i == MPI.UNDEFINED:
            empty_status(status)
            return i, True
        _finish(requests[i], status)
        return i, True

    @classmethod
    def testany(cls, requests: Sequence, status: MPI.Status | None = None):
        """(index, flag, object)."""
        if _natives_only(requests):
            return _natively(_wait_native, "testany", requests, status)
        i = cls._any(requests, False)
        if i is None:
            return MPI.UNDEFINED, False, None
        if i == MPI.UNDEFINED:
            empty_status(status)
            return i, True, None
        return i, True, _finish(requests[i], status, obj=True)

    @classmethod
    def _some(cls, requests: Sequence, statuses, wait: bool, obj: bool):
        reqs = list(requests)
        if not any(_active(r) for r in reqs):
            return None, None

        def ready() -> bool:
            return any(_active(r) and _done(r) for r in reqs)

        if wait:
            _wait_native(ready)
        elif not _test(ready):
            return [], []
        done = [i for i, r in enumerate(reqs) if _active(r) and _done(r)]
        out, error = [], None
        for k, i in enumerate(done):
            try:
                out.append(_finish(reqs[i], status_at(statuses, k), obj=obj))
            except (MMPIError, MPI.Exception) as exc:
                error = error or exc
        if error is not None:
            raise error
        return done, out

    @classmethod
    def Waitsome(cls, requests: Sequence, statuses: list | None = None):
        """Wait until at least one completes; the indices of all completed ones."""
        if _natives_only(requests):
            return _natively(_wait_native, "Waitsome", requests, statuses)
        return cls._some(requests, statuses, True, False)[0]

    @classmethod
    def waitsome(cls, requests: Sequence, statuses: list | None = None):
        """(indices, objects) of the completed requests, waiting for one at least."""
        if _natives_only(requests):
            return _natively(_wait_native, "waitsome", requests, statuses)
        return cls._some(requests, statuses, True, True)

    @classmethod
    def Testsome(cls, requests: Sequence, statuses: list | None = None):
        """The indices of the completed requests (None if none is active)."""
        if _natives_only(requests):
            return _natively(_wait_native, "Testsome", requests, statuses)
        return cls._some(requests, statuses, False, False)[0]

    @classmethod
    def testsome(cls, requests: Sequence, statuses: list | None = None):
        """(indices, objects) of the completed requests."""
        if _natives_only(requests):
            return _natively(_wait_native, "testsome", requests, statuses)
        return cls._some(requests, statuses, False, True)

    # -- non-destructive tests (MPI 4.1): nothing completes, statuses are filled ----------
    @classmethod
    def Get_status_all(cls, requests: Sequence, statuses: list | None = None) -> bool:
        """True if every request has completed (their statuses filled), else False."""
        if _natives_only(requests):
            return _native.Get_status_all(list(requests), statuses)
        reqs = list(requests)
        if not _test(lambda: all([_done(r) for r in reqs])):
            return False
        for i, r in enumerate(reqs):
            _peek(r, status_at(statuses, i))
        return True

    @classmethod
    def Get_status_any(cls, requests: Sequence, status: MPI.Status | None = None):
        """(index, flag) of a completed active request; (UNDEFINED, True) if none is active."""
        if _natives_only(requests):
            return _native.Get_status_any(list(requests), status)
        i = cls._any(requests, False)
        if i is None or i == MPI.UNDEFINED:
            if i is not None:
                empty_status(status)
            return MPI.UNDEFINED, i is not None
        _peek(requests[i], status)
        return i, True

    @classmethod
    def Get_status_some(cls, requests: Sequence, statuses: list | None = None):
        """The indices of the completed active requests (None if none is active)."""
        if _natives_only(requests):
            return _native.Get_status_some(list(requests), statuses)
        reqs = list(requests)
        if not any(_active(r) for r in reqs):
            return None
        done: list[int] = []

        def ready() -> bool:
            done[:] = [i for i, r in enumerate(reqs) if _active(r) and _done(r)]
            return bool(done)

        _test(ready)
        for k, i in enumerate(done):
            _peek(reqs[i], status_at(statuses, k))
        return done

    get_status_all, get_status_any, get_status_some = Get_status_all, Get_status_any, \
        Get_status_some


def _bridged_waitall(reqs: list) -> bool:
    """Waitall of bridged requests, no statuses: the commonest (a window of receives)."""
    for r in reqs:
        if not (r._op.done or r._consumed):
            # receives from the other cluster alone: the first rounds watch the links only,
            # in C where they can (Engine.wait_plain)
            remote = all([q._op.remote or q._op.done or q._consumed for q in reqs])
            if remote and _engine is not None:
                _engine.wait_plain([q._op for q in reqs if not (q._op.done or q._consumed)])
            _wait_native(_all_done(reqs), remote)
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


def _natives_only(requests) -> bool:
    return not any(_bridged(r) for r in requests)


def _test(ready) -> bool:
    if _engine is None:
        return ready()
    return _engine.test(ready)


def _active(r) -> bool:
    if r is None:
        return False
    if _bridged(r):
        return not r._consumed
    return _native.__bool__(r)


def _all_done(reqs: list):
    """A test for a wait: True once every request has completed.

    Every request not yet complete is tested on each poll (testing a large receive returns its
    sender's credit and frees its buffers: testing only the first pending one halved the 4 MiB
    bandwidth) up to the first receive still without a message, and a complete one is not
    tested again.
    """
    # each request's own test, bound once: a wait polls them many times
    pending = [(r._op.poll, r._op) if _bridged(r) else (_native_test(r), None) for r in reqs
               if r is not None and not (_bridged(r) and r._consumed)]

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


def _native_test(r):
    """A test of native request `r` that does not complete it."""
    return lambda: _native.Get_status(r)


def _done(r) -> bool:
    """Whether `r` has completed (native: without completing it; None and inactive: yes)."""
    if r is None:
        return True
    if _bridged(r):
        return r._consumed or r._op.poll()
    return _native.Get_status(r)


def _peek(r, status) -> None:
    """Fill `status` from a completed request without completing it."""
    if _bridged(r):
        r._fill(status)
    elif r is not None and status is not None:
        _native.Get_status(r, status)


def _finish(r, status, obj: bool = False):
    """Complete a request known to be done: its status, its object (lowercase API)."""
    if r is None:
        return None
    if _bridged(r):
        return r._result(status)
    if obj:
        return _native.wait(r, status)
    _native.Wait(r, status)
    return None


class BridgedRequest(Request):
    """One operation of the bridge: a send, a receive, a non-blocking collective call."""

    __slots__ = ("_op", "_pickled", "_consumed", "_value")
    _copied_as_itself = True  # MPI.Request(req) is req (see _standin.StandIn.__call__)

    def __new__(cls, *args, **kwargs):
        """A new bridged request object (its native handle stays MPI_REQUEST_NULL)."""
        return _native.__new__(cls)

    def __init__(self, op: Op, pickled: bool = False) -> None:
        self._op = op
        self._pickled = pickled  # a receive of a pickled object (lowercase API)
        self._consumed = False
        self._value = None  # a non-blocking collective's result

    @classmethod
    def of(cls, op: Op) -> BridgedRequest:
        """The request of a send or a receive `op`, made the short way (one per message).

        Without the class call's layers: the stand-in metaclass, __new__, __init__.
        """
        self = _new(cls)
        self._op, self._pickled, self._consumed, self._value = op, False, False, None
        return self

    def __bool__(self) -> bool:
        return not self._consumed

    def __eq__(self, other) -> bool:
        if isinstance(other, BridgedRequest):
            return other is self
        if isinstance(other, _native):
            return self._consumed and not _native.__bool__(other)
        return NotImplemented

    def __ne__(self, other) -> bool:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __hash__(self) -> int:
        return id(self)

    def __repr__(self) -> str:
        state = "done" if self._consumed else ("complete" if self._op.done else "active")
        return f"<mmpi.BridgedRequest {state}>"

    def _fill(self, status) -> None:
        op = self._op
        fill_status(status, op.source, op.tag, op.nbytes, op.error, op.cancelled)

    def _result(self, status):
        op = self._op
        self._fill(status)
        if self._consumed:
            return None
        self._consumed = True
        if op.error is not None:
            raise op.error
        if self._pickled:
            data, op.obj = op.obj, None
            value = pickle.loads(data) if data else None  # an empty message: None (mpi4py)
            op.release()
            return value
        return getattr(op, "result", None)

    def _wait(self) -> None:
        op = self._op
        if not op.done and not self._consumed:
            if _engine is None:
                raise MMPIError("a bridged request outside a bridged job")
            _engine.wait_for(op.poll, op.remote)

    def Wait(self, status: MPI.Status | None = None) -> bool:
        """Wait for this request to complete."""
        self._wait()
        self._result(status)
        return True

    def wait(self, status: MPI.Status | None = None):
        """Wait for completion; return the received object (None for sends)."""
        self._wait()
        return self._result(status)

    def Test(self, status: MPI.Status | None = None) -> bool:
        """Test for the completion of this request."""
        if not self._consumed and not _engine.test(self._op.poll):
            return False
        self._result(status)
        return True

    def test(self, status: MPI.Status | None = None):
        """(flag, received object or None)."""
        if not self._consumed and not _engine.test(self._op.poll):
            return False, None
        return True, self._result(status)

    def Get_status(self, status: MPI.Status | None = None) -> bool:
        """Non-destructive test for completion."""
        if self._consumed or _engine.test(self._op.poll):
            self._fill(status)
            return True
        return False

    def get_status(self, status: MPI.Status | None = None) -> bool:
        """Non-destructive test for completion (lowercase alias)."""
        return self.Get_status(status)

    def Free(self) -> None:
        """Let the operation complete in the background."""
        if not self._consumed:
            _engine.p2p.adopt(self._op)
            self._consumed = True

    free = Free

    def Cancel(self) -> None:
        """Cancel a receive that has not been matched yet (sends cannot be cancelled here)."""
        _engine.cancel(self._op)

    cancel = Cancel


dispatch_unbound(Request, _native)
pickle_natively(_native, MPI.Prequest)

__all__ = ["Request", "BridgedRequest", "bind"]
