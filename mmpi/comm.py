"""The bridged communicator: mpi4py's Comm API, argument checks, delegation to the engine."""

from __future__ import annotations

import functools
import pickle

from mpi4py import MPI

from . import _collectives as C
from ._buffers import as_view
from ._engine import Context, Engine
from ._topology import Layout
from .errors import RankError, TagError
from .request import Request, completed

ANY_SOURCE = MPI.ANY_SOURCE
ANY_TAG = MPI.ANY_TAG
PROC_NULL = MPI.PROC_NULL
_PICKLE_PROTOCOL = pickle.HIGHEST_PROTOCOL



def _collective(method):
    """Tell the engine when a collective call starts and ends (engine Rule 6).

    Only completed calls count: a call refused for bad arguments does not. Its fields are set
    here rather than through engine methods: a small bridged collective's own Python is its
    critical path on oversubscribed cores (see `_collectives._Ctx.of`), and two method calls
    were half of this wrapper's 0.37 us.
    """
    op = method.__name__

    @functools.wraps(method)
    def call(self, *args, **kwargs):
        e = self._engine
        e._coll_op = op
        e._in_coll = True
        if e.gone:
            e._check_gone()
        try:
            result = method(self, *args, **kwargs)
        except BaseException:
            e._in_coll = False  # a call refused or failed does not count
            raise
        e._in_coll = False
        e.colls += 1
        return result

    return call


