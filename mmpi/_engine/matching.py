"""MPI message matching for one communicator context: posted and unexpected queues. No MPI.

The transport (`p2p`) queues its records here: `Posted` receives and `Arrived` messages.

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


class Posted:
    """A posted receive: what it accepts and where the bytes go (view None = allocate)."""

    __slots__ = ("source", "tag", "view", "op", "call")

    def __init__(self, source, tag, view, op, call: str) -> None:
        self.source, self.tag, self.view, self.op, self.call = source, tag, view, op, call


class Arrived:
    """An arrived, unmatched message: a native Message handle, or forwarded bytes."""

    __slots__ = ("source", "tag", "nbytes", "message", "data", "natives", "more", "spare",
                 "sync", "ctx", "pull", "credit", "tree", "late")

    def __init__(self, source, tag, nbytes, message=None, data=None, natives=None, sync=None,
                 ctx=None):
        self.source, self.tag, self.nbytes = source, tag, nbytes
        self.message = message  # MPI.Message for a same-cluster message
        self.data = data  # payload of a forwarded message (may still be filling)
        self.natives = natives or []  # chunk receives still filling `data`
        self.more = None  # for a striped message: True once every stripe is in
        self.spare = None  # (pool, buffer) holding `data`, to give back once copied out
        self.sync = sync  # a synchronous send: its id (forwarded, > 0), -1 - its arrival
        #                   number (same cluster), or None
        self.ctx = ctx  # the context it came on (synchronous sends: where to acknowledge)
        self.pull = None  # a deferred large message: (sender, id) to pull its data with
        self.credit = None  # a large message under the sender's credit: (sender, bytes)
        self.tree = None  # a fan-out's ticket: the bytes it stands for (see fanout)
        self.late = None  # a large message whose chunks wait: (link, xfer, chunk, deadline
        #                   among the late ones, or None if a receive took it on arrival)

    def whole(self) -> bool:
        """Whether its bytes are all in `data`, nothing to return or wait for: a copy takes it."""
        return (self.data is not None and not self.natives and self.more is None
                and self.credit is None and self.spare is None and self.pull is None)


class MatchQueues(Generic[M, R]):
    """The posted-receive and unexpected-message queues of one context."""

    __slots__ = ("posted", "unexpected")

    def __init__(self) -> None:
        self.posted: deque[R] = deque()
        self.unexpected: deque[M] = deque()

    def post(self, recv: R) -> M | None:
        """Match `recv` against unexpected messages; queue it if none matches."""
        if self.unexpected:
            source, tag = recv.source, recv.tag
            for i, msg in enumerate(self.unexpected):
                if (source is None or source == msg.source) and (tag is None or tag == msg.tag):
                    del self.unexpected[i]
                    return msg
        self.posted.append(recv)
        return None

    def arrive(self, msg: M) -> R | None:
        """Match `msg` against posted receives; queue it as unexpected if none matches."""
        recv = self.match(msg.source, msg.tag)
        if recv is None:
            self.unexpected.append(msg)
        return recv

    def match(self, source: int, tag: int) -> R | None:
        """The posted receive a message from `source` with `tag` matches, taken; or None.

        `arrive` without the message object: the caller queues one (`keep`) only if needed.
        """
        for i, recv in enumerate(self.posted):
            s, t = recv.source, recv.tag
            if (s is None or s == source) and (t is None or t == tag):
                del self.posted[i]
                return recv
        return None

    def keep(self, msg: M) -> None:
        """Queue `msg` as unexpected (after `match` found no receive for it)."""
        self.unexpected.append(msg)

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
