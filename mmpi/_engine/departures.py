"""Ranks that have left (the engine's Rule 3): who said goodbye, what that makes hopeless.

MPI itself would hang in those waits: a collective a rank never joins, a receive from a rank
that has gone.
"""

from __future__ import annotations

import time

from ..errors import RankGone
from .context import Context

# Seconds a receive from a rank that has left may still wait: its last messages may still be
# on their way (through another forwarder, say), and a loaded machine can hold a process off
# the CPU for a while.
GRACE = 3.0


class Departures:
    """The goodbyes one rank has heard (the forwarder's T_LEFT notices), and their effect."""

    def __init__(self, engine) -> None:
        self.engine = engine
        # world rank -> (collective calls it completed, per collective context id; when heard)
        self.gone: dict[int, tuple[dict[int, int], float]] = {}
        self.current = None  # the communicator whose collective this rank is in, if any

    def heard(self, rank: int, colls: dict[int, int]) -> None:
        """Rank `rank` has left after `colls` collective calls (per collective context id)."""
        self.gone.setdefault(rank, (colls, time.monotonic()))

    def settled(self, rank: int, grace: float = GRACE) -> bool:
        """Whether `rank` left at least `grace` seconds ago."""
        left = self.gone.get(rank)
        return left is not None and left[1] <= time.monotonic() - grace

    def enter(self, comm) -> None:
        """A collective call on `comm` (a communicator core) starts on this rank."""
        self.current = comm
        if self.gone:
            self.check()

    def leave(self) -> None:
        """The collective call entered last has ended (completed or failed)."""
        self.current = None

    def collective_gone(self, comm, call: int, name: str) -> RankGone | None:
        """The RankGone for collective call number `call` on `comm` if a member has left."""
        for rank, (colls, _) in self.gone.items():
            r = comm.p2p.from_world.get(rank)
            if r is not None and colls.get(comm.coll.id, 0) <= call:
                return RankGone(
                    f"{name} on rank {comm.rank}: rank {r} has already finalized (or exited) "
                    f"after {colls.get(comm.coll.id, 0)} collective call(s); this is call "
                    f"{call + 1}, which it will never join"
                )
        return None

    def check(self) -> None:
        """Fail what waits for a rank that has left."""
        cur = self.current
        if cur is not None:
            error = self.collective_gone(cur, cur.calls, cur.call_name)
            if error is not None:
                raise error
        for ctx in self.engine.context_list:
            for recv in list(ctx.queues.posted):
                error = self.doomed(ctx, recv.call, recv.source, recv.tag, "receive")
                if error is not None:
                    self.engine.p2p.fail_posted(ctx, recv, error)

    def doomed(self, ctx: Context, call: str, source: int | None, tag: int | None,
               what: str) -> RankGone | None:
        """The RankGone for a wait that a rank's departure has made hopeless, else None.

        The wait (`what`: receive, probe) is for a message on `ctx` from rank `source`
        (None: any) with `tag`. Hopeless only once the notice is a grace period old: its last
        messages may still be arriving.
        """
        if not self.gone:
            return None
        settled = time.monotonic() - GRACE
        if source is not None:
            left = self.gone.get(ctx.world_of[source])
            if left is None or left[1] > settled:
                return None
            who = f"rank {source} has"
        else:
            others = [w for w in ctx.world_of if w != self.engine.vrank]
            if not all(w in self.gone and self.gone[w][1] <= settled for w in others):
                return None
            who = "every other rank has"  # only then is an ANY_SOURCE wait hopeless
        return RankGone(f"{call} on rank {self.engine.vrank}: {who} already finalized (or "
                        f"exited) and sent nothing that matches this {what} "
                        f"(tag {tag if tag is not None else 'ANY_TAG'})")


__all__ = ["Departures", "GRACE"]
