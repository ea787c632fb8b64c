"""MPI message matching for one communicator context: posted and unexpected queues. No MPI.

Rule 1: a receive matches the earliest-arrived unexpected message it accepts; an arriving
        message matches the earliest-posted receive that accepts it. Together with arrival
        order per sender (guaranteed by each transport) this is MPI's non-overtaking rule.
Rule 2: `None` is the wildcard for source and tag (the comm layer maps ANY_SOURCE/ANY_TAG).
"""

from __future__ import annotations

from collections import deque
from typing import Generic, Protocol, TypeVar


class Incoming(Protocol):
    """What the matcher needs to know of an arrived message."""

    source: int
    tag: int


class Wanted(Protocol):
    """What the matcher needs to know of a posted receive."""

    source: int | None
    tag: int | None


M = TypeVar("M", bound=Incoming)
R = TypeVar("R", bound=Wanted)


def accepts(want_source: int | None, want_tag: int | None, source: int, tag: int) -> bool:
    """Whether a receive for (want_source, want_tag) accepts a message from source with tag."""
    return (want_source is None or want_source == source) and (want_tag is None or want_tag == tag)


class MatchQueues(Generic[M, R]):
    """The posted-receive and unexpected-message queues of one context."""

    __slots__ = ("posted", "unexpected")

    def __init__(self) -> None:
        self.posted: deque[R] = deque()
        self.unexpected: deque[M] = deque()

    def post(self, recv: R) -> M | None:
        """Match `recv` against unexpected messages; queue it if none matches."""
        for msg in self.unexpected:
            if accepts(recv.source, recv.tag, msg.source, msg.tag):
                self.unexpected.remove(msg)
                return msg
        self.posted.append(recv)
        return None

    def arrive(self, msg: M) -> R | None:
        """Match `msg` against posted receives; queue it as unexpected if none matches."""
        for recv in self.posted:
            if accepts(recv.source, recv.tag, msg.source, msg.tag):
                self.posted.remove(recv)
                return recv
        self.unexpected.append(msg)
        return None

    def peek(self, source: int | None, tag: int | None) -> M | None:
        """The unexpected message a receive for (source, tag) would take, left in place."""
        for msg in self.unexpected:
            if accepts(source, tag, msg.source, msg.tag):
                return msg
        return None

    def take(self, msg: M) -> None:
        """Remove a message found by `peek` (matched probe semantics)."""
        self.unexpected.remove(msg)

    def cancel(self, recv: R) -> bool:
        """Withdraw a posted receive; False if it was already matched."""
        try:
            self.posted.remove(recv)
        except ValueError:
            return False
        return True
