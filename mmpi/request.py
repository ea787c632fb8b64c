"""Request objects of the bridged world, with mpi4py's Wait/Test family (class methods too).

A Request completes when the native MPI requests behind it have completed and, for a
receive, once it has been matched. All waiting polls the progress engine with back-off.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Sequence

from mpi4py import MPI

from .errors import MMPIError

_TestAll = MPI.Request.Testall


class Request:
    """A non-blocking operation on the bridged world (mirrors mpi4py.MPI.Request)."""

    __slots__ = (
        "_engine", "_natives", "_matched", "_done", "_finish", "_error", "_keep",
        "source", "tag", "nbytes", "_obj", "_pickled", "_consumed", "_more", "_spare",
        "_remote", "__weakref__",
    )

    def __init__(self, engine, *, matched: bool = True, pickled: bool = False) -> None:
        self._engine = engine
        self._natives: list[MPI.Request] = []
        self._matched = matched
        self._done = False
        self._finish: Callable[[], None] | None = None
        self._error: BaseException | None = None
        self._keep = None  # keeps send buffers alive until the MPI sends complete
        self.source = MPI.ANY_SOURCE
        self.tag = MPI.ANY_TAG
        self.nbytes = 0
        self._obj = None
        self._spare = None  # the engine's spare buffer under _obj, given back once read
        self._pickled = pickled
        self._consumed = False
        self._more: Callable[[], bool] | None = None  # e.g. stripes still to arrive
        self._remote = False  # a receive from the other cluster (see Engine.wait_for)

    # -- engine side -------------------------------------------------------------------
    def _start(self, natives, finish=None, more=None) -> None:
        self._matched = True
        self._natives = natives
        self._finish = finish
        self._more = more

    def _fail(self, error: BaseException) -> None:
        if self._error is None:
            self._error = error

    def _poll(self) -> bool:
        """Advance this request without progressing the engine; True when complete."""
        if self._done:
            return True
        if not self._matched:
            return False
        if self._more is not None and not self._more():
            return False
        if self._natives and not _TestAll(self._natives):
            return False
        self._natives = []
        self._keep = None
        if self._finish is not None:
            finish, self._finish = self._finish, None
            try:
                finish()
            except MMPIError as exc:
                self._fail(exc)
        self._done = True
        return True

    def _progressed(self, ready=None) -> bool:
        """For a test: whether `ready()` holds (default: this request is done), see Engine.test."""
        return self._engine.test(ready or self._poll)

    def _fill(self, status) -> None:
        if status is not None:
            status.Set_source(self.source)
            status.Set_tag(self.tag)
            status.Set_elements(MPI.BYTE, self.nbytes)
            status.Set_error(MPI.SUCCESS if self._error is None else MPI.ERR_OTHER)

    def _result(self, status):
        self._fill(status)
        if self._error is not None and not self._consumed:
            self._consumed = True
            raise self._error
        self._consumed = True
        if self._pickled:
            data, self._obj = self._obj, None
            obj = None if data is None else pickle.loads(data)
            self._release()
            return obj
        return None

    def _release(self) -> None:
        """Give a spare receive buffer back to the engine (its bytes are no longer needed)."""
        if self._spare is not None:
            spare, self._spare = self._spare, None
            self._engine._give_spare(spare)

    # -- mpi4py API ----------------------------------------------------------------------
    def Test(self, status: MPI.Status | None = None) -> bool:
        """Test for the completion of this request."""
        if not self._progressed():
            return False
        self._result(status)
        return True

    def Wait(self, status: MPI.Status | None = None) -> bool:
        """Wait for this request to complete."""
        self._engine.wait_for(self._poll, self._remote)
        self._result(status)
        return True

    def Get_status(self, status: MPI.Status | None = None) -> bool:
        """Non-destructive test for completion."""
        if self._progressed():
            self._fill(status)
            return True
        return False

    def Free(self) -> None:
        """Let the operation complete in the background (only sends make sense here)."""
        self._engine.adopt(self)

    def test(self, status: MPI.Status | None = None):
        """Test for completion; return (flag, received object or None)."""
        if not self._progressed():
            return False, None
        return True, self._result(status)

    def wait(self, status: MPI.Status | None = None):
        """Wait for completion; return the received object (None for sends)."""
        self._engine.wait_for(self._poll, self._remote)
        return self._result(status)

    def __bool__(self) -> bool:
        return not self._consumed

    # -- collective completion ----------------------------------------------------------
    @staticmethod
    def _live(requests: Sequence[Request | None]) -> list[Request]:
        return [r for r in requests if r is not None and not r._consumed]

    @classmethod
    def Waitall(cls, requests: Sequence[Request], statuses: list | None = None) -> bool:
        """Wait for all requests; raise the first error after all have completed."""
        live = cls._live(requests)
        if live:
            live[0]._engine.wait_for(lambda: all([r._poll() for r in live]))
        error = None
        for i, r in enumerate(requests):
            st = statuses[i] if statuses is not None and i < len(statuses) else None
            if r is None or r._consumed:
                continue
            try:
                r._result(st)
            except MMPIError as exc:
                error = error or exc
        if error is not None:
            raise error
        return True

    @classmethod
    def waitall(cls, requests: Sequence[Request], statuses: list | None = None) -> list:
        """Wait for all requests; return the list of received objects."""
        live = cls._live(requests)
        if live:
            live[0]._engine.wait_for(lambda: all([r._poll() for r in live]))
        out = []
        for i, r in enumerate(requests):
            st = statuses[i] if statuses is not None and i < len(statuses) else None
            out.append(None if r is None or r._consumed else r._result(st))
        return out

    @classmethod
    def Testall(cls, requests: Sequence[Request], statuses: list | None = None) -> bool:
        """True (and all results consumed) if every request has completed."""
        live = cls._live(requests)
        if live and not live[0]._progressed(lambda: all([r._poll() for r in live])):
            return False
        cls.Waitall(requests, statuses)
        return True

    @classmethod
    def testall(cls, requests: Sequence[Request], statuses: list | None = None):
        """(flag, objects) for the lowercase API."""
        live = cls._live(requests)
        if live and not live[0]._progressed(lambda: all([r._poll() for r in live])):
            return False, None
        return True, cls.waitall(requests, statuses)

    @classmethod
    def _first_done(cls, requests) -> int | None:
        for i, r in enumerate(requests):
            if r is not None and not r._consumed and r._poll():
                return i
        return None

    @classmethod
    def _any_done(cls, requests, found: list[int]):
        """A readiness check: whether any request has completed (its index into `found`)."""

        def ready() -> bool:
            i = cls._first_done(requests)
            if i is not None:
                found.append(i)
            return i is not None

        return ready

    @classmethod
    def _wait_any(cls, requests: Sequence[Request | None]) -> int:
        """Index of the first request to complete (MPI.UNDEFINED if none is active)."""
        live = cls._live(requests)
        if not live:
            return MPI.UNDEFINED
        found: list[int] = []
        live[0]._engine.wait_for(cls._any_done(requests, found))
        return found[0]

    @classmethod
    def Waitany(cls, requests: Sequence[Request], status: MPI.Status | None = None) -> int:
        """Wait for any one request; return its index (MPI.UNDEFINED if none is active)."""
        i = cls._wait_any(requests)
        if i != MPI.UNDEFINED:
            requests[i]._result(status)
        return i

    @classmethod
    def waitany(cls, requests: Sequence[Request], status: MPI.Status | None = None):
        """(index, object) of the first request to complete."""
        i = cls._wait_any(requests)
        return (i, None) if i == MPI.UNDEFINED else (i, requests[i]._result(status))

    @classmethod
    def Testany(cls, requests: Sequence[Request], status: MPI.Status | None = None):
        """(index, flag): a completed request's index, or (UNDEFINED, False/True)."""
        live = cls._live(requests)
        if not live:
            return MPI.UNDEFINED, True
        found: list[int] = []
        if not live[0]._progressed(cls._any_done(requests, found)):
            return MPI.UNDEFINED, False
        i = found[0]
        requests[i]._result(status)
        return i, True

    @classmethod
    def Waitsome(cls, requests: Sequence[Request], statuses: list | None = None):
        """Wait until at least one completes; return the indices of all completed ones."""
        live = cls._live(requests)
        if not live:
            return None
        live[0]._engine.wait_for(lambda: cls._first_done(requests) is not None)
        done = [i for i, r in enumerate(requests) if r is not None and not r._consumed
                and r._poll()]
        error = None
        for k, i in enumerate(done):
            st = statuses[k] if statuses is not None and k < len(statuses) else None
            try:
                requests[i]._result(st)
            except MMPIError as exc:
                error = error or exc
        if error is not None:
            raise error
        return done


def completed(engine, *, source: int = MPI.PROC_NULL, tag: int = MPI.ANY_TAG,
              pickled: bool = False) -> Request:
    """An already-complete request (PROC_NULL operations)."""
    r = Request(engine, pickled=pickled)
    r.source, r.tag, r._done = source, tag, True
    return r
