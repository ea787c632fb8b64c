"""The crossings of one rank: small collective parts (protocol T_COLL) outside MPI matching.

A crossing of at most the eager size bypasses the point-to-point matcher
(`_collectives.transport` Rule 1): the rank that needs one polls its forwarder link for that tag
alone and takes it as it comes, in order per (context, sender); other waits that meet one keep
it for later (`keep`). Every rank makes the same collective calls in the same order on a
communicator, so nothing needs matching; each crossing carries its sender's call number, which
is checked. A part whose size only its sender knows may come through the matcher instead
(`_collectives.transport` Rule 2).
"""

from __future__ import annotations

import time
from collections import deque
from typing import TYPE_CHECKING

from .._startup.native import MPI
from ..errors import UsageError
from ..wire import protocol as P
from ..wire.backoff import yield_cpu
from .context import Context
from .op import PENDING, SENT, Op

if TYPE_CHECKING:
    from .engine import Engine

_BYTE = MPI.BYTE
_ANY_TAG = MPI.ANY_TAG
_AGAIN = object()  # see Crossings._from_link
# Tags of a collective context from here up are Create_group's (its members agree on context
# ids by messages there), which may run while collectives are pending on the communicator:
# never parts of a collective.
CREATE_TAGS = 64


class Crossings:
    """The crossings (T_COLL) of this rank: sent, kept until wanted, awaited."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.vrank = engine.vrank
        self.links = engine.links
        self.nfwd = len(engine.links)
        # Crossings that came in while nobody asked for them yet: (context, sender's world
        # rank) -> deque of (tag, its collective call number, payload), in arrival order.
        self.kept: dict[tuple[int, int], deque] = {}
        self._status = MPI.Status()
        self.monitor = None  # a monitor.Monitor while monitoring is on

    def send(self, ctx: Context, view, dest: int, tag: int, call: int) -> Op:
        """Send a crossing of at most `eager_max` bytes to world rank `dest` (other cluster).

        The bytes are copied out at once, so the send is complete at once (`SENT`; the
        native request goes to the outbox): the caller may reuse `view` straight away.
        """
        if self.monitor is not None:
            self.monitor.count("coll", dest, len(view))
        self.engine.p2p.send_copy(P.route(self.vrank, dest, self.nfwd), P.T_COLL, dest, tag,
                                  ctx.id, view, aux=call)
        return SENT

    def keep(self, buf: bytearray, head: tuple | None = None) -> None:
        """Keep a crossing nobody waits for yet, per (context, sender), in arrival order."""
        src, cid, tag, call = head or P.unpack_crossing(buf)
        key = (cid, src)
        got = self.kept.get(key)
        if got is None:
            got = self.kept[key] = deque()
        got.append((tag, call, memoryview(buf)[P.ENVELOPE_SIZE:]))
        ctx = self.engine.contexts.get(cid)
        if ctx is not None and ctx.queues.posted:
            source = ctx.from_world.get(src)
            # only the call running now has receives posted; a faster rank's crossing of a
            # later call says nothing about them
            if source is not None and call == self._running(ctx):
                self.conflict(ctx, source, call)

    def _running(self, ctx: Context) -> int:
        """The number of the collective call running on the communicator of context `ctx`."""
        for core in self.engine.communicators:
            if core.coll is ctx:
                return core.calls
        return -1

    def forget(self, cid: int) -> None:
        """Context `cid` is gone: crossings kept for it go (its id may be reused)."""
        for key in [k for k in self.kept if k[0] == cid]:
            del self.kept[key]

    def take_kept(self, key: tuple[int, int]) -> tuple[int, int, memoryview] | None:
        """The first crossing kept for key (context, sender), if any: (tag, call, payload)."""
        got = self.kept.get(key)
        if not got:
            return None
        crossing = got.popleft()
        if not got:
            del self.kept[key]
        return crossing

    def conflict(self, ctx: Context, source: int, call: int) -> None:
        """Fail a receive through the matcher that this call's crossing from `source` beats.

        Sender and receiver each choose between a crossing and the matcher by their own size
        (Rule 2). If they disagree the arguments do, and the one that waits in the matcher
        would wait for ever: its receive fails instead. Only a crossing of call `call` counts;
        one of a later call may come early and is kept.
        """
        got = self.kept.get((ctx.id, ctx.world_of[source]))
        if not got or got[0][1] != call:
            return
        tag, _, data = got[0]
        for recv in ctx.queues.posted:
            if recv.source == source and recv.tag == tag:
                self.engine.p2p.fail_posted(ctx, recv, UsageError(
                    f"{recv.call}: mismatched arguments: rank {self._me(ctx)} has more than "
                    f"{self.engine.eager_max} bytes of data, rank {source} sent {len(data)}"
                ))
                return

    def through_matcher(self, ctx: Context, source: int, tag: int, name: str, sized: bool,
                        call: int) -> bool:
        """Whether `source`'s part of call `call` came through the matcher (sized waits only).

        A sender's messages to one rank come in order, and it sends its part of this call
        before anything of a later one; so the first message from it in the matcher's queue,
        if any, is of this call. Of another collective, or too large for a crossing where
        this side expected one: the arguments disagree, and waiting would never end.
        """
        m = next((m for m in ctx.queues.unexpected if m.source == source and
                  m.tag < CREATE_TAGS), None)
        if m is None:
            return False
        if m.tag != tag:
            raise UsageError(
                f"{name} on rank {ctx.from_world[self.vrank]}: rank {source} sent its part of "
                f"another collective (internal tag {m.tag}, through the matcher; this is call "
                f"{call + 1}, tag {tag}): the ranks called different collectives, or in a "
                "different order"
            )
        if not sized:
            raise UsageError(
                f"{name}: mismatched arguments: rank {self._me(ctx)} has at most "
                f"{self.engine.eager_max} bytes of data, rank {source} sent {m.nbytes}"
            )
        return True

    def _me(self, ctx: Context) -> str:
        """The rank of this process in `ctx`'s communicator, and its cluster, for errors."""
        return f"{ctx.from_world[self.vrank]} ({self.engine.cluster} cluster)"

    def other_call(self, name: str, source: int, sent: int, call: int, tag: int,
                   mine: int) -> UsageError:
        """The error for a crossing of another collective call than this rank's (`mine`)."""
        return UsageError(
            f"{name} on rank {self.vrank}: rank {source} sent its part of another collective "
            f"(its call {call + 1}, internal tag {sent}; this is call {mine + 1}, tag {tag}): "
            "the ranks called different collectives, or in a different order"
        )

    def await_crossing(self, ctx: Context, source: int, tag: int, name: str, sized: bool,
                       call: int):
        """Poll for the next crossing from rank `source` of `ctx` (none is kept).

        Returns (tag, call, payload), or None (`sized`: the part came through the matcher).
        The one awaited is taken straight from the link, past `kept` (the common case, and
        the critical path of every small bridged collective); others are kept there.
        """
        e = self.engine
        key = (ctx.id, ctx.world_of[source])
        link = P.route(self.vrank, key[1], self.nfwd)
        st = self._status
        want = _ANY_TAG if sized else P.T_COLL
        probe = self.links[link][0].Improbe
        # Several probes per yield, as native waits test: the crossing often lands while
        # this rank waits for its turn on the core (docs/performance.md, "Small collectives").
        # (the probes and yields of a batch of rounds in the backend: compiled, in C)
        wait_link, lid = e.backend.wait_link, e.handles[link]
        for _ in e.first_batches:  # no clock (engine._FIRST)
            if not wait_link(lid, e.batch):
                continue
            msg = probe(0, want, st)  # None: another kind of message waits on the link
            if msg is None:
                yield_cpu()
                continue
            got = self._from_link(ctx, key, source, link, msg, tag, name, sized, call)
            if got is not _AGAIN:
                return got
        return e.wait_until(
            lambda: self._poll_link(ctx, key, source, link, tag, name, sized, call),
            lambda: self.after_drain(ctx, source, tag, name, sized, call))

    def _poll_link(self, ctx, key, source, link, tag, name, sized, call):
        """One poll of `await_crossing` past its first rounds: PENDING, or what it returns."""
        msg = self.links[link][0].Improbe(0, _ANY_TAG if sized else P.T_COLL, self._status)
        if msg is not None:
            got = self._from_link(ctx, key, source, link, msg, tag, name, sized, call)
            return PENDING if got is _AGAIN else got
        return PENDING

    def after_drain(self, ctx: Context, source: int, tag: int, name: str, sized: bool,
                    call: int):
        """What has come of `source`'s part of call `call`.

        Its crossing, if kept; None if the part came through the matcher (`sized`); else
        PENDING. A `sized` part of a call goes one way or the other, and a sender's
        crossings come in call order: a kept crossing of a later call means this call's part
        is a message through the matcher, still on its way if not queued yet (a drain may
        bring both).
        """
        key = (ctx.id, ctx.world_of[source])
        kept = self.kept.get(key)
        if kept and (not sized or kept[0][1] <= call):
            return self.take_kept(key)
        if self.through_matcher(ctx, source, tag, name, sized, call):
            return None
        return PENDING

    def _from_link(self, ctx, key, source, link, msg, tag, name, sized, call):
        """What a message probed on the link means for a crossing's wait.

        The crossing it waits for; None (sized: the part came through the matcher); or
        _AGAIN: it was kept, or matched, for later.
        """
        e = self.engine
        st = self._status
        count = st.Get_count(_BYTE)
        if sized and st.Get_tag() != P.T_COLL:
            e.heard[link] = time.monotonic()
            buf = bytearray(count)
            msg.Recv([buf, _BYTE])
            e.on_forwarded(link, buf, st.Get_tag())
            return None if self.through_matcher(ctx, source, tag, name, sized, call) \
                else _AGAIN
        buf = bytearray(count)
        msg.Recv([buf, _BYTE])
        e.heard[link] = time.monotonic()
        head = P.unpack_crossing(buf)
        # ours, and none of its is kept (a sized wait keeps a later call's: see after_drain)
        if head[0] == key[1] and head[1] == key[0] and not (sized and head[3] > call):
            return head[2], head[3], memoryview(buf)[P.ENVELOPE_SIZE:]
        self.keep(buf, head)
        return _AGAIN


__all__ = ["CREATE_TAGS", "Crossings"]
