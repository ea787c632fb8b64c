"""The point-to-point methods of a bridged communicator: argument checks, then the transport.

Ranks are the communicator's; numbers are taken as mpi4py takes them (any integral value, a
float truncated); the errors name the call, the rank and what was wrong.
"""

from __future__ import annotations

import operator
import pickle
import warnings

from .._engine import buffers as _buffers
from .._engine.buffers import as_view
from .._engine.op import SENT, Op, completed, fill_status
from .._startup.native import MPI
from ..errors import BufferError_, RankError, TagError, TruncationError
from .message import Message
from .prequest import Prequest
from .request import BridgedRequest

ANY_SOURCE = MPI.ANY_SOURCE
_request_of = BridgedRequest.of  # one per message: the bound class method, looked up once
ANY_TAG = MPI.ANY_TAG
PROC_NULL = MPI.PROC_NULL
_PICKLE = pickle.HIGHEST_PROTOCOL


class _Attached:
    """The buffer attached for buffered sends: its size, and the copies in flight."""

    size = 0  # bytes attached (MPI.Attach_buffer); -1: automatic, no limit
    pending: list = []  # (op, nbytes) of buffered sends not known to be complete

    @classmethod
    def take(cls, nbytes: int, call: str) -> None:
        cls.pending = [(op, n) for op, n in cls.pending if not op.poll()]
        if cls.size < 0:
            return
        used = sum(n + MPI.BSEND_OVERHEAD for _, n in cls.pending)
        if used + nbytes + MPI.BSEND_OVERHEAD > cls.size:
            raise BufferError_(
                f"{call}: the attached buffer ({cls.size} bytes) cannot hold another "
                f"{nbytes} bytes ({used} in use; MPI_ERR_BUFFER): MPI.Attach_buffer a larger one"
            )


attached = _Attached


def _irecv_room(buf) -> int:
    """The bytes an object irecv can take: its buffer's, or mpi4py.rc.irecv_bufsz."""
    if buf is None:
        import mpi4py

        return int(getattr(mpi4py.rc, "irecv_bufsz", 32768))
    if isinstance(buf, int):
        return buf
    return memoryview(buf).nbytes


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


