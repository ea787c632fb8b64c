"""Persistent requests of the bridged world, partitioned ones among them.

`Send_init`, `Recv_init`, `Bcast_init`, ... make a `Prequest`; `Psend_init` and `Precv_init`
partitioned ones. `Prequest` is also what `MPI.Prequest` names under mmpi-run, so
`type(comm.Send_init(...)) is MPI.Prequest` holds as in mpi4py, and, as `request.Request`
does, it holds native persistent requests too (`MPI.Prequest(req)`, `MPI.Prequest()`; `_op`
is None then) and its class methods take both kinds.

`Start` runs the same operation again, as often as asked; the request stays one until freed.
"""

from __future__ import annotations

import operator

from .._engine.op import Op
from .._startup.native import MPI
from ..errors import MMPIError, UsageError
from .request import Request
from .waits import bridged as _bridged

_native = MPI.Request
_persistent = MPI.Prequest


class Prequest(Request, _persistent):
    """A persistent request: `Start` runs the same operation again, as often as asked."""

    # _parts: 0 for a plain persistent request, else its partition count; _ready: the
    # partitions marked ready this round (a partitioned send), None for any other kind
    __slots__ = ("_starter", "_freed", "_core", "_parts", "_ready")
    _stands_for = _persistent

    def __new__(cls, request=None):
        """`MPI.Prequest()` or `MPI.Prequest(req)`: a native copy, checked as mpi4py checks it."""
        if request is not None and not isinstance(request, _persistent) and \
                _native.__bool__(request):
            raise TypeError(f"expecting a persistent request, got {type(request).__name__}")
        # mpi4py.MPI.Request's __new__, not Prequest's: our Request's __new__ comes between
        # (the layout's C base is mpi4py's Request)
        self = _native.__new__(cls, request)
        self._op = None
        return self

    @classmethod
    def made(cls, starter, core=None, partitions: int = 0, sending: bool = False) -> Prequest:
        """A bridged persistent request: `starter()` makes its operation at each Start.

        `core`: the communicator it keeps until freed (None: none); `partitions`: its
        partition count (0: not partitioned); `sending`: a partitioned send.
        """
        self = _native.__new__(cls)
        self._op, self._pickled, self._value = Op(), False, None
        self._op.done = True
        self._consumed = True  # inactive until started
        self._starter = starter
        self._freed = False
        self._core = core
        if core is not None:
            core.hold(1)
        self._parts = partitions
        self._ready = set() if sending else None
        return self

    def __repr__(self) -> str:
        if not _bridged(self):
            return _persistent.__repr__(self)
        return f"<mmpi.Prequest {'inactive' if self._consumed else 'active'}>"

    def __eq__(self, other) -> bool:
        # A persistent request stays a request until freed (MPI_REQUEST_NULL only then).
        if not _bridged(self):
            return Request.__eq__(self, other)
        if _bridged(other):
            return other is self
        if isinstance(other, _native):
            return self._freed and not _native.__bool__(other)
        return NotImplemented

    __hash__ = Request.__hash__

    def __bool__(self) -> bool:
        if not _bridged(self):
            return _native.__bool__(self)
        return not self._freed

    def Start(self) -> None:
        """Start the operation (again)."""
        if not _bridged(self):
            _persistent.Start(self)
            return
        if not self._consumed:
            raise MMPIError("Start: the persistent request is still active")
        if self._ready is not None:  # a partitioned send: no partition is ready yet
            self._ready = set()
            self._op = Op(matched=False)  # completes only after the send has gone
        else:
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
        """Start every request of the list (bridged and native mixed)."""
        natives = [r for r in requests if not _bridged(r)]
        for r in requests:
            if _bridged(r):
                r.Start()
        if natives:
            _persistent.Startall(natives)

    startall = Startall

    def Free(self) -> None:
        """Release the request (it must be inactive)."""
        if not _bridged(self):
            _native.Free(self)
            return
        self._consumed = True
        if not self._freed and self._core is not None:
            self._core.hold(-1)
        self._freed = True

    def free(self) -> None:
        """Free the request if it is not null (mpi4py 4's safe form)."""
        if not _bridged(self):
            _native.free(self)
        elif not self._freed:
            self.Free()

    # mpi4py makes these of its own class: give programs the class they name (MPI.Prequest)
    @classmethod
    def fromhandle(cls, handle):
        """The persistent request of a native handle."""
        return cls(_persistent.fromhandle(handle))

    @classmethod
    def fromint(cls, arg):
        """The persistent request of a native handle given as an integer."""
        return cls(_persistent.fromint(arg))

    @classmethod
    def f2py(cls, arg):
        """The persistent request of a Fortran handle."""
        return cls(_persistent.f2py(arg))

    # -- partitioned calls (MPI 4) --------------------------------------------------------
    def _index(self, partition, call: str) -> int:
        p = operator.index(partition)
        if not 0 <= p < self._parts:
            raise UsageError(f"{call}: partition {p} is out of range for a request of "
                             f"{self._parts} partition(s)")
        if self._consumed:
            raise UsageError(f"{call}: the partitioned request is not active (Start it first)")
        return p

    def _sending(self, call: str) -> set:
        if self._ready is None:
            raise UsageError(f"{call}: the request is not a partitioned send (Psend_init)")
        return self._ready

    def Pready(self, partition) -> None:
        """Partition `partition` of the buffer is ready to go."""
        if not _bridged(self):
            _persistent.Pready(self, partition)
            return
        self._sending("Pready")
        self._mark([self._index(partition, "Pready")])

    def Pready_range(self, partition_low, partition_high) -> None:
        """Partitions `partition_low` to `partition_high` (inclusive) are ready."""
        if not _bridged(self):
            _persistent.Pready_range(self, partition_low, partition_high)
            return
        self._sending("Pready_range")
        lo = self._index(partition_low, "Pready_range")
        hi = self._index(partition_high, "Pready_range")
        self._mark(range(lo, hi + 1))

    def Pready_list(self, partitions) -> None:
        """The listed partitions are ready."""
        if not _bridged(self):
            _persistent.Pready_list(self, partitions)
            return
        self._sending("Pready_list")
        self._mark([self._index(p, "Pready_list") for p in partitions])

    def _mark(self, parts) -> None:
        ready = self._ready
        if len(ready) == self._parts:
            return
        ready.update(parts)
        if len(ready) == self._parts:
            self._op = self._made()

    def Parrived(self, partition) -> bool:
        """Whether partition `partition` has arrived (all arrive at once here)."""
        if not _bridged(self):
            return _persistent.Parrived(self, partition)
        if not self._parts or self._ready is not None:
            raise UsageError("Parrived: the request is not a partitioned receive (Precv_init)")
        self._index(partition, "Parrived")
        return self.Get_status()  # a test that completes nothing (the Wait still must)

    def _wait(self) -> None:
        ready = self._ready
        if ready is not None and not self._consumed and len(ready) < self._parts:
            missing = sorted(set(range(self._parts)) - ready)
            shown = ", ".join(map(str, missing[:8])) + (", ..." if len(missing) > 8 else "")
            raise UsageError(f"Wait on a partitioned send with partition(s) {shown} not "
                             "marked ready (Pready): it could never complete")
        super()._wait()


# The names the partitioned kinds had when they were classes of their own: one class now,
# as in mpi4py (a program sees `type(comm.Psend_init(...)) is MPI.Prequest`).
PartitionedSend = PartitionedRecv = Prequest

__all__ = ["Prequest", "PartitionedSend", "PartitionedRecv"]
