"""The point-to-point methods of a bridged communicator: argument checks, then the transport.

Ranks are the communicator's; numbers are taken as mpi4py takes them (any integral value, a
float truncated); the errors name the call, the rank and what was wrong.
"""

from __future__ import annotations

import operator
import pickle

from ._buffers import as_view
from ._native import MPI
from ._op import completed
from .errors import RankError, TagError
from .request import BridgedRequest

ANY_SOURCE = MPI.ANY_SOURCE
ANY_TAG = MPI.ANY_TAG
PROC_NULL = MPI.PROC_NULL
_PICKLE = pickle.HIGHEST_PROTOCOL
_TAG_UB = None


def as_int(value, what: str, call: str) -> int:
    """An integer argument as mpi4py takes it; TypeError otherwise."""
    if type(value) is int:
        return value
    try:
        return operator.index(value)
    except TypeError:
        if isinstance(value, float):
            return int(value)
        raise TypeError(f"{call}: {what} must be an integer, got {value!r}") from None


def fill_status(status, source: int, tag: int, nbytes: int) -> None:
    """Write a received message's envelope into an MPI.Status (if one was given)."""
    if status is not None:
        status.Set_source(source)
        status.Set_tag(tag)
        status.Set_elements(MPI.BYTE, nbytes)
        status.Set_error(MPI.SUCCESS)


