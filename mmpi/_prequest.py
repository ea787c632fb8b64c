"""Persistent requests of the bridged world (`Send_init`, `Recv_init`, ...).

`Start` runs the same operation again, as often as asked; the request stays one until freed.
"""

from __future__ import annotations

from ._native import MPI
from ._op import Op
from .errors import MMPIError
from .request import BridgedRequest

_native = MPI.Request


class Prequest(BridgedRequest, MPI.Prequest):
    """A persistent request: `Start` runs the same operation again, as often as asked."""

    __slots__ = ("_starter", "_freed")

    def __init__(self, starter) -> None:
        super().__init__(Op(), pickled=False)
        self._starter = starter  # makes the operation's Op each time
        self._freed = False
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
        self._op = self._starter()
        self._consumed = False

    start = Start

    @classmethod
    def Startall(cls, requests) -> None:
        """Start every request of the list."""
        for r in requests:
            r.Start()

    startall = Startall

    def Free(self) -> None:
        """Release the request (it must be inactive)."""
        self._consumed = True
        self._freed = True

    free = Free
