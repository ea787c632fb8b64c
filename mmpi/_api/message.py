"""Matched messages of the bridged world: what Mprobe/Improbe take, received with Recv/Irecv.

A `Message` holds one arrived message taken out of matching; only its receive can have it.
"""

from __future__ import annotations

from .._engine import buffers as _buffers
from .._startup.native import MPI
from ..errors import MMPIError
from .request import BridgedRequest


class Message(MPI.Message):
    """A message taken by a matched probe (Mprobe, Improbe): receive it with Recv/Irecv."""

    __slots__ = ("_arrived", "_p2p", "_pickled")
    _copied_as_itself = True  # MPI.Message(msg) is msg (see standin.StandIn.__call__)

    def __new__(cls, *args, **kwargs):
        """A new message object (its native handle stays MPI_MESSAGE_NULL)."""
        return MPI.Message.__new__(cls)

    def __init__(self, arrived, p2p, pickled: bool = False) -> None:
        self._arrived = arrived
        self._p2p = p2p
        self._pickled = pickled

    def __bool__(self) -> bool:
        return self._arrived is not None

    def __eq__(self, other) -> bool:
        if isinstance(other, Message):
            return other is self
        return self._arrived is None and isinstance(other, MPI.Message) and \
            not MPI.Message.__bool__(other)

    def __ne__(self, other) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return id(self)

    def _take(self, view, call: str) -> BridgedRequest:
        if self._arrived is None:
            raise MMPIError(f"{call}: this message was received already")
        m, self._arrived = self._arrived, None
        return BridgedRequest(self._p2p.receive(m, view, call), pickled=view is None)

    def Irecv(self, buf):
        """Start receiving the message into `buf`."""
        view = _buffers.as_view(buf, writable=True, op="Message.Irecv")
        req = self._take(view, "Message.Irecv")
        if _buffers.unpacks:  # a derived datatype: unpacked once the bytes are in
            req._op.after = _buffers.take_unpacks()
        return req

    def Recv(self, buf, status: MPI.Status | None = None) -> None:
        """Receive the message into `buf`."""
        self.Irecv(buf).Wait(status)

    def irecv(self):
        """Start receiving the message as an object."""
        return self._take(None, "Message.irecv")

    def recv(self, status: MPI.Status | None = None):
        """Receive the message as an object."""
        return self.irecv().wait(status)


__all__ = ["Message"]
