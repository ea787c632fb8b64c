"""Persistent requests of the bridged world, partitioned ones among them.

`Send_init`, `Recv_init`, `Bcast_init`, ... make a `Prequest`; `Psend_init` and `Precv_init`
its partitioned kinds.

`Start` runs the same operation again, as often as asked; the request stays one until freed.
"""

from __future__ import annotations

import operator

from .._engine.op import Op
from .._startup.native import MPI
from ..errors import MMPIError, UsageError
from .request import BridgedRequest

_native = MPI.Request


class Prequest(BridgedRequest, MPI.Prequest):
    """A persistent request: `Start` runs the same operation again, as often as asked."""

    __slots__ = ("_starter", "_freed", "_core")

    def __init__(self, starter, core=None) -> None:
        super().__init__(Op(), pickled=False)
        self._starter = starter  # makes the operation's Op each time
        self._freed = False
        self._core = core  # the communicator it keeps until freed (None: none)
        if core is not None:
            core.hold(1)
        self._consumed = True  # inactive until started
        self._op.done = True

    def __repr__(self) -> str:
        return f"<mmpi.Prequest {'inactive' if self._consumed else 'active'}>"

    def __eq__(self, other) -> bool:
        # A persistent request stays a request until freed (MPI_REQUEST_NULL only then).
        if isinstance(other, BridgedRequest):
            return other is self
        if isinstance(other, _native):
            return self._freed and not _native.__bool__(other)
        return NotImplemented

    def __hash__(self) -> int:
        return id(self)

    def __bool__(self) -> bool:
        return not self._freed

    def Start(self) -> None:
        """Start the operation (again)."""
        if not self._consumed:
            raise MMPIError("Start: the persistent request is still active")
        self._op = self._made()
        self._consumed = False

    start = Start

    def _made(self) -> Op:
        """The operation, made on its communicator even if the program has freed that since."""
        core = self._core
        if core is None:
            return self._starter()
        core.starting += 1
        try:
            return self._starter()
        finally:
            core.starting -= 1

    @classmethod
    def Startall(cls, requests) -> None:
        """Start every request of the list."""
        for r in requests:
            r.Start()

    startall = Startall

    def Free(self) -> None:
        """Release the request (it must be inactive)."""
        self._consumed = True
        if not self._freed and self._core is not None:
            self._core.hold(-1)
        self._freed = True

    free = Free


class _Partitioned(Prequest):
    """What both sides of a partitioned transfer share: the partition count, checked indices."""

    __slots__ = ("_parts",)

    def __init__(self, starter, partitions: int, core=None) -> None:
        super().__init__(starter, core)
        self._parts = partitions

    def _index(self, partition, call: str) -> int:
        p = operator.index(partition)
        if not 0 <= p < self._parts:
            raise UsageError(f"{call}: partition {p} is out of range for a request of "
                             f"{self._parts} partition(s)")
        if self._consumed:
            raise UsageError(f"{call}: the partitioned request is not active (Start it first)")
        return p


class PartitionedSend(_Partitioned):
    """A partitioned send (`Psend_init`): the message goes once every partition is ready."""

    __slots__ = ("_ready",)

    def __init__(self, starter, partitions: int, core=None) -> None:
        super().__init__(starter, partitions, core)
        self._ready: set[int] = set()

    def Start(self) -> None:
        """Start a round: no partition is ready yet."""
        if not self._consumed:
            raise MMPIError("Start: the persistent request is still active")
        self._ready = set()
        self._op = Op(matched=False)  # completes only after the send has gone
        self._consumed = False

    start = Start

    def Pready(self, partition) -> None:
        """Partition `partition` of the buffer is ready to go."""
        self._mark([self._index(partition, "Pready")])

    def Pready_range(self, partition_low, partition_high) -> None:
        """Partitions `partition_low` to `partition_high` (inclusive) are ready."""
        lo = self._index(partition_low, "Pready_range")
        hi = self._index(partition_high, "Pready_range")
        self._mark(range(lo, hi + 1))

    def Pready_list(self, partitions) -> None:
        """The listed partitions are ready."""
        self._mark([self._index(p, "Pready_list") for p in partitions])

    def _mark(self, parts) -> None:
        if len(self._ready) == self._parts:
            return
        self._ready.update(parts)
        if len(self._ready) == self._parts:
            self._op = self._made()

    def _wait(self) -> None:
        if not self._consumed and len(self._ready) < self._parts:
            missing = sorted(set(range(self._parts)) - self._ready)
            shown = ", ".join(map(str, missing[:8])) + (", ..." if len(missing) > 8 else "")
            raise UsageError(f"Wait on a partitioned send with partition(s) {shown} not "
                             "marked ready (Pready): it could never complete")
        super()._wait()


class PartitionedRecv(_Partitioned):
    """A partitioned receive (`Precv_init`): its partitions arrive together."""

    __slots__ = ()

    def Parrived(self, partition) -> bool:
        """Whether partition `partition` has arrived (all arrive at once here)."""
        self._index(partition, "Parrived")
        return self.Get_status()  # a test that completes nothing (the Wait still must)
