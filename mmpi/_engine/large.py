"""Large forwarded messages: how they are sent; spare buffers, and stripes put together.

A large message that cannot go straight into a user's buffer lands in a spare buffer, reused
afterwards; one striped over several forwarders comes as a stripe per forwarder, placed at
known offsets (protocol Rule 5).
"""

from __future__ import annotations

from .._startup.native import MPI
from ..errors import ProtocolError
from ..wire import protocol as P

_BYTE = MPI.BYTE
_SPARE_BYTES = 64 << 20  # kept at most in spare buffers


class Spares:
    """Buffers for large forwarded messages that cannot go straight into a user buffer.

    Fresh buffers are slow to receive into (their pages fault in inside the transfer), so
    one of at most twice the size is reused (docs/performance.md, "Buffers").
    """

    __slots__ = ("_free",)

    def __init__(self) -> None:
        self._free: list[bytearray] = []

    def take(self, nbytes: int) -> bytearray:
        for i, buf in enumerate(self._free):
            if nbytes <= len(buf) <= 2 * nbytes:
                return self._free.pop(i)
        return bytearray(nbytes)

    def give(self, buf: bytearray) -> None:
        if self.held() + len(buf) <= _SPARE_BYTES:
            self._free.append(buf)

    def held(self) -> int:
        """Bytes kept for reuse: zero while no message has needed a spare."""
        return sum(map(len, self._free))


class Reassembly:
    """One striped message coming together: a stripe per forwarder, at known offsets.

    Stripes may arrive before the envelope that says where they go (they travel through
    other forwarders); those land in their own buffer and are copied once it is known.
    """

    __slots__ = ("parts", "arrived", "target", "nbytes", "early", "natives", "done", "_forget")

    def __init__(self, parts: int, forget) -> None:
        self.parts = parts
        self.arrived = 0
        self.target: memoryview | None = None
        self.nbytes = 0
        self.early: list[tuple[int, bytearray]] = []
        self.natives: list[MPI.Request] = []
        self.done = False
        self._forget = forget

    def stripe(self, k: int, env: P.Envelope, data: MPI.Intercomm) -> None:
        self.arrived += 1
        if self.target is None:
            buf = bytearray(env.nbytes)
            self.early.append((k, buf))
            into = memoryview(buf)
        else:
            off, n = P.stripe_bounds(self.nbytes, self.parts, k)
            if n != env.nbytes:
                raise ProtocolError(f"stripe {k} carries {env.nbytes} bytes, expected {n}")
            into = self.target[off:off + n]
        self.natives += [data.Irecv([into[o:o + m], m, _BYTE], 0, env.xfer)
                         for o, m in P.chunks(env.nbytes, env.chunk)]

    def place(self, target: memoryview, nbytes: int) -> None:
        self.target, self.nbytes = target, nbytes

    def ready(self) -> bool:
        if self.done:
            return True
        if self.arrived < self.parts or not MPI.Request.Testall(self.natives):
            return False
        for k, buf in self.early:
            off, n = P.stripe_bounds(self.nbytes, self.parts, k)
            if n != len(buf):
                raise ProtocolError(f"stripe {k} carried {len(buf)} bytes, expected {n}")
            self.target[off:off + n] = buf
        self.early = []
        self.done = True
        self._forget()
        return True


class Stripes:
    """The striped messages of one rank: sent over every forwarder, put together on arrival."""

    __slots__ = ("p2p", "_sid", "_sets")

    def __init__(self, p2p) -> None:
        self.p2p = p2p
        self._sid = 0
        self._sets: dict[tuple[int, int], Reassembly] = {}

    def send(self, view: memoryview, dest: int, tag: int, cid: int, route: int):
        """(envelope, native sends) of `view` striped to world rank `dest`.

        The envelope keeps this pair's route (and so its order); the bytes go through every
        forwarder at once, one stripe each.
        """
        p2p = self.p2p
        n = len(view)
        self._sid = sid = self._sid % P.MAX_XFER + 1
        head = bytearray(P.ENVELOPE_SIZE)
        P.Envelope(P.K_P2P, p2p.vrank, dest, tag, cid, n, flags=P.F_STRIPED,
                   aux=sid).pack_into(head)
        natives = [p2p.links[route][0].Isend([head, _BYTE], 0, P.T_EAGER)]
        for k in range(p2p.nfwd):
            off, ln = P.stripe_bounds(n, p2p.nfwd, k)
            env = P.Envelope(P.K_STRIPE, p2p.vrank, dest, k, cid, ln, p2p.chunk,
                             p2p.next_xfer(), aux=sid)
            natives += send_large(p2p.links[k], env, view[off:off + ln])
        return head, natives

    def of(self, src: int, sid: int) -> Reassembly:
        """The reassembly of striped message `sid` from `src` (made on first mention)."""
        key = (src, sid)
        ra = self._sets.get(key)
        if ra is None:
            ra = self._sets[key] = Reassembly(self.p2p.nfwd, lambda: self._sets.pop(key))
        return ra


def send_large(link: tuple, env: P.Envelope, view: memoryview) -> list[MPI.Request]:
    """Envelope on a link's control channel, then at once the chunks on its data channel."""
    ctrl, data = link
    head = env.pack()
    return [ctrl.Isend([head, _BYTE], 0, P.T_LARGE)] + [
        data.Isend([view[off:off + k], k, _BYTE], 0, env.xfer)
        for off, k in P.chunks(env.nbytes, env.chunk)
    ]


__all__ = ["Spares", "Reassembly", "Stripes", "send_large"]
