"""The collective methods of a bridged communicator: check the arguments, then run the steps.

A communicator across the zipper runs the cluster-aware algorithms of `_collectives` (to the
end for a blocking call; a non-blocking call returns a request and its steps advance whenever
the rank polls). A communicator inside one cluster hands the call, buffers as given, to the
native non-blocking collective of its native communicator, and waits politely.
"""

from __future__ import annotations

import threading

from .._collectives import alltoall as A
from .._collectives import objects as O
from .._collectives import reductions as R
from .._collectives import rooted as T
from .._collectives.common import checked
from .._collectives.run import Pending
from .._engine import buffers as _buffers
from .._engine.op import Op
from .._startup.native import MPI
from .request import BridgedRequest

_SUM = MPI.SUM
_IN_PLACE = MPI.IN_PLACE


def _ip(buf):
    """mpi4py reads None where a collective allows MPI.IN_PLACE as MPI.IN_PLACE."""
    return _IN_PLACE if buf is None else buf


def _unpacking(steps):
    """`steps`, then the unpacks their buffers' parsing left (derived datatypes), if any."""
    if not _buffers.unpacks:
        return steps
    todo = _buffers.take_unpacks()

    def run():
        result = yield from steps
        for unpack in todo:
            unpack()
        return result

    return run()


