"""The compiled relay (`_crelay.c`, built as `forwarder._crelay`) behind `_relay.Relay`'s interface.

Its threads too.

The C loop moves envelopes, eager payloads and chunk pipelines with the GIL released, so both
directions and the heartbeat really run at once. What it hands back is the control protocol,
which stays here in Python: a rank's T_BYE (count it, tell everybody with T_LEFT) and any tag
it does not know (a ProtocolError, as in the Python relay).

`AVAILABLE` says whether the extension was built and loads against the MPI that mpi4py uses
(MPICH's ABI); `WHY_NOT` says why not, for the forwarder's start-up line.
"""

from __future__ import annotations

from mpi4py import MPI

from mmpi.wire import ProtocolError, backoff, compiled
from mmpi.wire import protocol as P

from ._relay import Link

_crelay, WHY_NOT = compiled.load("forwarder._crelay", MPI.Get_library_version())
AVAILABLE = _crelay is not None

_BYTE = MPI.BYTE
_SLICE = 0.25  # seconds the C loop runs before Python looks up (shutdown, signals)


class CompiledRelay:
    """Relays everything that `src` sends across to `dst`, in C."""

    def __init__(self, src: Link, dst: Link, *, chunk: int, pool: int, depth: int,
                 eager_budget: int, on_error, pool_many: int | None = None) -> None:
        self.src, self.dst = src, dst
        self._on_error = on_error
        local_of = [-1] * (src.size + dst.size)
        for vrank, local in dst.local_of.items():
            local_of[vrank] = local
        self.core = _crelay.Relay(
            src.ctrl.handle, src.data.handle, dst.ctrl.handle, dst.data.handle, local_of,
            list(src.vranks), dst.size, chunk, pool, max(pool, pool_many or pool), depth,
            eager_budget, backoff.policy()["YIELD"] * 1e6, backoff.policy()["MAX_SLEEP"] * 1e6)
        self._left: list[MPI.Request] = []  # T_LEFT notices sent from here

    @property
    def name_short(self) -> str:
        """E.g. 'low->high'."""
        return f"{self.src.cluster}->{self.dst.cluster}"

    @property
    def finished(self) -> bool:
        """Every source rank said BYE and everything it sent has been delivered."""
        if self._left and MPI.Request.Testall(self._left):
            self._left = []
        return self.core.finished and not self._left

    @property
    def messages(self) -> int:
        return self.core.messages

    @property
    def bytes(self) -> int:
        return self.core.bytes

    @property
    def busy(self) -> float:
        """Seconds spent in polls that moved something (the relay's work, not its waiting)."""
        return self.core.busy

    def handle(self) -> None:
        """The message the C loop handed back: a rank's BYE, or a protocol error."""
        tag, source, body = self.core.take()
        if tag != P.T_BYE:
            raise ProtocolError(f"rank {self.src.vranks[source]} of cluster "
                                f"{self.src.cluster!r} sent unknown control tag {tag}")
        self.core.said_bye()
        colls = P.decode_control(body, ("colls",))["colls"]
        # the same notice as _relay.Relay._announce_left: every rank of both clusters
        notice = bytearray(P.encode_control(rank=self.src.vranks[source], colls=colls))
        for link in (self.src, self.dst):
            self._left += [link.ctrl.Isend([notice, _BYTE], r, P.T_LEFT)
                           for r in range(link.size)]


def serve(relays: list[CompiledRelay]) -> None:
    """Relay until every one of `relays` has finished, in this thread (C polls them all)."""
    cores = tuple(r.core for r in relays)
    try:
        while True:
            i = _crelay.run(cores, _SLICE)
            if i >= 0:
                relays[i].handle()
            elif i == -1 and all(r.finished for r in relays):
                return
    except _crelay.RelayError as exc:
        raise ProtocolError(str(exc)) from None


__all__ = ["AVAILABLE", "WHY_NOT", "CompiledRelay", "serve"]
