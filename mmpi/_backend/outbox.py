"""Sends of bytes copied out, complete for the program at once: reaped in batches."""

from __future__ import annotations

from .._startup.native import MPI


class Outbox:
    """Sends of bytes copied out (eager forwarded messages), reaped here in batches.

    They are complete for the program as soon as they are handed to MPI: its buffer is free
    once copied out, so a standard send of a small message needs no wait and no request of
    its own, the cheapest send there is.
    """

    __slots__ = ("reqs", "bufs", "_limit")

    def __init__(self) -> None:
        self.reqs: list[MPI.Request] = []
        self.bufs: list = []  # the bytes each request sends, alive until it completes
        self._limit = 64

    def add(self, req: MPI.Request, buf) -> None:
        """Keep `req`, which sends `buf`, until it completes."""
        self.reqs.append(req)
        self.bufs.append(buf)
        if len(self.reqs) >= self._limit:
            self.reap()

    def reap(self) -> bool:
        """Forget the completed sends; True when none is left."""
        reqs = self.reqs
        if not reqs:
            return True
        done = MPI.Request.Testsome(reqs)
        if done:
            gone = set(done)
            self.reqs = [r for i, r in enumerate(reqs) if i not in gone]
            self.bufs = [b for i, b in enumerate(self.bufs) if i not in gone]
        # a forwarder slow to take them: test less often as they pile up, not on every add
        self._limit = max(64, 2 * len(self.reqs))
        return not self.reqs


__all__ = ["Outbox"]