class Comm:
    """A communicator spanning both clusters (mirrors mpi4py.MPI.Intracomm)."""

    def __init__(self, engine: Engine, p2p: Context, coll: Context, name: str) -> None:
        self._engine = engine
        self._p2p = p2p
        self._coll = coll
        self._cctx = None  # _collectives' context for this communicator, made on first use
        self._name = name
        self._size = engine.layout.size
        self._rank = engine.vrank
        self._tag_ub = engine.local.Get_attr(MPI.TAG_UB)

    # -- identity ------------------------------------------------------------------------
    def Get_rank(self) -> int:
        """Virtual rank of this process."""
        return self._rank

    def Get_size(self) -> int:
        """Number of processes in both clusters."""
        return self._size

    @property
    def rank(self) -> int:
        """Virtual rank of this process."""
        return self._rank

    @property
    def size(self) -> int:
        """Number of processes in both clusters."""
        return self._size

    @property
    def layout(self) -> Layout:
        """The virtual-rank layout (low ranks first)."""
        return self._engine.layout

    @property
    def cluster(self) -> str:
        """Name of this process's cluster: 'low' or 'high'."""
        return self._engine.cluster

    def Get_name(self) -> str:
        """Name of the communicator."""
        return self._name

    def Is_inter(self) -> bool:
        """The bridged world is an intracommunicator."""
        return False

    def Is_intra(self) -> bool:
        """The bridged world is an intracommunicator."""
        return True

    def Get_attr(self, keyval: int):
        """Communicator attributes; TAG_UB is the largest user tag."""
        if keyval == MPI.TAG_UB:
            return self._tag_ub
        return self._engine.local.Get_attr(keyval)

    def Abort(self, errorcode: int = 0):
        """Abort this cluster's job; mmpi-run then stops the rest of the bridged job."""
        self._engine.local.Abort(errorcode)

    def __repr__(self) -> str:
        e = self._engine
        return f"<mmpi.Comm {self._name} rank {self._rank}/{self._size} ({e.cluster})>"

    # -- argument checks -----------------------------------------------------------------
    def _dest(self, dest: int, op: str) -> int:
        if dest == PROC_NULL:
            return dest
        if not isinstance(dest, int) or not 0 <= dest < self._size:
            raise RankError(
                f"{op} on rank {self._rank}: destination rank {dest!r} is out of range "
                f"for a communicator of size {self._size}"
            )
        return dest

    def _source(self, source: int, op: str) -> int | None:
        if source == ANY_SOURCE:
            return None
        if source == PROC_NULL:
            return source
        if not isinstance(source, int) or not 0 <= source < self._size:
            raise RankError(
                f"{op} on rank {self._rank}: source rank {source!r} is out of range "
                f"for a communicator of size {self._size}"
            )
        return source

    def _send_tag(self, tag: int, op: str) -> int:
        if not isinstance(tag, int) or not 0 <= tag <= self._tag_ub:
            raise TagError(
                f"{op} on rank {self._rank}: tag {tag!r} is invalid "
                f"(must be 0..{self._tag_ub}, the TAG_UB)"
            )
        return tag

    def _recv_tag(self, tag: int, op: str) -> int | None:
        if tag == ANY_TAG:
            return None
        return self._send_tag(tag, op)

    # -- buffer point-to-point -----------------------------------------------------------
    def _isend(self, buf, dest: int, tag: int, op: str) -> Request:
        self._engine.check()
        dest = self._dest(dest, op)
        tag = self._send_tag(tag, op)
        view = as_view(buf, writable=False, op=op)
        if dest == PROC_NULL:
            return completed(self._engine)
        return self._engine.isend(self._p2p, view, dest, tag)

    def _irecv(self, buf, source: int, tag: int, op: str) -> Request:
        self._engine.check()
        src = self._source(source, op)
        want = self._recv_tag(tag, op)
        view = as_view(buf, writable=True, op=op)
        if src == PROC_NULL:
            return completed(self._engine)
        return self._engine.irecv(self._p2p, view, src, want, op)

    def Isend(self, buf, dest: int, tag: int = 0) -> Request:
        """Start a standard-mode send."""
        return self._isend(buf, dest, tag, "Isend")

    def Send(self, buf, dest: int, tag: int = 0) -> None:
        """Blocking standard-mode send."""
        self._isend(buf, dest, tag, "Send").Wait()

    def Irecv(self, buf, source: int = ANY_SOURCE, tag: int = ANY_TAG) -> Request:
        """Start a receive."""
        return self._irecv(buf, source, tag, "Irecv")

    def Recv(self, buf, source: int = ANY_SOURCE, tag: int = ANY_TAG,
             status: MPI.Status | None = None) -> None:
        """Blocking receive."""
        self._irecv(buf, source, tag, "Recv").Wait(status)

    def Sendrecv(self, sendbuf, dest: int, sendtag: int = 0, recvbuf=None,
                 source: int = ANY_SOURCE, recvtag: int = ANY_TAG,
                 status: MPI.Status | None = None) -> None:
        """Send and receive at once (no deadlock between the two)."""
        r = self._irecv(recvbuf, source, recvtag, "Sendrecv")
        s = self._isend(sendbuf, dest, sendtag, "Sendrecv")
        Request.Waitall([s])
        r.Wait(status)

    def Iprobe(self, source: int = ANY_SOURCE, tag: int = ANY_TAG,
               status: MPI.Status | None = None) -> bool:
        """Check, without receiving, whether a matching message has arrived."""
        self._engine.check()
        src = self._source(source, "Iprobe")
        want = self._recv_tag(tag, "Iprobe")
        if src == PROC_NULL:
            _fill_null(status)
            return True
        m = self._engine.probe(self._p2p, src, want)
        if m is None:
            return False
        _fill(status, m.source, m.tag, m.nbytes)
        return True

    def Probe(self, source: int = ANY_SOURCE, tag: int = ANY_TAG,
              status: MPI.Status | None = None) -> bool:
        """Wait until a matching message has arrived, without receiving it."""
        self._engine.check()
        src = self._source(source, "Probe")
        want = self._recv_tag(tag, "Probe")
        if src == PROC_NULL:
            _fill_null(status)
            return True
        q = self._p2p.queues
        found = []
        e = self._engine

        def ready() -> bool:
            m = q.peek(src, want)
            if m is not None:
                found.append(m)
                return True
            error = e.doomed("Probe", src, want, "probe")
            if error is not None:
                raise error
            return False

        self._engine.wait_for(ready)
        m = found[0]
        _fill(status, m.source, m.tag, m.nbytes)
        return True

    # -- pickle point-to-point -----------------------------------------------------------
    def isend(self, obj, dest: int, tag: int = 0) -> Request:
        """Start sending a picklable object."""
        self._engine.check()
        dest = self._dest(dest, "isend")
        tag = self._send_tag(tag, "isend")
        if dest == PROC_NULL:
            return completed(self._engine)
        data = pickle.dumps(obj, _PICKLE_PROTOCOL)
        return self._engine.isend(self._p2p, memoryview(data), dest, tag)

    def send(self, obj, dest: int, tag: int = 0) -> None:
        """Send a picklable object."""
        self.isend(obj, dest, tag).Wait()

    def irecv(self, buf=None, source: int = ANY_SOURCE, tag: int = ANY_TAG) -> Request:
        """Start receiving a pickled object (`buf` is accepted for mpi4py compatibility)."""
        self._engine.check()
        src = self._source(source, "irecv")
        want = self._recv_tag(tag, "irecv")
        if src == PROC_NULL:
            return completed(self._engine, pickled=True)
        return self._engine.irecv(self._p2p, None, src, want, "recv", pickled=True)

    def recv(self, buf=None, source: int = ANY_SOURCE, tag: int = ANY_TAG,
             status: MPI.Status | None = None):
        """Receive a pickled object."""
        return self.irecv(buf, source, tag).wait(status)

    def sendrecv(self, sendobj, dest: int, sendtag: int = 0, recvbuf=None,
                 source: int = ANY_SOURCE, recvtag: int = ANY_TAG,
                 status: MPI.Status | None = None):
        """Send an object and receive one."""
        r = self.irecv(recvbuf, source, recvtag)
        s = self.isend(sendobj, dest, sendtag)
        s.Wait()
        return r.wait(status)

    def iprobe(self, source: int = ANY_SOURCE, tag: int = ANY_TAG,
               status: MPI.Status | None = None) -> bool:
        """Check whether a matching message (object) has arrived."""
        return self.Iprobe(source, tag, status)

    def probe(self, source: int = ANY_SOURCE, tag: int = ANY_TAG,
              status: MPI.Status | None = None) -> bool:
        """Wait for a matching message (object) without receiving it."""
        return self.Probe(source, tag, status)

    # -- synchronisation -----------------------------------------------------------------
    @_collective
    def Barrier(self) -> None:
        """Tight barrier: nobody leaves before every process of both clusters has entered.

        Each cluster first completes a native barrier (so its leader knows all of its ranks
        are in), the two leaders exchange a token through the forwarder, and a second native
        barrier holds every rank until its leader has the other cluster's token.
        """
        C.barrier(self)

    def barrier(self) -> None:
        """Tight barrier (lowercase alias)."""
        self.Barrier()

    # -- collectives, buffer form (see _collectives for how each crosses the zipper) ------
    @_collective
    def Bcast(self, buf, root: int = 0) -> None:
        """Broadcast from `root` (one crossing, then a native bcast on the far side)."""
        C.bcast(self, buf, root)

    @_collective
    def Reduce(self, sendbuf, recvbuf, op=MPI.SUM, root: int = 0) -> None:
        """Reduce to `root`: native reduce per cluster, one crossing, one combine."""
        C.reduce(self, sendbuf, recvbuf, op, root)

    @_collective
    def Allreduce(self, sendbuf, recvbuf, op=MPI.SUM) -> None:
        """Reduce to all: per-cluster reduce, leaders swap partials, per-cluster bcast."""
        C.allreduce(self, sendbuf, recvbuf, op)

    @_collective
    def Alltoall(self, sendbuf, recvbuf) -> None:
        """All-to-all with equal blocks; cross blocks move as one message per direction."""
        C.alltoall(self, sendbuf, recvbuf)

    @_collective
    def Alltoallv(self, sendbuf, recvbuf) -> None:
        """All-to-all with per-peer counts and displacements."""
        C.alltoallv(self, sendbuf, recvbuf)

    @_collective
    def Gather(self, sendbuf, recvbuf, root: int = 0) -> None:
        """Gather equal blocks to `root`."""
        C.gather(self, sendbuf, recvbuf, root)

    @_collective
    def Gatherv(self, sendbuf, recvbuf, root: int = 0) -> None:
        """Gather blocks of varying size to `root`."""
        C.gatherv(self, sendbuf, recvbuf, root)

    @_collective
    def Scatter(self, sendbuf, recvbuf, root: int = 0) -> None:
        """Scatter equal blocks from `root`."""
        C.scatter(self, sendbuf, recvbuf, root)

    @_collective
    def Scatterv(self, sendbuf, recvbuf, root: int = 0) -> None:
        """Scatter blocks of varying size from `root`."""
        C.scatterv(self, sendbuf, recvbuf, root)

    @_collective
    def Allgather(self, sendbuf, recvbuf) -> None:
        """Gather equal blocks to every rank."""
        C.allgather(self, sendbuf, recvbuf)

    @_collective
    def Allgatherv(self, sendbuf, recvbuf) -> None:
        """Gather blocks of varying size to every rank."""
        C.allgatherv(self, sendbuf, recvbuf)

    @_collective
    def Reduce_scatter_block(self, sendbuf, recvbuf, op=MPI.SUM) -> None:
        """Reduce, then scatter equal blocks of the result."""
        C.reduce_scatter_block(self, sendbuf, recvbuf, op)

    @_collective
    def Scan(self, sendbuf, recvbuf, op=MPI.SUM) -> None:
        """Inclusive prefix reduction in virtual-rank order."""
        C.scan(self, sendbuf, recvbuf, op, exclusive=False)

    @_collective
    def Exscan(self, sendbuf, recvbuf, op=MPI.SUM) -> None:
        """Exclusive prefix reduction in virtual-rank order (rank 0's result is undefined)."""
        C.scan(self, sendbuf, recvbuf, op, exclusive=True)

    # -- collectives, pickle form -------------------------------------------------------
    @_collective
    def bcast(self, obj, root: int = 0):
        """Broadcast a picklable object."""
        return C.bcast_obj(self, obj, root)

    @_collective
    def reduce(self, sendobj, op=MPI.SUM, root: int = 0):
        """Reduce objects to `root` (op: an MPI.Op or a two-argument callable)."""
        return C.reduce_obj(self, sendobj, op, root)

    @_collective
    def allreduce(self, sendobj, op=MPI.SUM):
        """Reduce objects to every rank."""
        return C.allreduce_obj(self, sendobj, op)

    @_collective
    def gather(self, sendobj, root: int = 0):
        """Gather objects to `root` (a list there, None elsewhere)."""
        return C.gather_obj(self, sendobj, root)

    @_collective
    def scatter(self, sendobj, root: int = 0):
        """Scatter a list of objects from `root`."""
        return C.scatter_obj(self, sendobj, root)

    @_collective
    def allgather(self, sendobj):
        """Gather objects to every rank."""
        return C.allgather_obj(self, sendobj)

    @_collective
    def alltoall(self, sendobj):
        """Exchange one object with every rank."""
        return C.alltoall_obj(self, sendobj)


def _fill(status: MPI.Status | None, source: int, tag: int, nbytes: int) -> None:
    if status is not None:
        status.Set_source(source)
        status.Set_tag(tag)
        status.Set_elements(MPI.BYTE, nbytes)
        status.Set_error(MPI.SUCCESS)


def _fill_null(status: MPI.Status | None) -> None:
    _fill(status, PROC_NULL, ANY_TAG, 0)
