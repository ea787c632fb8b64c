"""Flow control for large forwarded messages: what a receiver holds early stays bounded.

A large message that arrives before its receive is posted waits in a spare buffer of the
receiver. Each receiver grants every rank of the other cluster `budget / senders` bytes of
such data ahead of time (both sides work the credit out from the layout: no message on the
common path). A sender spends credit on every large message to that receiver; the receiver
gives it back, in batches, as the data is consumed. A sender out of credit sends the envelope
alone (protocol Rule 7, F_DEFER): it keeps the message's place in the matching order, and
once a receive has matched it, the receiver asks for the data (K_PULL), which then goes
straight into the receive's buffer. Nothing waits on anything a sender does not control.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._startup.native import MPI
from ..wire import protocol as P
from ..wire.knobs import env_int
from .large import send_large
from .op import Op

if TYPE_CHECKING:
    from .matching import Arrived
    from .p2p import PointToPoint

_BYTE = MPI.BYTE
BUDGET = env_int("MMPI_RECV_BUDGET")


class _Deferred:
    """A large message whose data waits at its sender for the receiver's pull."""

    __slots__ = ("view", "dest", "natives")

    def __init__(self, view: memoryview, dest: int) -> None:
        self.view, self.dest = view, dest
        self.natives: list | None = None  # the data's sends, once pulled

    def sent(self) -> bool:
        return self.natives is not None and MPI.Request.Testall(self.natives)


class _Pulled:
    """A deferred message's data on its way to a receive."""

    __slots__ = ("target", "natives")

    def __init__(self, target) -> None:
        self.target = target
        self.natives: list | None = None  # the chunk receives, once the data comes

    def ready(self) -> bool:
        return self.natives is not None and MPI.Request.Testall(self.natives)


class Flow:
    """The credits of one rank: as a sender (per receiver) and as a receiver (per sender)."""

    def __init__(self, p2p: PointToPoint, senders: int, budget: int = BUDGET) -> None:
        self.p2p = p2p
        self.initial = max(budget // max(senders, 1), p2p.eager_max + 1)
        self.credit: dict[int, int] = {}  # receiver -> bytes it still holds for us
        self.deferred: dict[int, _Deferred] = {}  # id -> data waiting for a pull
        self.pulls: dict[tuple[int, int], tuple] = {}  # (sender, id) -> (op, target)
        self.owed: dict[int, int] = {}  # sender -> consumed early bytes not given back yet

    # -- sender side ---------------------------------------------------------------------
    def spend(self, dest: int, nbytes: int) -> bool:
        """Whether `nbytes` may go to `dest` now (then they are spent)."""
        left = self.credit.get(dest, self.initial)
        if nbytes > left:
            return False
        self.credit[dest] = left - nbytes
        return True

    def spend_all(self, dests: list[int], nbytes: int) -> bool:
        """Whether `nbytes` may go to each of `dests` now (then they are spent), else none."""
        if any([self.credit.get(d, self.initial) < nbytes for d in dests]):
            return False
        for d in dests:
            self.spend(d, nbytes)
        return True

    def defer(self, op: Op, ctx_id: int, view: memoryview, dest: int, tag: int, route: int,
              sync: int) -> None:
        """Send the envelope alone; the data follows when the receiver pulls it.

        `sync`: a synchronous send's id (its acknowledgement and the pull share it), or 0.
        """
        mid = sync or self.p2p.next_id()
        flags = P.F_DEFER | (P.F_SYNC if sync else 0)
        head = P.Envelope(P.K_P2P, self.p2p.vrank, dest, tag, ctx_id, len(view), flags=flags,
                          aux=mid).pack()
        record = self.deferred[mid] = _Deferred(view, dest)
        op.keep = (head, view)
        op.start([self.p2p.links[route][0].Isend([head, _BYTE], 0, P.T_EAGER)],
                 more=record.sent)

    def on_pull(self, src: int, mid: int) -> None:
        """The receiver matched deferred message `mid`: send its data now."""
        record = self.deferred.pop(mid, None)
        if record is None:
            return
        p2p = self.p2p
        env = P.Envelope(P.K_P2P, p2p.vrank, src, 0, 0, len(record.view), p2p.chunk,
                         p2p.next_xfer(), P.F_PULLED, mid)
        record.natives = send_large(p2p.links[P.route(p2p.vrank, src, p2p.nfwd)], env,
                                    record.view)

    def on_credit(self, src: int, nbytes: int) -> None:
        """Receiver `src` consumed `nbytes` of early data: that much may go again."""
        self.credit[src] = self.credit.get(src, self.initial) + nbytes

    # -- receiver side -------------------------------------------------------------------
    def pull(self, m: Arrived, target) -> _Pulled:
        """A receive matched deferred message `m`: ask its sender for the data, into `target`."""
        src, mid = m.pull
        record = self.pulls[(src, mid)] = _Pulled(target)
        self._send(P.K_PULL, src, 0, mid)
        return record

    def deliver_pulled(self, recv, m: Arrived, truncated) -> None:
        """A receive matched deferred message `m`: its data comes straight into the buffer."""
        op, view = recv.op, recv.view
        fits = view is not None and m.nbytes <= len(view)
        target = view if fits else memoryview(bytearray(m.nbytes))
        record = self.pull(m, target)
        if view is None:
            op.obj = target
        op.start([], more=record.ready)
        if view is not None and not fits:
            op.fail(truncated(recv, m))

    def on_pulled(self, env: P.Envelope, data: MPI.Intercomm) -> None:
        """The data of a deferred message: straight into its receive's buffer."""
        record = self.pulls.pop((env.src, env.aux))
        target = record.target
        record.natives = [data.Irecv([target[off:off + n], n, _BYTE], 0, env.xfer)
                          for off, n in P.chunks(env.nbytes, env.chunk)]

    def consumed(self, src: int, nbytes: int) -> None:
        """`nbytes` of credited data from `src` left this rank's buffers: give them back.

        A quarter of the credit at a time: one small message per many large ones.
        """
        owed = self.owed.get(src, 0) + nbytes
        if owed * 4 >= self.initial:
            self._send(P.K_CREDIT, src, owed, 0)
            owed = 0
        self.owed[src] = owed

    def _send(self, kind: int, dest: int, nbytes: int, aux: int) -> None:
        p2p = self.p2p
        buf = bytearray(P.ENVELOPE_SIZE)
        P.Envelope(kind, p2p.vrank, dest, 0, 0, nbytes, aux=aux).pack_into(buf)
        op = Op()
        op.keep = buf
        ctrl = p2p.links[P.route(p2p.vrank, dest, p2p.nfwd)][0]
        op.start([ctrl.Isend([buf, _BYTE], 0, P.T_EAGER)])
        p2p.sends.append(op)


__all__ = ["Flow", "BUDGET"]