class PointToPointMethods:
    """Mixin of the bridged communicator: every point-to-point call of mpi4py's Comm."""

    __slots__ = ()

    # -- argument checks -----------------------------------------------------------------
    def _dest(self, dest, call: str) -> int:
        dest = as_int(dest, "destination rank", call)
        if dest == PROC_NULL:
            return dest
        if not 0 <= dest < self._core.size:
            raise RankError(
                f"{call} on rank {self._core.rank}: destination rank {dest} is out of range "
                f"for a communicator of size {self._core.size}"
            )
        return dest

    def _source(self, source, call: str) -> int | None:
        source = as_int(source, "source rank", call)
        if source == ANY_SOURCE:
            return None
        if source == PROC_NULL:
            return source
        if not 0 <= source < self._core.size:
            raise RankError(
                f"{call} on rank {self._core.rank}: source rank {source} is out of range "
                f"for a communicator of size {self._core.size}"
            )
        return source

    def _send_tag(self, tag, call: str) -> int:
        tag = as_int(tag, "tag", call)
        if not 0 <= tag <= self._tag_ub:
            raise TagError(
                f"{call} on rank {self._core.rank}: tag {tag} is invalid "
                f"(must be 0..{self._tag_ub}, the TAG_UB)"
            )
        return tag

    def _recv_tag(self, tag, call: str) -> int | None:
        tag = as_int(tag, "tag", call)
        if tag == ANY_TAG:
            return None
        return self._send_tag(tag, call)

    def _live(self):
        e = self._core.engine
        if e.finalized:
            e.check()
        return e

    # -- buffer forms --------------------------------------------------------------------
    def _isend(self, buf, dest, tag, call: str) -> BridgedRequest:
        e = self._live()
        dest = self._dest(dest, call)
        tag = self._send_tag(tag, call)
        view = as_view(buf, writable=False, op=call)
        if dest == PROC_NULL:
            return BridgedRequest(completed())
        return BridgedRequest(e.p2p.isend(self._core.p2p, view, dest, tag))

    def _irecv(self, buf, source, tag, call: str) -> BridgedRequest:
        e = self._live()
        src = self._source(source, call)
        want = self._recv_tag(tag, call)
        view = as_view(buf, writable=True, op=call)
        if src == PROC_NULL:
            return BridgedRequest(completed())
        return BridgedRequest(e.p2p.irecv(self._core.p2p, view, src, want, call))

    def Isend(self, buf, dest, tag=0):
        """Start a standard-mode send."""
        return self._isend(buf, dest, tag, "Isend")

    def Send(self, buf, dest, tag=0) -> None:
        """Blocking standard-mode send."""
        self._isend(buf, dest, tag, "Send").Wait()

    def Irecv(self, buf, source=ANY_SOURCE, tag=ANY_TAG):
        """Start a receive."""
        return self._irecv(buf, source, tag, "Irecv")

    def Recv(self, buf, source=ANY_SOURCE, tag=ANY_TAG, status=None) -> None:
        """Blocking receive."""
        self._irecv(buf, source, tag, "Recv").Wait(status)

    def Sendrecv(self, sendbuf, dest, sendtag=0, recvbuf=None, source=ANY_SOURCE,
                 recvtag=ANY_TAG, status=None) -> None:
        """Send and receive at once (no deadlock between the two)."""
        r = self._irecv(recvbuf, source, recvtag, "Sendrecv")
        s = self._isend(sendbuf, dest, sendtag, "Sendrecv")
        s.Wait()
        r.Wait(status)

    # -- probes --------------------------------------------------------------------------
    def _peek(self, source, tag, call: str):
        e = self._live()
        return e, self._source(source, call), self._recv_tag(tag, call)

    def Iprobe(self, source=ANY_SOURCE, tag=ANY_TAG, status=None) -> bool:
        """Check, without receiving, whether a matching message has arrived."""
        e, src, want = self._peek(source, tag, "Iprobe")
        if src == PROC_NULL:
            fill_status(status, PROC_NULL, ANY_TAG, 0)
            return True
        q = self._core.p2p.queues
        found = []

        def ready() -> bool:
            m = q.peek(src, want)
            if m is not None:
                found.append(m)
            return m is not None

        if not e.test(ready):
            return False
        m = found[0]
        fill_status(status, m.source, m.tag, m.nbytes)
        return True

    def Probe(self, source=ANY_SOURCE, tag=ANY_TAG, status=None) -> bool:
        """Wait until a matching message has arrived, without receiving it."""
        e, src, want = self._peek(source, tag, "Probe")
        if src == PROC_NULL:
            fill_status(status, PROC_NULL, ANY_TAG, 0)
            return True
        ctx = self._core.p2p
        found = []

        def ready() -> bool:
            m = ctx.queues.peek(src, want)
            if m is not None:
                found.append(m)
                return True
            error = e.doomed(ctx, "Probe", src, want, "probe")
            if error is not None:
                raise error
            return False

        e.wait_for(ready)
        m = found[0]
        fill_status(status, m.source, m.tag, m.nbytes)
        return True

    # -- pickle forms --------------------------------------------------------------------
    def isend(self, obj, dest, tag=0):
        """Start sending a picklable object."""
        e = self._live()
        dest = self._dest(dest, "isend")
        tag = self._send_tag(tag, "isend")
        if dest == PROC_NULL:
            return BridgedRequest(completed())
        data = pickle.dumps(obj, _PICKLE)
        return BridgedRequest(e.p2p.isend(self._core.p2p, memoryview(data), dest, tag))

    def send(self, obj, dest, tag=0) -> None:
        """Send a picklable object."""
        self.isend(obj, dest, tag).Wait()

    def irecv(self, buf=None, source=ANY_SOURCE, tag=ANY_TAG):
        """Start receiving a pickled object (`buf` is accepted for mpi4py compatibility)."""
        e = self._live()
        src = self._source(source, "irecv")
        want = self._recv_tag(tag, "irecv")
        if src == PROC_NULL:
            return BridgedRequest(completed(), pickled=True)
        return BridgedRequest(e.p2p.irecv(self._core.p2p, None, src, want, "recv"),
                              pickled=True)

    def recv(self, buf=None, source=ANY_SOURCE, tag=ANY_TAG, status=None):
        """Receive a pickled object."""
        return self.irecv(buf, source, tag).wait(status)

    def sendrecv(self, sendobj, dest, sendtag=0, recvbuf=None, source=ANY_SOURCE,
                 recvtag=ANY_TAG, status=None):
        """Send an object and receive one."""
        r = self.irecv(recvbuf, source, recvtag)
        s = self.isend(sendobj, dest, sendtag)
        s.Wait()
        return r.wait(status)

    def iprobe(self, source=ANY_SOURCE, tag=ANY_TAG, status=None) -> bool:
        """Check whether a matching message (object) has arrived."""
        return self.Iprobe(source, tag, status)

    def probe(self, source=ANY_SOURCE, tag=ANY_TAG, status=None) -> bool:
        """Wait for a matching message (object) without receiving it."""
        return self.Probe(source, tag, status)


__all__ = ["PointToPointMethods", "as_int", "fill_status"]
