"""Requests of the bridged world: mpi4py's `MPI.Request` API over bridged and native operations.

`Request` is what `MPI.Request` names under mmpi-run, and the class of the bridge's requests
too, so `type(comm.Isend(...)) is MPI.Request` holds as in mpi4py. It is a subclass of mpi4py's
own: a native request (from `COMM_SELF`, say) is still one (`isinstance` holds for both),
`MPI.Request()` is the null request and `MPI.Request(req)` a copy of a native one, and the class
methods (`Waitall`, `Testany`, ...) take any mix of native and bridged requests.

An object of the class is one of two kinds (`_op` tells them apart):

* bridged: one operation of the bridge (an `_engine.op.Op`, or a non-blocking collective
  call); its handle is MPI_REQUEST_NULL, its methods are ours;
* native: `_op` is None and the object holds a native handle, as mpi4py's own would.

Every wait polls the engine with back-off (see `_engine.engine` Rule 1); the waits and tests of
a list of requests are `waits`'.
"""

from __future__ import annotations

import pickle
from collections.abc import Sequence

from .._engine.op import Op, empty_status, fill_status, status_at
from .._startup.native import MPI
from ..errors import MMPIError
from . import waits as W
from .native_lists import natively as _natively
from .standin import StandIn, dispatch_unbound, pickle_natively
from .waits import Bridged, bind

_native = MPI.Request
_new = _native.__new__
_bridged = W.bridged


