"""A communication context: where one communicator's messages of one kind are matched.

Each communicator has two, one for its user's point-to-point messages and one for the
messages its collectives make, so the two can never be confused. A context knows its wire id
(the envelope's `context` field), the native communicator its same-cluster messages travel on,
its matching queues, and how to translate between the communicator's ranks, the native
communicator's ranks and virtual (world) ranks.
"""

from __future__ import annotations

from .._startup.native import MPI
from .matching import MatchQueues


class Context:
    """One context of one communicator on this rank."""

    __slots__ = ("id", "comm", "queues", "world_of", "local_of", "from_local", "from_world",
                 "kind")

    def __init__(self, cid: int, comm: MPI.Intracomm, members: tuple[int, ...],
                 here: tuple[int, ...], kind: str = "p2p") -> None:
        """Context `cid` of the communicator of `members` (world ranks by rank).

        `comm` holds `here`, the communicator's ranks in this cluster, by native rank; an
        intercommunicator's contexts address the remote group, and a native rank of its own
        group is -1 there (nobody sends to it on them).
        """
        self.id = cid
        self.comm = comm
        self.queues = MatchQueues()
        self.world_of = members  # rank -> world rank (envelopes carry world ranks)
        local = [-1] * len(members)
        for i, r in enumerate(here):
            if r >= 0:
                local[r] = i
        self.local_of = tuple(local)  # rank -> native rank in `comm`, -1 in the other cluster
        self.from_local = here  # native rank -> rank
        self.from_world = {w: r for r, w in enumerate(members)}  # world rank -> rank
        self.kind = kind  # "p2p" (the user's messages) or "coll" (the collectives'), for counting

    def __repr__(self) -> str:
        return f"<Context {self.id} of {len(self.world_of)} ranks>"


__all__ = ["Context"]
