"""One-sided windows across the zipper: the synchronisation calls, at the origin and target.

A mixin of `_window.BridgedWin`, whose Rules 1, 2 and 4 say how operations travel and are
served; here is when they are complete.

Rule 1: Fence: each rank learns how many operations of the epoch target it (a reduce-scatter
        of the counts; each operation carries its epoch), serves until it has applied them,
        and collects its own Gets' data; an operation of the next epoch, from an origin out
        of the Fence first, waits until this rank is out too. Lock: a request the target
        grants when it can (shared or exclusive, in arrival order); Unlock and Flush wait
        for an acknowledgement the target sends once it has applied what came before. Post
        sends a note to each origin, Start waits for them; Complete sends one to each target
        after its operations and waits for the target's acknowledgement (so a target's Test
        after any later synchronisation sees it), Wait serves until every origin's has come.
"""

from __future__ import annotations

import numpy as np

from .._startup.native import MPI
from ..errors import UsageError

T_POST = 3  # Post's note to an origin (the window's tags: _window)


class Synchronisation:
    """Fence, Lock and Unlock, Flush, Post/Start/Complete/Wait on a `BridgedWin`."""

    def Fence(self, assertion: int = 0) -> None:
        """Close the epoch: every operation to and from this rank complete."""
        comm = self._live("Fence")
        counts = np.array(self._sent, np.int64)
        incoming = np.zeros(1, np.int64)
        comm.Reduce_scatter_block(counts, incoming, MPI.SUM)
        epoch, want = self._epoch, int(incoming[0])
        self._wait_served(lambda: self._served.get(epoch, 0) >= want)
        for target in range(self._size):
            self._drain(target)
        self._served.pop(epoch, None)
        self._sent = [0] * self._size
        self._epoch += 1
        early, self._early = self._early, []
        for source, req in early:
            self._apply(source, req)

    def Lock(self, rank: int, lock_type: int = MPI.LOCK_EXCLUSIVE, assertion: int = 0):
        """Start a passive-target epoch at `rank`.

        It returns at once, as MPI allows: the target holds this rank's operations until it
        grants the lock, and Unlock (or Flush) waits for the grant with their replies; an
        epoch costs one round trip, not three.
        """
        self._live("Lock")
        if not 0 <= rank < self._size:
            raise UsageError(f"Win.Lock: rank {rank} is not in the window's group")
        self._ask(rank, ("lock", lock_type == MPI.LOCK_EXCLUSIVE))
        self._locked.add(rank)

    def Unlock(self, rank: int) -> None:
        """End the passive-target epoch at `rank`: its operations applied there."""
        self._live("Unlock")
        if rank not in self._locked:
            raise UsageError(f"Win.Unlock: rank {rank} is not locked by rank {self._rank}")
        self._ask(rank, ("unlock",))
        self._drain(rank)
        self._locked.discard(rank)

    def Lock_all(self, assertion: int = 0) -> None:
        """A shared lock at every rank."""
        self._live("Lock_all")
        for rank in range(self._size):
            self._ask(rank, ("lock", False))  # granted by the time Unlock_all drains (Lock)
        self._locked = set(range(self._size))

    def Unlock_all(self) -> None:
        """End the epoch Lock_all started."""
        self._live("Unlock_all")
        for rank in range(self._size):
            self._ask(rank, ("unlock",))
        for rank in range(self._size):
            self._drain(rank)
        self._locked = set()

    def Flush(self, rank: int) -> None:
        """Every operation of this rank to `rank` applied there."""
        self._live("Flush")
        self._ask(rank, ("flush",))
        self._drain(rank)

    Flush_local = Flush

    def Flush_all(self) -> None:
        """Flush to every rank."""
        for rank in range(self._size):
            self.Flush(rank)

    Flush_local_all = Flush_all

    def Sync(self) -> None:
        """The window's memory is the one copy (MPI.WIN_UNIFIED): what has come is applied.

        A program polling its own window with Sync sees the others' operations land.
        """
        self._live("Sync")
        self._engine.progress()

    def _ranks(self, group) -> list[int]:
        if group.Get_size() == 0:  # MPI.GROUP_EMPTY is mpi4py's own: nothing to translate
            return []
        mine = self._comm.Get_group()
        try:
            return list(group.Translate_ranks(list(range(group.Get_size())), mine))
        finally:
            mine.Free()

    def Post(self, group, assertion: int = 0) -> None:
        """Expose the window to the origins in `group`."""
        self._live("Post")
        origins = self._ranks(group)
        self._origins, self._completes = len(origins), 0
        for rank in origins:
            self._post(None, rank, T_POST)

    def Start(self, group, assertion: int = 0) -> None:
        """Start an access epoch to the targets in `group` (once they have posted)."""
        comm = self._live("Start")
        self._targets = self._ranks(group)
        for rank in self._targets:
            comm.recv(source=rank, tag=T_POST)
        self._locked = set(self._targets)  # their operations are not counted by a Fence

    def Complete(self) -> None:
        """End the access epoch Start began."""
        self._live("Complete")
        for rank in self._targets:  # acknowledged: a target's Test after this sees it
            self._ask(rank, ("complete",))
        for rank in self._targets:
            self._drain(rank)
        self._targets, self._locked = [], set()

    def Wait(self) -> None:
        """End the exposure epoch Post began: every origin's operations applied."""
        self._live("Wait")
        self._wait_served(lambda: self._completes >= self._origins)
        self._origins = self._completes = 0

    def Test(self) -> bool:
        """Whether the exposure epoch is over (then ended, as Wait)."""
        self._live("Test")
        self._serve()
        if self._completes < self._origins:
            return False
        self._origins = self._completes = 0
        return True


__all__ = ["Synchronisation", "T_POST"]