class CollectiveMethods:
    """Mixin of the bridged communicator: mpi4py's collectives, blocking and not."""

    __slots__ = ()

    def _c(self, name: str):
        """The collectives' view of this communicator, for a call of `name`."""
        core = self._core
        if core.engine.finalized or core.freed:
            core.check_live(name)
        c = core.collective
        if not core.pending:
            c.name = name  # for errors found while checking the arguments
        if _buffers.unpacks:  # left by a call whose arguments were refused
            _buffers.unpacks.clear()
        return c

    def _root_ip(self, buf, root):
        """`_ip` at the root, where a rooted collective allows MPI.IN_PLACE; as given elsewhere."""
        return _ip(buf) if root == self._core.rank else buf

    def _run(self, name: str, steps):
        """Run a blocking collective call's steps (then unpack derived-datatype results)."""
        return self._core.run(name, _unpacking(steps))

    def _submit(self, name: str, steps) -> BridgedRequest:
        """Start a non-blocking collective call: queued behind earlier ones on this comm."""
        pending = Pending(self._core, name, _unpacking(steps))
        self._core.submit(pending)
        return BridgedRequest(pending)

    def _native(self, name: str, *args):
        """A call on a communicator inside one cluster: the native one, waited politely."""
        core = self._core
        if core.freed:
            core.check_live(name[0].upper() + name[1:])
        core.engine.check()
        if core.pending:
            core.flush()
        req = getattr(core.collective.local, "I" + name)(*args)
        if not req.Test():
            core.engine.wait_one(req)
        core.calls += 1

    def _inative(self, name: str, *args) -> BridgedRequest:
        core = self._core
        if core.freed:
            core.check_live(name)
        core.engine.check()
        op = Op()
        op.start([getattr(core.collective.local, name)(*args)])
        core.calls += 1
        return BridgedRequest(op)

    # -- blocking, buffer forms ----------------------------------------------------------
    def Barrier(self) -> None:
        """Tight barrier: nobody leaves before every process has entered."""
        front = self._core.front  # the common case compiled, if it is one
        if front and front.barrier():
            return
        if not self._core.spans:
            return self._native("barrier")
        self._run("Barrier", R.barrier(self._c("Barrier"), True))

    def Bcast(self, buf, root=0) -> None:
        """Broadcast from `root`."""
        front = self._core.front
        if front and front.bcast(buf, root):
            return
        if not self._core.spans:
            return self._native("bcast", buf, root)
        self._run("Bcast", T.bcast(self._c("Bcast"), buf, root, True))

    def Reduce(self, sendbuf, recvbuf, op=_SUM, root=0) -> None:
        """Reduce to `root`."""
        front = self._core.front
        if front and front.reduce(sendbuf, recvbuf, op, root):
            return
        if not self._core.spans:
            return self._native("reduce", sendbuf, recvbuf, op, root)
        self._run("Reduce",
                  R.reduce(self._c("Reduce"), self._root_ip(sendbuf, root), recvbuf, op, root,
                           True))

    def Allreduce(self, sendbuf, recvbuf, op=_SUM) -> None:
        """Reduce to all."""
        front = self._core.front
        if front and front.allreduce(sendbuf, recvbuf, op):
            return
        if not self._core.spans:
            return self._native("allreduce", sendbuf, recvbuf, op)
        self._run("Allreduce", R.allreduce(self._c("Allreduce"), _ip(sendbuf), recvbuf, op, True))

    def Alltoall(self, sendbuf, recvbuf) -> None:
        """All-to-all with equal blocks."""
        if not self._core.spans:
            return self._native("alltoall", sendbuf, recvbuf)
        self._run("Alltoall",
                  A.alltoall(self._c("Alltoall"), _ip(sendbuf), recvbuf, blocking=True))

    def Alltoallv(self, sendbuf, recvbuf) -> None:
        """All-to-all with per-peer counts and displacements."""
        if not self._core.spans:
            return self._native("alltoallv", sendbuf, recvbuf)
        self._run("Alltoallv", A.alltoallv(self._c("Alltoallv"), _ip(sendbuf), recvbuf))

    def Alltoallw(self, sendbuf, recvbuf) -> None:
        """All-to-all with a datatype per peer."""
        if not self._core.spans:
            return self._native("alltoallw", sendbuf, recvbuf)
        self._run("Alltoallw", A.alltoallw(self._c("Alltoallw"), _ip(sendbuf), recvbuf))

    def Gather(self, sendbuf, recvbuf, root=0) -> None:
        """Gather equal blocks to `root`."""
        if not self._core.spans:
            return self._native("gather", sendbuf, recvbuf, root)
        self._run("Gather",
                  T.gather(self._c("Gather"), self._root_ip(sendbuf, root), recvbuf, root))

    def Gatherv(self, sendbuf, recvbuf, root=0) -> None:
        """Gather blocks of varying size to `root`."""
        if not self._core.spans:
            return self._native("gatherv", sendbuf, recvbuf, root)
        self._run("Gatherv",
                  T.gatherv(self._c("Gatherv"), self._root_ip(sendbuf, root), recvbuf, root))

    def Scatter(self, sendbuf, recvbuf, root=0) -> None:
        """Scatter equal blocks from `root`."""
        if not self._core.spans:
            return self._native("scatter", sendbuf, recvbuf, root)
        self._run("Scatter",
                  T.scatter(self._c("Scatter"), sendbuf, self._root_ip(recvbuf, root), root))

    def Scatterv(self, sendbuf, recvbuf, root=0) -> None:
        """Scatter blocks of varying size from `root`."""
        if not self._core.spans:
            return self._native("scatterv", sendbuf, recvbuf, root)
        self._run("Scatterv",
                  T.scatterv(self._c("Scatterv"), sendbuf, self._root_ip(recvbuf, root), root))

    def Allgather(self, sendbuf, recvbuf) -> None:
        """Gather equal blocks to every rank."""
        if not self._core.spans:
            return self._native("allgather", sendbuf, recvbuf)
        self._run("Allgather", A.allgather(self._c("Allgather"), _ip(sendbuf), recvbuf))

    def Allgatherv(self, sendbuf, recvbuf) -> None:
        """Gather blocks of varying size to every rank."""
        if not self._core.spans:
            return self._native("allgatherv", sendbuf, recvbuf)
        self._run("Allgatherv", A.allgatherv(self._c("Allgatherv"), _ip(sendbuf), recvbuf))

    def Reduce_scatter_block(self, sendbuf, recvbuf, op=_SUM) -> None:
        """Reduce, then scatter equal blocks of the result."""
        if not self._core.spans:
            return self._native("reduce_scatter_block", sendbuf, recvbuf, op)
        c = self._c("Reduce_scatter_block")
        self._run("Reduce_scatter_block", R.reduce_scatter_block(c, _ip(sendbuf), recvbuf, op))

    def Reduce_scatter(self, sendbuf, recvbuf, recvcounts=None, op=_SUM) -> None:
        """Reduce, then scatter blocks of `recvcounts[i]` elements to rank i."""
        if not self._core.spans:
            return self._native("reduce_scatter", sendbuf, recvbuf, recvcounts, op)
        c = self._c("Reduce_scatter")
        self._run("Reduce_scatter", R.reduce_scatter(c, _ip(sendbuf), recvbuf, recvcounts, op))

    def Scan(self, sendbuf, recvbuf, op=_SUM) -> None:
        """Inclusive prefix reduction in rank order."""
        if not self._core.spans:
            return self._native("scan", sendbuf, recvbuf, op)
        self._run("Scan", R.scan(self._c("Scan"), _ip(sendbuf), recvbuf, op, False))

    def Exscan(self, sendbuf, recvbuf, op=_SUM) -> None:
        """Exclusive prefix reduction in rank order (rank 0's result is undefined)."""
        if not self._core.spans:
            return self._native("exscan", sendbuf, recvbuf, op)
        self._run("Exscan", R.scan(self._c("Exscan"), _ip(sendbuf), recvbuf, op, True))

    # -- non-blocking, buffer forms ------------------------------------------------------
    def Ibarrier(self):
        """Non-blocking barrier."""
        if not self._core.spans:
            return self._inative("Ibarrier")
        return self._submit("Ibarrier", R.barrier(self._c("Ibarrier")))

    def Ibcast(self, buf, root=0):
        """Non-blocking broadcast."""
        if not self._core.spans:
            return self._inative("Ibcast", buf, root)
        return self._submit("Ibcast", T.bcast(self._c("Ibcast"), buf, root))

    def Ireduce(self, sendbuf, recvbuf, op=_SUM, root=0):
        """Non-blocking reduce."""
        if not self._core.spans:
            return self._inative("Ireduce", sendbuf, recvbuf, op, root)
        c = self._c("Ireduce")
        return self._submit("Ireduce", R.reduce(c, self._root_ip(sendbuf, root), recvbuf, op, root))

    def Iallreduce(self, sendbuf, recvbuf, op=_SUM):
        """Non-blocking allreduce."""
        if not self._core.spans:
            return self._inative("Iallreduce", sendbuf, recvbuf, op)
        return self._submit("Iallreduce",
                            R.allreduce(self._c("Iallreduce"), _ip(sendbuf), recvbuf, op))

    def Ialltoall(self, sendbuf, recvbuf):
        """Non-blocking alltoall."""
        if not self._core.spans:
            return self._inative("Ialltoall", sendbuf, recvbuf)
        return self._submit("Ialltoall", A.alltoall(self._c("Ialltoall"), _ip(sendbuf), recvbuf))

    def Ialltoallv(self, sendbuf, recvbuf):
        """Non-blocking alltoallv."""
        if not self._core.spans:
            return self._inative("Ialltoallv", sendbuf, recvbuf)
        return self._submit("Ialltoallv",
                            A.alltoallv(self._c("Ialltoallv"), _ip(sendbuf), recvbuf))

    def Ialltoallw(self, sendbuf, recvbuf):
        """Non-blocking alltoallw."""
        if not self._core.spans:
            return self._inative("Ialltoallw", sendbuf, recvbuf)
        return self._submit("Ialltoallw",
                            A.alltoallw(self._c("Ialltoallw"), _ip(sendbuf), recvbuf))

    def Igather(self, sendbuf, recvbuf, root=0):
        """Non-blocking gather."""
        if not self._core.spans:
            return self._inative("Igather", sendbuf, recvbuf, root)
        c = self._c("Igather")
        return self._submit("Igather", T.gather(c, self._root_ip(sendbuf, root), recvbuf, root))

    def Igatherv(self, sendbuf, recvbuf, root=0):
        """Non-blocking gatherv."""
        if not self._core.spans:
            return self._inative("Igatherv", sendbuf, recvbuf, root)
        c = self._c("Igatherv")
        return self._submit("Igatherv", T.gatherv(c, self._root_ip(sendbuf, root), recvbuf, root))

    def Iscatter(self, sendbuf, recvbuf, root=0):
        """Non-blocking scatter."""
        if not self._core.spans:
            return self._inative("Iscatter", sendbuf, recvbuf, root)
        c = self._c("Iscatter")
        return self._submit("Iscatter", T.scatter(c, sendbuf, self._root_ip(recvbuf, root), root))

    def Iscatterv(self, sendbuf, recvbuf, root=0):
        """Non-blocking scatterv."""
        if not self._core.spans:
            return self._inative("Iscatterv", sendbuf, recvbuf, root)
        return self._submit("Iscatterv",
                            T.scatterv(self._c("Iscatterv"),
                                       sendbuf, self._root_ip(recvbuf, root), root))

    def Iallgather(self, sendbuf, recvbuf):
        """Non-blocking allgather."""
        if not self._core.spans:
            return self._inative("Iallgather", sendbuf, recvbuf)
        return self._submit("Iallgather",
                            A.allgather(self._c("Iallgather"), _ip(sendbuf), recvbuf))

    def Iallgatherv(self, sendbuf, recvbuf):
        """Non-blocking allgatherv."""
        if not self._core.spans:
            return self._inative("Iallgatherv", sendbuf, recvbuf)
        return self._submit("Iallgatherv",
                            A.allgatherv(self._c("Iallgatherv"), _ip(sendbuf), recvbuf))

    def Ireduce_scatter_block(self, sendbuf, recvbuf, op=_SUM):
        """Non-blocking reduce_scatter_block."""
        if not self._core.spans:
            return self._inative("Ireduce_scatter_block", sendbuf, recvbuf, op)
        c = self._c("Ireduce_scatter_block")
        return self._submit("Ireduce_scatter_block",
                            R.reduce_scatter_block(c, _ip(sendbuf), recvbuf, op))

    def Ireduce_scatter(self, sendbuf, recvbuf, recvcounts=None, op=_SUM):
        """Non-blocking reduce_scatter."""
        if not self._core.spans:
            return self._inative("Ireduce_scatter", sendbuf, recvbuf, recvcounts, op)
        c = self._c("Ireduce_scatter")
        return self._submit("Ireduce_scatter",
                            R.reduce_scatter(c, _ip(sendbuf), recvbuf, recvcounts, op))

    def Iscan(self, sendbuf, recvbuf, op=_SUM):
        """Non-blocking inclusive scan."""
        if not self._core.spans:
            return self._inative("Iscan", sendbuf, recvbuf, op)
        return self._submit("Iscan", R.scan(self._c("Iscan"), _ip(sendbuf), recvbuf, op, False))

    def Iexscan(self, sendbuf, recvbuf, op=_SUM):
        """Non-blocking exclusive scan."""
        if not self._core.spans:
            return self._inative("Iexscan", sendbuf, recvbuf, op)
        return self._submit("Iexscan", R.scan(self._c("Iexscan"), _ip(sendbuf), recvbuf, op, True))

    # -- pickle forms (the same steps inside one cluster: mpi4py's block inside MPI) ------
    def _lock(self, key: str):
        """The communicator's lock `key`, held as mpi4py's object collectives hold theirs.

        `MPI._comm_lock`: a program's threads and mpi4py.util.pkl5 take the same ones.
        """
        locks = self._core.locks
        lock = locks.get(key)
        if lock is None:
            lock = locks.setdefault(key, threading.Lock())
        return lock

    def barrier(self) -> None:
        """Tight barrier (lowercase alias)."""
        self.Barrier()

    def bcast(self, obj, root=0):
        """Broadcast a picklable object."""
        c = self._c("bcast")
        root = c.root(root)
        with self._lock("bcast"):
            return self._run("bcast", checked(c, O.bcast(c, obj, root), root))

    def reduce(self, sendobj, op=_SUM, root=0):
        """Reduce objects to `root` (op: an MPI.Op or a two-argument callable)."""
        c = self._c("reduce")
        root = c.root(root)
        return self._run("reduce", checked(c, O.reduce(c, sendobj, op, root), root))

    def allreduce(self, sendobj, op=_SUM):
        """Reduce objects to every rank."""
        c = self._c("allreduce")
        return self._run("allreduce", checked(c, O.allreduce(c, sendobj, op)))

    def gather(self, sendobj, root=0):
        """Gather objects to `root` (a list there, None elsewhere)."""
        c = self._c("gather")
        root = c.root(root)
        with self._lock("gather"):
            return self._run("gather", checked(c, O.gather(c, sendobj, root), root))

    def scatter(self, sendobj, root=0):
        """Scatter a list of objects from `root`."""
        c = self._c("scatter")
        root = c.root(root)
        with self._lock("scatter"):
            return self._run("scatter", checked(c, O.scatter(c, sendobj, root), root))

    def allgather(self, sendobj):
        """Gather objects to every rank."""
        c = self._c("allgather")
        with self._lock("allgather"):
            return self._run("allgather", checked(c, O.allgather(c, sendobj)))

    def alltoall(self, sendobj):
        """Exchange one object with every rank."""
        c = self._c("alltoall")
        with self._lock("alltoall"):
            return self._run("alltoall", checked(c, O.alltoall(c, sendobj)))

    def scan(self, sendobj, op=_SUM):
        """Inclusive prefix reduction of objects in rank order."""
        return self._run("scan", O.scan(self._c("scan"), sendobj, op, False))

    def exscan(self, sendobj, op=_SUM):
        """Exclusive prefix reduction of objects in rank order (None on rank 0)."""
        return self._run("exscan", O.scan(self._c("exscan"), sendobj, op, True))

    def ibarrier(self):
        """Non-blocking barrier (lowercase alias)."""
        return self.Ibarrier()


__all__ = ["CollectiveMethods"]