class PointToPointMethods:
    """Mixin of the bridged communicator: every point-to-point call of mpi4py's Comm."""

    __slots__ = ()

    # -- argument checks -----------------------------------------------------------------
    def _dest(self, dest, call: str) -> int:
        return self._peer(dest, "destination", call)

    def _source(self, source, call: str) -> int | None:
        source = as_int(source, "source rank", call)
        return None if source == ANY_SOURCE else self._peer(source, "source", call)

    def _peer(self, rank, what: str, call: str) -> int:
        """`rank` as an int if it is PROC_NULL or in the communicator, else a RankError."""
        rank = as_int(rank, f"{what} rank", call)
        if rank != PROC_NULL and not 0 <= rank < self._core.size:
            raise RankError(
                f"{call} on rank {self._core.rank}: {what} rank {rank} is out of range "
                f"for a communicator of size {self._core.size}"
            )
        return rank

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

    def _live(self, call: str):
        """The engine, if `call` may run on this communicator (else raise why not)."""
        return self._core.check_live(call)

    # -- buffer forms --------------------------------------------------------------------
    def _isend(self, buf, dest, tag, call: str, mode: str = "") -> BridgedRequest:
        return BridgedRequest.of(self._send_op(buf, dest, tag, call, mode))

    def _send_op(self, buf, dest, tag, call: str, mode: str = "") -> Op:
        """Start a send; mode "s" synchronous, "b" buffered, else standard (and ready)."""
        core = self._core
        e = self._live(call)
        if type(dest) is not int or not 0 <= dest < core.size:  # else checked already
            dest = self._dest(dest, call)
        if type(tag) is not int or not 0 <= tag <= self._tag_ub:
            tag = self._send_tag(tag, call)
        view = as_view(buf, writable=False, op=call)
        if dest == PROC_NULL:
            return completed()
        if mode == "b":  # a copy goes, and the call returns at once (MPI's buffered mode)
            attached.take(len(view), call)
            op = e.p2p.isend(core.p2p, memoryview(bytes(view)), dest, tag)
            attached.pending.append((op, len(view)))
            return completed()
        if not mode and e.p2p.send_now(core.p2p, view, dest, tag):
            return SENT  # a small message across: done once copied out, no operation of its own
        return e.p2p.isend(core.p2p, view, dest, tag, sync=mode == "s")

    def _irecv(self, buf, source, tag, call: str) -> BridgedRequest:
        return BridgedRequest.of(self._recv_op(*self._recv_args(buf, source, tag, call), call))

    def _recv_args(self, buf, source, tag, call: str) -> tuple:
        """(source, tag, view) of a receive, checked (source and tag None: any)."""
        core = self._core
        self._live(call)
        src = source if type(source) is int and 0 <= source < core.size else \
            self._source(source, call)
        want = tag if type(tag) is int and 0 <= tag <= self._tag_ub else \
            self._recv_tag(tag, call)
        return src, want, as_view(buf, writable=True, op=call)

    def _recv_op(self, src, want, view, call: str) -> Op:
        """Post a receive of checked arguments (see `_recv_args`)."""
        if src == PROC_NULL:
            _buffers.unpacks.clear()
            return completed()
        op = self._core.engine.p2p.irecv(self._core.p2p, view, src, want, call)
        if _buffers.unpacks:  # a derived datatype: unpacked once the bytes are in
            op.after = _buffers.take_unpacks()
        return op

    def Isend(self, buf, dest, tag=0):
        """Start a standard-mode send."""
        post = self._core.post_send
        if post is not None:  # a small one across, compiled (mmpi/_backend/cpost.c); else None
            req = post(buf, dest, tag)
            if req is not None:
                return req
        return _request_of(self._send_op(buf, dest, tag, "Isend"))

    def Send(self, buf, dest, tag=0) -> None:
        """Blocking standard-mode send."""
        post = self._core.post_send
        if post is not None and post(buf, dest, tag) is not None:  # done at once (_backend/cpost.c)
            return
        op = self._send_op(buf, dest, tag, "Send")
        if not op.done:  # a small forwarded message is done at once (see _backend.outbox.Outbox)
            self._core.engine.wait_for(op.poll, op.remote)
        if op.error is not None:
            raise op.error

    def Irecv(self, buf, source=ANY_SOURCE, tag=ANY_TAG):
        """Start a receive."""
        post = self._core.post_recv
        if post is not None:  # the common case, compiled (mmpi/_backend/cpost.c); else None
            req = post(buf, source, tag)
            if req is not None:
                return req
        return _request_of(self._recv_op(*self._recv_args(buf, source, tag, "Irecv"), "Irecv"))

    def Recv(self, buf, source=ANY_SOURCE, tag=ANY_TAG, status=None) -> None:
        """Blocking receive."""
        post = self._core.post_recv
        # the common case compiled (mmpi/_backend/cpost.c): nothing waits unmatched, so it posts
        op = None if post is None else post(buf, source, tag, "Recv")
        if op is None:
            src, want, view = self._recv_args(buf, source, tag, "Recv")
            if src != PROC_NULL and not _buffers.unpacks:  # a small one come already: no wait
                m = self._core.engine.p2p.recv_now(self._core.p2p, view, src, want)
                if m is not None:
                    fill_status(status, m.source, m.tag, m.nbytes)
                    return
            op = self._recv_op(src, want, view, "Recv")
        if not op.done:
            self._core.engine.wait_for(op.poll, op.remote)
        fill_status(status, op.source, op.tag, op.nbytes, op.error, op.cancelled)
        if op.error is not None:
            raise op.error

    def Ssend(self, buf, dest, tag=0) -> None:
        """Synchronous send: returns once a receive has matched the message."""
        self._isend(buf, dest, tag, "Ssend", "s").Wait()

    def Issend(self, buf, dest, tag=0):
        """Start a synchronous send."""
        return self._isend(buf, dest, tag, "Issend", "s")

    def Bsend(self, buf, dest, tag=0) -> None:
        """Buffered send (within the buffer attached with MPI.Attach_buffer)."""
        self._isend(buf, dest, tag, "Bsend", "b").Wait()

    def Ibsend(self, buf, dest, tag=0):
        """Start a buffered send."""
        return self._isend(buf, dest, tag, "Ibsend", "b")

    def Rsend(self, buf, dest, tag=0) -> None:
        """Ready send (as a standard send here)."""
        self._isend(buf, dest, tag, "Rsend").Wait()

    def Irsend(self, buf, dest, tag=0):
        """Start a ready send."""
        return self._isend(buf, dest, tag, "Irsend")

    def Sendrecv(self, sendbuf, dest, sendtag=0, recvbuf=None, source=ANY_SOURCE,
                 recvtag=ANY_TAG, status=None) -> None:
        """Send and receive at once (no deadlock between the two)."""
        r = self._irecv(recvbuf, source, recvtag, "Sendrecv")
        s = self._isend(sendbuf, dest, sendtag, "Sendrecv")
        s.Wait()
        r.Wait(status)

    def Isendrecv(self, sendbuf, dest, sendtag=0, recvbuf=None, source=ANY_SOURCE,
                  recvtag=ANY_TAG):
        """Start a send and a receive; the request completes when both have."""
        r = self._irecv(recvbuf, source, recvtag, "Isendrecv")._op
        s = self._send_op(sendbuf, dest, sendtag, "Isendrecv")
        return BridgedRequest(_both(r, s))

    def Sendrecv_replace(self, buf, dest, sendtag=0, source=ANY_SOURCE, recvtag=ANY_TAG,
                         status=None) -> None:
        """Send `buf`, then receive into it."""
        self.Isendrecv_replace(buf, dest, sendtag, source, recvtag).Wait(status)

    def Isendrecv_replace(self, buf, dest, sendtag=0, source=ANY_SOURCE, recvtag=ANY_TAG):
        """Start sending `buf` and receiving into it (the send goes from a copy)."""
        copy = memoryview(bytes(as_view(buf, writable=True, op="Isendrecv_replace")))
        r = self._irecv(buf, source, recvtag, "Isendrecv_replace")._op
        s = self._send_op(copy, dest, sendtag, "Isendrecv_replace")
        return BridgedRequest(_both(r, s))

    # -- persistent requests -------------------------------------------------------------
    def _init(self, buf, dest, tag, call: str, mode: str) -> Prequest:
        self._live(call)
        self._dest(dest, call)
        self._send_tag(tag, call)
        return Prequest.made(lambda: self._send_op(buf, dest, tag, call, mode), self._core)

    def Send_init(self, buf, dest, tag=0):
        """A persistent standard send."""
        return self._init(buf, dest, tag, "Send_init", "")

    def Ssend_init(self, buf, dest, tag=0):
        """A persistent synchronous send."""
        return self._init(buf, dest, tag, "Ssend_init", "s")

    def Bsend_init(self, buf, dest, tag=0):
        """A persistent buffered send."""
        return self._init(buf, dest, tag, "Bsend_init", "b")

    def Rsend_init(self, buf, dest, tag=0):
        """A persistent ready send."""
        return self._init(buf, dest, tag, "Rsend_init", "")

    def Recv_init(self, buf, source=ANY_SOURCE, tag=ANY_TAG):
        """A persistent receive."""
        self._live("Recv_init")
        self._source(source, "Recv_init")
        self._recv_tag(tag, "Recv_init")
        return Prequest.made(lambda: self._irecv(buf, source, tag, "Recv_init")._op,
                             self._core)

    # -- matched probes ------------------------------------------------------------------
    def _mprobe(self, source, tag, status, call: str, wait: bool, pickled: bool):
        e, src, want = self._peek(source, tag, call)
        if src == PROC_NULL:
            fill_status(status, PROC_NULL, ANY_TAG, 0)
            return MPI.Message(MPI.MESSAGE_NO_PROC)  # a new one: receiving it makes it NULL
        ctx = self._core.p2p
        found = []

        def ready() -> bool:
            m = ctx.queues.peek(src, want)
            if m is not None:
                found.append(m)
            return m is not None

        if wait:
            e.wait_for(ready)
        elif not e.test(ready):
            return None
        m = e.p2p.take(ctx, found[0])
        fill_status(status, m.source, m.tag, m.nbytes)
        return Message(m, e.p2p, pickled)

    def Mprobe(self, source=ANY_SOURCE, tag=ANY_TAG, status=None):
        """Wait for a matching message and take it: receive it with the Message returned."""
        return self._mprobe(source, tag, status, "Mprobe", True, False)

    def Improbe(self, source=ANY_SOURCE, tag=ANY_TAG, status=None):
        """Take a matching message if one has arrived (a Message), else None."""
        return self._mprobe(source, tag, status, "Improbe", False, False)

    def mprobe(self, source=ANY_SOURCE, tag=ANY_TAG, status=None):
        """Mprobe, for an object."""
        return self._mprobe(source, tag, status, "mprobe", True, True)

    def improbe(self, source=ANY_SOURCE, tag=ANY_TAG, status=None):
        """Improbe, for an object."""
        return self._mprobe(source, tag, status, "improbe", False, True)

    # -- probes --------------------------------------------------------------------------
    def _peek(self, source, tag, call: str):
        e = self._live(call)
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
            error = e.departures.doomed(ctx, "Probe", src, want, "probe")
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
        e = self._live("isend")
        dest = self._dest(dest, "isend")
        tag = self._send_tag(tag, "isend")
        if dest == PROC_NULL:
            return BridgedRequest(completed())
        data = pickle.dumps(obj, _PICKLE)
        return BridgedRequest(e.p2p.isend(self._core.p2p, memoryview(data), dest, tag))

    def send(self, obj, dest, tag=0) -> None:
        """Send a picklable object."""
        self.isend(obj, dest, tag).Wait()

    def _objsend(self, obj, dest, tag, call: str, mode: str):
        return self._isend(memoryview(pickle.dumps(obj, _PICKLE)), dest, tag, call, mode)

    def issend(self, obj, dest, tag=0):
        """Start a synchronous send of an object."""
        return self._objsend(obj, dest, tag, "issend", "s")

    def ssend(self, obj, dest, tag=0) -> None:
        """Synchronous send of an object."""
        self.issend(obj, dest, tag).Wait()

    def ibsend(self, obj, dest, tag=0):
        """Start a buffered send of an object."""
        return self._objsend(obj, dest, tag, "ibsend", "b")

    def bsend(self, obj, dest, tag=0) -> None:
        """Buffered send of an object."""
        self.ibsend(obj, dest, tag).Wait()

    def irecv(self, buf=None, source=ANY_SOURCE, tag=ANY_TAG):
        """Start receiving a pickled object (`buf` is accepted for mpi4py compatibility)."""
        e = self._live("irecv")
        src = self._source(source, "irecv")
        want = self._recv_tag(tag, "irecv")
        if src == PROC_NULL:
            return BridgedRequest(completed(), pickled=True)
        op = e.p2p.irecv(self._core.p2p, None, src, want, "irecv")
        # as mpi4py's: the object must fit `buf`, or mpi4py.rc.irecv_bufsz bytes without one
        room = _irecv_room(buf)

        def fits(nbytes: int) -> None:
            if nbytes > room:
                op.fail(TruncationError(
                    f"irecv on rank {self._core.rank}: message from rank {op.source} with tag "
                    f"{op.tag} has {nbytes} bytes but the receive buffer holds only {room} "
                    "(mpi4py.rc.irecv_bufsz, or the buf given; MPI_ERR_TRUNCATE)"))

        op.after = [fits]
        return BridgedRequest(op, pickled=True)

    def _recv_obj(self, source, tag) -> BridgedRequest:
        """A receive of a pickled object of any size (recv, sendrecv: mpi4py probes first)."""
        e = self._live("recv")
        src = self._source(source, "recv")
        want = self._recv_tag(tag, "recv")
        if src == PROC_NULL:
            return BridgedRequest(completed(), pickled=True)
        return BridgedRequest(e.p2p.irecv(self._core.p2p, None, src, want, "recv"),
                              pickled=True)

    def recv(self, buf=None, source=ANY_SOURCE, tag=ANY_TAG, status=None):
        """Receive a pickled object."""
        if buf is not None:
            warnings.warn("the 'buf' argument is deprecated", UserWarning, stacklevel=2)
        return self._recv_obj(source, tag).wait(status)

    def sendrecv(self, sendobj, dest, sendtag=0, recvbuf=None, source=ANY_SOURCE,
                 recvtag=ANY_TAG, status=None):
        """Send an object and receive one."""
        r = self._recv_obj(source, recvtag)
        s = self.isend(sendobj, dest, sendtag)
        s.Wait()
        return r.wait(status)

    def iprobe(self, source=ANY_SOURCE, tag=ANY_TAG, status=None) -> bool:
        """Check whether a matching message (object) has arrived."""
        return self.Iprobe(source, tag, status)

    def probe(self, source=ANY_SOURCE, tag=ANY_TAG, status=None) -> bool:
        """Wait for a matching message (object) without receiving it."""
        return self.Probe(source, tag, status)


def _both(r: Op, s: Op) -> Op:
    """An operation complete once receive `r` and send `s` are, with `r`'s status."""
    op = Op()

    def finish() -> None:
        op.source, op.tag, op.nbytes = r.source, r.tag, r.nbytes
        if r.error is not None or s.error is not None:
            raise r.error or s.error

    op.start([], finish, more=lambda: r.poll() & s.poll())
    op.remote = r.remote
    return op


__all__ = ["PointToPointMethods", "as_int", "attached"]