class Request(_native, Bridged, metaclass=StandIn):
    """A non-blocking operation: a native MPI request, or one of the bridge (mpi4py's API)."""

    __slots__ = ("_op", "_pickled", "_consumed", "_value")
    _stands_for = _native

    def __new__(cls, request=None, pickled: bool = False):
        """`MPI.Request()`, `MPI.Request(req)` (a native copy), or one operation of the bridge."""
        if isinstance(request, Op):  # the bridge's (a send, a receive, a collective call)
            self = _new(cls)
            self._op, self._pickled, self._consumed, self._value = request, pickled, False, None
            return self
        self = _new(cls, request)  # a copy of a native handle, checked as mpi4py checks it
        self._op = None
        return self

    @classmethod
    def of(cls, op: Op) -> Request:
        """The request of a send or a receive `op`, made the short way (one per message).

        Without the class call's layers: the stand-in metaclass, __new__.
        """
        self = _new(cls)
        self._op, self._pickled, self._consumed, self._value = op, False, False, None
        return self

    @property
    def _copied_as_itself(self) -> bool:
        # MPI.Request(req) of a bridged request is the request itself: it has no handle to
        # copy, but lives in the bridge (see standin.StandIn.__call__)
        return self._op is not None

    # -- what Python asks of every object ------------------------------------------------
    def __bool__(self) -> bool:
        if _bridged(self):
            return not self._consumed
        return _native.__bool__(self)

    def __eq__(self, other) -> bool:
        if _bridged(self):
            if _bridged(other):
                return other is self
            if isinstance(other, _native):
                return self._consumed and not _native.__bool__(other)
            return NotImplemented
        if _bridged(other):
            return other.__eq__(self)
        return _native.__eq__(self, other)

    def __ne__(self, other) -> bool:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __hash__(self) -> int:
        if _bridged(self):
            return id(self)
        raise TypeError(f"unhashable type: '{type(self).__name__}'")  # as mpi4py's

    def __repr__(self) -> str:
        if not _bridged(self):
            return _native.__repr__(self)
        state = "done" if self._consumed else ("complete" if self._op.done else "active")
        return f"<mmpi.Request {state}>"

    def __reduce__(self):
        if _bridged(self):  # a live operation of this process, as mpi4py's own requests
            raise ValueError(f"cannot serialize '{type(self).__module__}."
                             f"{type(self).__name__}' instance")
        return _native.__reduce__(self)

    # -- one request ---------------------------------------------------------------------
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
            if W.engine is None:
                raise MMPIError("a bridged request outside a bridged job")
            W.engine.wait_for(op.poll, op.remote)

    def Wait(self, status: MPI.Status | None = None) -> bool:
        """Wait for this request to complete."""
        if _bridged(self):
            self._wait()
            self._result(status)
            return True
        W.wait_native(lambda: _native.Test(self, status))  # not Get_status: see _natively
        return True

    def wait(self, status: MPI.Status | None = None):
        """Wait for completion; return the received object (None for sends)."""
        if _bridged(self):
            self._wait()
            return self._result(status)
        got = []
        W.wait_native(lambda: got.append(_native.test(self, status)) or got[-1][0])
        return got[-1][1]

    def Test(self, status: MPI.Status | None = None) -> bool:
        """Test for the completion of this request."""
        if not _bridged(self):
            return _native.Test(self, status)
        if not self._consumed and not W.engine.test(self._op.poll):
            return False
        self._result(status)
        return True

    def test(self, status: MPI.Status | None = None):
        """(flag, received object or None)."""
        if not _bridged(self):
            return _native.test(self, status)
        if not self._consumed and not W.engine.test(self._op.poll):
            return False, None
        return True, self._result(status)

    def Get_status(self, status: MPI.Status | None = None) -> bool:
        """Non-destructive test for completion."""
        if not _bridged(self):
            return _native.Get_status(self, status)
        if self._consumed or W.engine.test(self._op.poll):
            self._fill(status)
            return True
        return False

    def get_status(self, status: MPI.Status | None = None) -> bool:
        """Non-destructive test for completion (lowercase alias)."""
        return self.Get_status(status)

    def Free(self) -> None:
        """Let the operation complete in the background."""
        if not _bridged(self):
            _native.Free(self)
        elif not self._consumed:
            W.engine.p2p.adopt(self._op)
            self._consumed = True

    def free(self) -> None:
        """Free the request if it is not null (mpi4py 4's safe form)."""
        if not _bridged(self):
            _native.free(self)
        else:
            self.Free()

    def Cancel(self) -> None:
        """Cancel a receive that has not been matched yet (sends cannot be cancelled here)."""
        if not _bridged(self):
            _native.Cancel(self)
        else:
            W.engine.cancel(self._op)

    cancel = Cancel

    # -- many requests, any mix ----------------------------------------------------------
    @classmethod
    def Waitall(cls, requests: Sequence, statuses: list | None = None) -> bool:
        """Wait for all requests; raise the first error after all have completed."""
        reqs = list(requests)
        if statuses is None and all([type(r) is Request and r._op is not None
                                     for r in reqs]):
            return W.bridged_waitall(reqs)
        if W.natives_only(reqs):
            return _natively(W.wait_native, "Waitall", requests, statuses)
        W.wait_native(W.all_done(reqs))
        error = None
        for i, r in enumerate(reqs):
            try:
                W.finish(r, status_at(statuses, i))
            except (MMPIError, MPI.Exception) as exc:
                error = error or exc
        if error is not None:
            raise error
        return True

    @classmethod
    def waitall(cls, requests: Sequence, statuses: list | None = None) -> list:
        """Wait for all requests; return the list of received objects."""
        if W.natives_only(requests):
            return _natively(W.wait_native, "waitall", requests, statuses)
        reqs = list(requests)
        W.wait_native(W.all_done(reqs))
        return [W.finish(r, status_at(statuses, i), obj=True) for i, r in enumerate(reqs)]

    @classmethod
    def Testall(cls, requests: Sequence, statuses: list | None = None) -> bool:
        """True (and all completed) if every request has completed, else False."""
        if W.natives_only(requests):
            return _natively(W.wait_native, "Testall", requests, statuses)
        reqs = list(requests)
        if not W.test(lambda: all([W.done(r) for r in reqs])):
            return False
        return cls.Waitall(reqs, statuses)

    @classmethod
    def testall(cls, requests: Sequence, statuses: list | None = None):
        """(flag, received objects or None)."""
        if W.natives_only(requests):
            return _natively(W.wait_native, "testall", requests, statuses)
        reqs = list(requests)
        if not W.test(lambda: all([W.done(r) for r in reqs])):
            return False, None
        return True, cls.waitall(reqs, statuses)

    @classmethod
    def _any(cls, requests: Sequence, wait: bool) -> int | None:
        """Index of a completed active request; UNDEFINED if none is active; None if none done."""
        reqs = list(requests)
        if not any(W.active(r) for r in reqs):
            return MPI.UNDEFINED
        found: list[int] = []

        def ready() -> bool:
            for i, r in enumerate(reqs):
                if W.active(r) and W.done(r):
                    found.append(i)
                    return True
            return False

        if wait:
            W.wait_native(ready)
        elif not W.test(ready):
            return None
        return found[0]

    @classmethod
    def Waitany(cls, requests: Sequence, status: MPI.Status | None = None) -> int:
        """Wait for any one request; return its index (MPI.UNDEFINED if none is active)."""
        if W.natives_only(requests):
            return _natively(W.wait_native, "Waitany", requests, status)
        i = cls._any(requests, True)
        if i != MPI.UNDEFINED:
            W.finish(requests[i], status)
        else:
            empty_status(status)
        return i

    @classmethod
    def waitany(cls, requests: Sequence, status: MPI.Status | None = None):
        """(index, object) of the first request to complete."""
        if W.natives_only(requests):
            return _natively(W.wait_native, "waitany", requests, status)
        i = cls._any(requests, True)
        if i == MPI.UNDEFINED:
            empty_status(status)
            return i, None
        return i, W.finish(requests[i], status, obj=True)

    @classmethod
    def Testany(cls, requests: Sequence, status: MPI.Status | None = None):
        """(index, flag): a completed request's index, or (UNDEFINED, flag)."""
        if W.natives_only(requests):
            return _natively(W.wait_native, "Testany", requests, status)
        i = cls._any(requests, False)
        if i is None:
            return MPI.UNDEFINED, False
        if i == MPI.UNDEFINED:
            empty_status(status)
            return i, True
        W.finish(requests[i], status)
        return i, True

    @classmethod
    def testany(cls, requests: Sequence, status: MPI.Status | None = None):
        """(index, flag, object)."""
        if W.natives_only(requests):
            return _natively(W.wait_native, "testany", requests, status)
        i = cls._any(requests, False)
        if i is None:
            return MPI.UNDEFINED, False, None
        if i == MPI.UNDEFINED:
            empty_status(status)
            return i, True, None
        return i, True, W.finish(requests[i], status, obj=True)

    @classmethod
    def _some(cls, requests: Sequence, statuses, wait: bool, obj: bool):
        reqs = list(requests)
        if not any(W.active(r) for r in reqs):
            return None, None

        def ready() -> bool:
            return any(W.active(r) and W.done(r) for r in reqs)

        if wait:
            W.wait_native(ready)
        elif not W.test(ready):
            return [], []
        done = [i for i, r in enumerate(reqs) if W.active(r) and W.done(r)]
        out, error = [], None
        for k, i in enumerate(done):
            try:
                out.append(W.finish(reqs[i], status_at(statuses, k), obj=obj))
            except (MMPIError, MPI.Exception) as exc:
                error = error or exc
        if error is not None:
            raise error
        return done, out

    @classmethod
    def Waitsome(cls, requests: Sequence, statuses: list | None = None):
        """Wait until at least one completes; the indices of all completed ones."""
        if W.natives_only(requests):
            return _natively(W.wait_native, "Waitsome", requests, statuses)
        return cls._some(requests, statuses, True, False)[0]

    @classmethod
    def waitsome(cls, requests: Sequence, statuses: list | None = None):
        """(indices, objects) of the completed requests, waiting for one at least."""
        if W.natives_only(requests):
            return _natively(W.wait_native, "waitsome", requests, statuses)
        return cls._some(requests, statuses, True, True)

    @classmethod
    def Testsome(cls, requests: Sequence, statuses: list | None = None):
        """The indices of the completed requests (None if none is active)."""
        if W.natives_only(requests):
            return _natively(W.wait_native, "Testsome", requests, statuses)
        return cls._some(requests, statuses, False, False)[0]

    @classmethod
    def testsome(cls, requests: Sequence, statuses: list | None = None):
        """(indices, objects) of the completed requests."""
        if W.natives_only(requests):
            return _natively(W.wait_native, "testsome", requests, statuses)
        return cls._some(requests, statuses, False, True)

    # -- non-destructive tests (MPI 4.1): nothing completes, statuses are filled ----------
    @classmethod
    def Get_status_all(cls, requests: Sequence, statuses: list | None = None) -> bool:
        """True if every request has completed (their statuses filled), else False."""
        if W.natives_only(requests):
            return _native.Get_status_all(list(requests), statuses)
        reqs = list(requests)
        if not W.test(lambda: all([W.done(r) for r in reqs])):
            return False
        for i, r in enumerate(reqs):
            W.peek(r, status_at(statuses, i))
        return True

    @classmethod
    def Get_status_any(cls, requests: Sequence, status: MPI.Status | None = None):
        """(index, flag) of a completed active request; (UNDEFINED, True) if none is active."""
        if W.natives_only(requests):
            return _native.Get_status_any(list(requests), status)
        i = cls._any(requests, False)
        if i is None or i == MPI.UNDEFINED:
            if i is not None:
                empty_status(status)
            return MPI.UNDEFINED, i is not None
        W.peek(requests[i], status)
        return i, True

    @classmethod
    def Get_status_some(cls, requests: Sequence, statuses: list | None = None):
        """The indices of the completed active requests (None if none is active)."""
        if W.natives_only(requests):
            return _native.Get_status_some(list(requests), statuses)
        reqs = list(requests)
        if not any(W.active(r) for r in reqs):
            return None
        done: list[int] = []

        def ready() -> bool:
            done[:] = [i for i, r in enumerate(reqs) if W.active(r) and W.done(r)]
            return bool(done)

        W.test(ready)
        for k, i in enumerate(done):
            W.peek(reqs[i], status_at(statuses, k))
        return done

    get_status_all, get_status_any, get_status_some = Get_status_all, Get_status_any, \
        Get_status_some


# The name the rest of mmpi made bridged requests by (`BridgedRequest.of(op)`): one class now.
BridgedRequest = Request

dispatch_unbound(Request, _native)
pickle_natively(_native, MPI.Prequest)

__all__ = ["Request", "BridgedRequest", "bind"]
