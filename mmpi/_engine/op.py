"""The state of one operation in flight (a send, a receive): what the engine fills in.

A user-visible Request (_api/request.py) holds one Op and asks it `poll()`; the transports start,
fail and complete it through these methods, and nobody else writes its fields.
"""

from __future__ import annotations

from collections.abc import Callable

from .._startup.native import MPI

_TestAll = MPI.Request.Testall
ANY_SOURCE = MPI.ANY_SOURCE
ANY_TAG = MPI.ANY_TAG
PENDING = object()  # what a non-blocking look at a wait says while it is not over
# Operations under way, for the progress thread to complete (a list while one runs, see
# _runtime.progress; None otherwise, and nothing is recorded).
ACTIVE: list | None = None
# Set when something is left for the progress thread (it wakes on it): True, or the receive
# last posted without a match (the thread is woken only if it is still unmatched).
NEW_WORK: bool | Op = False


class Op:
    """One non-blocking operation: the native requests behind it and, for a receive, its match."""

    __slots__ = (
        "natives", "matched", "done", "finish", "error", "keep", "source", "tag", "nbytes",
        "obj", "spare", "more", "remote", "cancelled", "after", "peer", "__weakref__",
    )

    def __init__(self, *, matched: bool = True) -> None:
        self.natives: list[MPI.Request] = []
        self.matched = matched  # a receive is matched once its message is known
        self.done = False
        self.finish: Callable[[], None] | None = None  # runs once the natives completed
        self.error: BaseException | None = None
        self.keep = None  # keeps send buffers alive until the MPI sends complete
        self.source = ANY_SOURCE  # for a receive: who sent it (communicator rank) ...
        self.tag = ANY_TAG  # ... with which tag ...
        self.nbytes = 0  # ... and how many bytes
        self.obj = None  # a receive into a buffer of its own: those bytes
        self.spare = None  # (pool, buffer) under `obj`, given back by `release`
        self.more: Callable[[], bool] | None = None  # e.g. stripes still to arrive
        self.remote = False  # only a forwarder can complete it (a receive from the far side)
        self.cancelled = False
        self.after: list | None = None  # run with the bytes received, once complete
        self.peer = -1  # a send's destination (world rank), for finalize's report

    def start(self, natives: list, finish: Callable[[], None] | None = None,
              more: Callable[[], bool] | None = None) -> None:
        """The operation is matched and under way: complete once `natives` have (then `finish`)."""
        self.natives = natives
        self.finish = finish
        self.more = more
        self.matched = True
        if ACTIVE is not None:
            global NEW_WORK
            ACTIVE.append(self)
            NEW_WORK = True

    def fail(self, error: BaseException) -> None:
        """Complete with `error` (the first one counts)."""
        if self.error is None:
            self.error = error

    def poll(self) -> bool:
        """Advance without progressing the engine; True when complete."""
        if self.done:
            return True
        if not self.matched:
            return False
        if self.more is not None and not self.more():
            return False
        if self.natives and not _TestAll(self.natives):
            return False
        self.natives = []
        self.keep = None
        if self.finish is not None:
            finish, self.finish = self.finish, None
            try:
                finish()
            except Exception as exc:  # noqa: BLE001 - the operation's error, raised at Wait
                self.fail(exc)
        if self.after is not None and self.error is None:
            for fn in self.after:
                fn(self.nbytes)
        self.done = True
        return True

    def release(self) -> None:
        """The bytes in `obj` are no longer needed: give their spare buffer back."""
        if self.spare is not None:
            (pool, buf), self.spare = self.spare, None
            pool.give(buf)


# The one operation of every short-way send (Isend of a small message across, done once
# its bytes are copied out): complete, and nothing ever writes it.
SENT = Op()
SENT.done = True


def fill_status(status, source: int, tag: int, nbytes: int, error=None,
                cancelled: bool = False) -> None:
    """Write an operation's envelope into an MPI.Status (if one was given)."""
    if status is not None:
        status.Set_source(source)
        status.Set_tag(tag)
        status.Set_elements(MPI.BYTE, nbytes)
        status.Set_error(MPI.SUCCESS if error is None else MPI.ERR_OTHER)
        status.Set_cancelled(cancelled)


def status_at(statuses, i: int):
    """Status i of `statuses`: a list too short is extended, other sequences are not."""
    if statuses is None:
        return None
    if not isinstance(statuses, list):
        return statuses[i] if i < len(statuses) else None
    while len(statuses) <= i:
        statuses.append(MPI.Status())
    return statuses[i]


def empty_status(status) -> None:
    """Make `status` the empty status MPI gives when no request was active."""
    if status is not None:
        status.source, status.tag, status.error = MPI.ANY_SOURCE, MPI.ANY_TAG, MPI.SUCCESS
        status.Set_elements(MPI.BYTE, 0)
        status.Set_cancelled(False)


def completed(source: int = MPI.PROC_NULL, tag: int = ANY_TAG) -> Op:
    """An operation that is complete already (PROC_NULL)."""
    op = Op()
    op.source, op.tag, op.done = source, tag, True
    return op
