"""The collective methods of a bridged communicator: each checks its arguments, then runs.

The algorithms live in `_collectives` by family; here each call is named and run to the end
(blocking) on the communicator's core.
"""

from __future__ import annotations

from ._collectives import alltoall as A
from ._collectives import objects as O
from ._collectives import reductions as R
from ._collectives import rooted as T
from ._native import MPI

_SUM = MPI.SUM


class CollectiveMethods:
    """Mixin of the bridged communicator: mpi4py's blocking collectives."""

    __slots__ = ()

    def _c(self, name: str):
        """The collectives' view of this communicator, for a call of `name`."""
        core = self._core
        if core.engine.finalized:
            core.engine.check()
        c = core.collective
        if not core.pending:
            c.name = name  # for errors found while checking the arguments
        return c

    # -- buffer forms --------------------------------------------------------------------
    def Barrier(self) -> None:
        """Tight barrier: nobody leaves before every process has entered."""
        self._core.run("Barrier", R.barrier(self._c("Barrier")))

    def Bcast(self, buf, root=0) -> None:
        """Broadcast from `root`."""
        self._core.run("Bcast", T.bcast(self._c("Bcast"), buf, root))

    def Reduce(self, sendbuf, recvbuf, op=_SUM, root=0) -> None:
        """Reduce to `root`."""
        self._core.run("Reduce", T.reduce(self._c("Reduce"), sendbuf, recvbuf, op, root))

    def Allreduce(self, sendbuf, recvbuf, op=_SUM) -> None:
        """Reduce to all."""
        self._core.run("Allreduce", R.allreduce(self._c("Allreduce"), sendbuf, recvbuf, op))

    def Alltoall(self, sendbuf, recvbuf) -> None:
        """All-to-all with equal blocks."""
        self._core.run("Alltoall", A.alltoall(self._c("Alltoall"), sendbuf, recvbuf))

    def Alltoallv(self, sendbuf, recvbuf) -> None:
        """All-to-all with per-peer counts and displacements."""
        self._core.run("Alltoallv", A.alltoallv(self._c("Alltoallv"), sendbuf, recvbuf))

    def Gather(self, sendbuf, recvbuf, root=0) -> None:
        """Gather equal blocks to `root`."""
        self._core.run("Gather", T.gather(self._c("Gather"), sendbuf, recvbuf, root))

    def Gatherv(self, sendbuf, recvbuf, root=0) -> None:
        """Gather blocks of varying size to `root`."""
        self._core.run("Gatherv", T.gatherv(self._c("Gatherv"), sendbuf, recvbuf, root))

    def Scatter(self, sendbuf, recvbuf, root=0) -> None:
        """Scatter equal blocks from `root`."""
        self._core.run("Scatter", T.scatter(self._c("Scatter"), sendbuf, recvbuf, root))

    def Scatterv(self, sendbuf, recvbuf, root=0) -> None:
        """Scatter blocks of varying size from `root`."""
        self._core.run("Scatterv", T.scatterv(self._c("Scatterv"), sendbuf, recvbuf, root))

    def Allgather(self, sendbuf, recvbuf) -> None:
        """Gather equal blocks to every rank."""
        self._core.run("Allgather", A.allgather(self._c("Allgather"), sendbuf, recvbuf))

    def Allgatherv(self, sendbuf, recvbuf) -> None:
        """Gather blocks of varying size to every rank."""
        self._core.run("Allgatherv", A.allgatherv(self._c("Allgatherv"), sendbuf, recvbuf))

    def Reduce_scatter_block(self, sendbuf, recvbuf, op=_SUM) -> None:
        """Reduce, then scatter equal blocks of the result."""
        c = self._c("Reduce_scatter_block")
        self._core.run("Reduce_scatter_block", R.reduce_scatter_block(c, sendbuf, recvbuf, op))

    def Reduce_scatter(self, sendbuf, recvbuf, recvcounts=None, op=_SUM) -> None:
        """Reduce, then scatter blocks of `recvcounts[i]` elements to rank i."""
        c = self._c("Reduce_scatter")
        self._core.run("Reduce_scatter",
                       R.reduce_scatter(c, sendbuf, recvbuf, recvcounts, op))

    def Scan(self, sendbuf, recvbuf, op=_SUM) -> None:
        """Inclusive prefix reduction in rank order."""
        self._core.run("Scan", R.scan(self._c("Scan"), sendbuf, recvbuf, op, False))

    def Exscan(self, sendbuf, recvbuf, op=_SUM) -> None:
        """Exclusive prefix reduction in rank order (rank 0's result is undefined)."""
        self._core.run("Exscan", R.scan(self._c("Exscan"), sendbuf, recvbuf, op, True))

    # -- pickle forms --------------------------------------------------------------------
    def barrier(self) -> None:
        """Tight barrier (lowercase alias)."""
        self.Barrier()

    def bcast(self, obj, root=0):
        """Broadcast a picklable object."""
        c = self._c("bcast")
        return self._core.run("bcast", O.bcast(c, obj, c.root(root)))

    def reduce(self, sendobj, op=_SUM, root=0):
        """Reduce objects to `root` (op: an MPI.Op or a two-argument callable)."""
        c = self._c("reduce")
        return self._core.run("reduce", O.reduce(c, sendobj, op, c.root(root)))

    def allreduce(self, sendobj, op=_SUM):
        """Reduce objects to every rank."""
        return self._core.run("allreduce", O.allreduce(self._c("allreduce"), sendobj, op))

    def gather(self, sendobj, root=0):
        """Gather objects to `root` (a list there, None elsewhere)."""
        c = self._c("gather")
        return self._core.run("gather", O.gather(c, sendobj, c.root(root)))

    def scatter(self, sendobj, root=0):
        """Scatter a list of objects from `root`."""
        c = self._c("scatter")
        return self._core.run("scatter", O.scatter(c, sendobj, c.root(root)))

    def allgather(self, sendobj):
        """Gather objects to every rank."""
        return self._core.run("allgather", O.allgather(self._c("allgather"), sendobj))

    def alltoall(self, sendobj):
        """Exchange one object with every rank."""
        return self._core.run("alltoall", O.alltoall(self._c("alltoall"), sendobj))

    def scan(self, sendobj, op=_SUM):
        """Inclusive prefix reduction of objects in rank order."""
        return self._core.run("scan", O.scan(self._c("scan"), sendobj, op, False))

    def exscan(self, sendobj, op=_SUM):
        """Exclusive prefix reduction of objects in rank order (None on rank 0)."""
        return self._core.run("exscan", O.scan(self._c("exscan"), sendobj, op, True))


__all__ = ["CollectiveMethods"]
