"""The buffer collectives of a bridged intercommunicator: blocking, non-blocking, persistent.

Each method names its call and hands `intercoll`'s steps to the intercommunicator's queue of
collective calls (`_collectives.run`): run to the end for a blocking call, a request for a
non-blocking one; the persistent forms (`Bcast_init`, ...) make the non-blocking call again at
every Start (`persist_methods` Rule 1).
"""

from __future__ import annotations

from .._collectives.run import Pending
from .._startup.native import MPI
from ..errors import UsageError
from . import intercoll as ic
from .request import BridgedRequest

_SUM = MPI.SUM


class InterCollectiveMethods:
    """Mixin of the bridged Intercomm: mpi4py's buffer collectives on an intercommunicator."""

    __slots__ = ()

    def _sides(self, name: str) -> ic.Sides:
        # no flush: a call's steps queue behind the calls before it (_collectives.run)
        self._check(name, flush=False)
        return ic.Sides(self._core, self._local, name)

    def _run(self, name: str, steps) -> None:
        self._core.run(name, steps)

    def _submit(self, name: str, steps) -> BridgedRequest:
        pending = Pending(self._core, name, steps)
        self._core.submit(pending)
        return BridgedRequest(pending)

    # -- blocking ----------------------------------------------------------------------
    def Barrier(self) -> None:
        """Nobody leaves before every process of both groups has entered."""
        self._run("Barrier", ic.barrier(self._sides("Barrier")))

    def Bcast(self, buf, root=0) -> None:
        """From `root` (MPI.ROOT there, MPI.PROC_NULL in its group) to the other group."""
        self._run("Bcast", ic.bcast(self._sides("Bcast"), buf, root))

    def Gather(self, sendbuf, recvbuf, root=0) -> None:
        """The other group's equal blocks, in rank order, to `root`."""
        self._run("Gather", ic.gather(self._sides("Gather"), sendbuf, recvbuf, root, False))

    def Gatherv(self, sendbuf, recvbuf, root=0) -> None:
        """The other group's blocks of any size, in rank order, to `root`."""
        self._run("Gatherv", ic.gather(self._sides("Gatherv"), sendbuf, recvbuf, root, True))

    def Scatter(self, sendbuf, recvbuf, root=0) -> None:
        """`root`'s equal blocks, one to each rank of the other group."""
        self._run("Scatter", ic.scatter(self._sides("Scatter"), sendbuf, recvbuf, root, False))

    def Scatterv(self, sendbuf, recvbuf, root=0) -> None:
        """`root`'s blocks of any size, one to each rank of the other group."""
        self._run("Scatterv", ic.scatter(self._sides("Scatterv"), sendbuf, recvbuf, root, True))

    def Allgather(self, sendbuf, recvbuf) -> None:
        """Every rank gets the other group's equal blocks, in rank order."""
        self._run("Allgather", ic.allgather(self._sides("Allgather"), sendbuf, recvbuf, False))

    def Allgatherv(self, sendbuf, recvbuf) -> None:
        """Every rank gets the other group's blocks of any size, in rank order."""
        self._run("Allgatherv", ic.allgather(self._sides("Allgatherv"), sendbuf, recvbuf, True))

    def Alltoall(self, sendbuf, recvbuf) -> None:
        """Block j of rank i of one group to rank j of the other, as its block i."""
        self._run("Alltoall", ic.alltoall(self._sides("Alltoall"), sendbuf, recvbuf, False))

    def Alltoallv(self, sendbuf, recvbuf) -> None:
        """As Alltoall, with blocks of any size."""
        self._run("Alltoallv", ic.alltoall(self._sides("Alltoallv"), sendbuf, recvbuf, True))

    def Allreduce(self, sendbuf, recvbuf, op=_SUM) -> None:
        """Every rank gets `op` over the other group's buffers."""
        self._run("Allreduce", ic.allreduce(self._sides("Allreduce"), sendbuf, recvbuf, op))

    def Reduce(self, sendbuf, recvbuf, op=_SUM, root=0) -> None:
        """`op` over the other group's buffers, to `root`."""
        self._run("Reduce", ic.reduce(self._sides("Reduce"), sendbuf, recvbuf, op, root))

    def Reduce_scatter_block(self, sendbuf, recvbuf, op=_SUM) -> None:
        """`op` over the other group's buffers, in equal blocks to this group's ranks."""
        s = self._sides("Reduce_scatter_block")
        self._run(s.name, ic.reduce_scatter(s, sendbuf, recvbuf, op))

    def Reduce_scatter(self, sendbuf, recvbuf, recvcounts=None, op=_SUM) -> None:
        """`op` over the other group's buffers, block i (recvcounts[i] elements) to rank i."""
        s = self._sides("Reduce_scatter")
        _counts(s, recvcounts)
        self._run(s.name, ic.reduce_scatter(s, sendbuf, recvbuf, op))

    def Alltoallw(self, sendbuf, recvbuf) -> None:
        """Block j, in a datatype of its own, to rank j of the other group."""
        self._run("Alltoallw", ic.alltoallw(self._sides("Alltoallw"), sendbuf, recvbuf))

    # -- non-blocking ------------------------------------------------------------------
    def Ibarrier(self):
        """Non-blocking Barrier."""
        return self._submit("Ibarrier", ic.barrier(self._sides("Ibarrier")))

    def Ibcast(self, buf, root=0):
        """Non-blocking Bcast."""
        return self._submit("Ibcast", ic.bcast(self._sides("Ibcast"), buf, root))

    def Igather(self, sendbuf, recvbuf, root=0):
        """Non-blocking Gather."""
        return self._submit("Igather",
                            ic.gather(self._sides("Igather"), sendbuf, recvbuf, root, False))

    def Igatherv(self, sendbuf, recvbuf, root=0):
        """Non-blocking Gatherv."""
        return self._submit("Igatherv",
                            ic.gather(self._sides("Igatherv"), sendbuf, recvbuf, root, True))

    def Iscatter(self, sendbuf, recvbuf, root=0):
        """Non-blocking Scatter."""
        return self._submit("Iscatter",
                            ic.scatter(self._sides("Iscatter"), sendbuf, recvbuf, root, False))

    def Iscatterv(self, sendbuf, recvbuf, root=0):
        """Non-blocking Scatterv."""
        return self._submit("Iscatterv",
                            ic.scatter(self._sides("Iscatterv"), sendbuf, recvbuf, root, True))

    def Iallgather(self, sendbuf, recvbuf):
        """Non-blocking Allgather."""
        return self._submit("Iallgather",
                            ic.allgather(self._sides("Iallgather"), sendbuf, recvbuf, False))

    def Iallgatherv(self, sendbuf, recvbuf):
        """Non-blocking Allgatherv."""
        return self._submit("Iallgatherv",
                            ic.allgather(self._sides("Iallgatherv"), sendbuf, recvbuf, True))

    def Ialltoall(self, sendbuf, recvbuf):
        """Non-blocking Alltoall."""
        return self._submit("Ialltoall",
                            ic.alltoall(self._sides("Ialltoall"), sendbuf, recvbuf, False))

    def Ialltoallv(self, sendbuf, recvbuf):
        """Non-blocking Alltoallv."""
        return self._submit("Ialltoallv",
                            ic.alltoall(self._sides("Ialltoallv"), sendbuf, recvbuf, True))

    def Iallreduce(self, sendbuf, recvbuf, op=_SUM):
        """Non-blocking Allreduce."""
        return self._submit("Iallreduce",
                            ic.allreduce(self._sides("Iallreduce"), sendbuf, recvbuf, op))

    def Ireduce(self, sendbuf, recvbuf, op=_SUM, root=0):
        """Non-blocking Reduce."""
        return self._submit("Ireduce",
                            ic.reduce(self._sides("Ireduce"), sendbuf, recvbuf, op, root))

    def Ireduce_scatter_block(self, sendbuf, recvbuf, op=_SUM):
        """Non-blocking Reduce_scatter_block."""
        s = self._sides("Ireduce_scatter_block")
        return self._submit(s.name, ic.reduce_scatter(s, sendbuf, recvbuf, op))

    def Ireduce_scatter(self, sendbuf, recvbuf, recvcounts=None, op=_SUM):
        """Non-blocking Reduce_scatter."""
        s = self._sides("Ireduce_scatter")
        _counts(s, recvcounts)
        return self._submit(s.name, ic.reduce_scatter(s, sendbuf, recvbuf, op))

    def Ialltoallw(self, sendbuf, recvbuf):
        """Non-blocking Alltoallw."""
        return self._submit("Ialltoallw",
                            ic.alltoallw(self._sides("Ialltoallw"), sendbuf, recvbuf))


def _counts(s: ic.Sides, recvcounts) -> None:
    """Reduce_scatter's `recvcounts`, if given: one per rank of this group.

    Each rank's own block is its receive buffer, whose size the call checks.
    """
    if recvcounts is not None and len(recvcounts) != s.nlocal:
        raise UsageError(f"{s.name} on rank {s.rank}: {len(recvcounts)} receive counts for "
                         f"a group of {s.nlocal}")


__all__ = ["InterCollectiveMethods"]
