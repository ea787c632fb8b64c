"""A blocking Alltoall of large blocks with the fewest interpreted steps.

The same messages as `alltoall._alltoall`'s straight blocks (the reference): the check, the
native alltoallv of this cluster's blocks, and for each rank of the other cluster an envelope
and its block through the forwarder (protocol Rule 3). What differs is the waiting, and where
the steps run. The reference's waits take the engine's full rounds (both transports, every
operation's poll, the back-off's clock), and on shared cores a waiting rank's turns hold back
the processes with work: measured, rounds 20 us heavier made a bare Python Alltoall of 64 KiB
blocks twice as slow (docs/performance.md, "Alltoall blocks straight to their ranks"). Here
the steps and the rounds run in one compiled call (the lane `alltoall_blocks`,
mmpi/_backend/cdirect.c): a round drains the links and tests the requests; the envelopes of this
call's blocks are read there and their blocks' receives posted at once; everything else the
drain finds goes to the engine in order (`_Wait.hand`), as its own rounds would hand it on.
Where an engine round took one of the call's envelopes, the compiled call gives up and the
blocks left are received the reference's way, in the engine's wait.

Rule: this path runs only where it sends exactly what the reference sends and receives what
it would: blocks below the striping size (each through its pair's forwarder, Rule 5), of one
chunk, the compiled rank path, no monitor,
nothing posted in the collective context and nothing waiting there but envelopes of this
call (from ranks done with the call before, which started this one first: the reference's
receives take those), so that this call's envelopes are the first from each sender, credit
for every block (no deferred send). A sender's block that comes otherwise (an envelope taken
by an engine round, a deferred one) is received the reference's way from then on.
"""

from __future__ import annotations

import time

from .._engine import buffers as _buffers
from .._startup.native import MPI
from ..wire import protocol as P
from ..wire.backoff import Backoff
from .common import T_ALLTOALL, WORDS, checking, same_size, start_check, verify_check
from .transport import Coll

_Testall = MPI.Request.Testall
_from_handle = MPI.Request.fromhandle  # not owned: MPI frees them as they complete
_NO_WORDS = bytearray(8 * WORDS)  # the compiled call's words where there is no check
_INT_MAX = 2**31 - 1  # the native alltoallv's byte displacements are C ints


class Direct:
    """A blocking Alltoall that may take this path (`run.blocking` runs it, as `compiled.Call`).

    Made only where `usable`; `run()`: False, having done nothing, where the rest of the Rule
    does not hold; `reference()` then gives the steps.
    """

    __slots__ = ("c", "reference", "sview", "rview", "blk")

    def __init__(self, c: Coll, reference, sview, rview, blk: int) -> None:
        self.c, self.reference = c, reference
        self.sview, self.rview, self.blk = sview, rview, blk

    def run(self) -> bool:
        c, blk = self.c, self.blk
        e, ctx = c.engine, c.ctx
        p2p = c.p2p
        if (blk >= p2p.stripe_min or blk > e.chunk or (c.size + c.nmine) * blk > _INT_MAX
                or p2p.monitor is not None or c.local is not ctx.comm or p2p.fanout.held
                or ctx.queues.posted or e.broken is not None):
            return False
        early = _early(c, blk)
        if early is None:
            return False
        far = [ctx.world_of[r] for r in c.theirs]
        if not p2p.flow.spend_all(far, blk):
            return False
        _exchange(c, self.sview, self.rview, blk, far, early)
        return True


def usable(c: Coll, blk: int) -> bool:
    """Whether blocks of `blk` bytes might go this way (the rest is decided at run time)."""
    return (c.contiguous and blk > c.p2p.eager_max and c.engine.lanes is not None
            and not _buffers.unpacks)


def _early(c: Coll, blk: int) -> list[int] | None:
    """The other cluster's ranks whose envelope for this call waits already, or None.

    A rank that finished the call before may have started the next, and its envelope come
    before this rank's call; it is the first message of that sender on the context (the
    call's messages from each sender come in order). None where anything else waits there.
    """
    unexpected = c.ctx.queues.unexpected
    if not unexpected:
        return []
    theirs, early = c.theirs, []
    for m in unexpected:
        if (m.tag != T_ALLTOALL or m.nbytes != blk or m.source in early
                or m.source not in theirs or m.message is not None or m.pull is not None
                or m.tree is not None or m.more is not None or m.sync is not None):
            return None
        early.append(m.source)
    return early


def _exchange(c: Coll, sview, rview, blk: int, far: list[int], early: list[int]) -> None:
    e, ctx = c.engine, c.ctx
    base = c.obase * blk

    def block(j: int):  # the receive buffer's block from theirs[j] (far[j])
        return rview[base + j * blk:base + (j + 1) * blk]

    got = bytearray(len(far))  # 1: the block of far[j] comes the reference's way (C: 2, its own)
    wait = _Wait(e, ctx, got, c.theirs)
    ops = []
    for r in early:  # their envelopes came before the call: the reference's receives take them
        j = c.theirs.index(r)
        got[j] = 1
        ops.append((r, c.recv(block(j), r, T_ALLTOALL)))
    words, check = start_check(c, -1, len(rview)) if checking(c) else (None, None)
    if check is not None:  # first, as the reference: the cluster's ranks all make this call
        check.Start()
    p2p, vrank, nfwd = c.p2p, e.vrank, e.nfwd
    heads = bytearray(P.ENVELOPE_SIZE * len(far))  # the envelopes: alive until they are sent
    out = e.lanes.alltoall_blocks(
        c.local.handle, 0 if check is None else check.handle,
        _NO_WORDS if words is None else words, WORDS, c.nmine, sview, rview, heads, got, blk,
        tuple(c.mine), c.obase, tuple(far), tuple([P.route(vrank, d, nfwd) for d in far]),
        tuple([p2p.next_xfer() for _ in far]), e.handles, e.data_handles, e.contexts,
        vrank, ctx.id, T_ALLTOALL, e.chunk, len(e.tests), wait)
    if out[0] == 1:  # the check found a mismatch; nothing was sent
        verify_check(c, words)  # raises, naming who called what
        raise AssertionError("alltoall_blocks and verify_check disagree")
    taken, pending = out[1], out[2]
    natives = []
    if pending is not None:  # an engine round took an envelope: the rest the reference's way
        _the_reference_way(c, {r: block(j) for j, r in enumerate(c.theirs) if not got[j]}, ops)
        natives = [_from_handle(h) for h in pending]
    if ops or natives:
        e.wait_for(lambda: _Testall(natives) and all([op.poll() for _, op in ops]))
    flow = p2p.flow
    for src in taken:
        flow.consumed(src, blk)
    for r, op in ops:
        if op.error is not None:
            raise op.error
        same_size(c, f"data per block (the block from rank {r})", blk, op.nbytes)


class _Wait:
    """What the compiled rounds (_backend/cdirect.c) ask of Python.

    The engine's say now and then, and the messages their drains found for others handed on.
    """

    __slots__ = ("e", "ctx", "got", "theirs", "backoff", "since", "napping")

    def __init__(self, e, ctx, got: bytearray, theirs: list[int]) -> None:
        self.e, self.ctx, self.theirs = e, ctx, theirs
        self.got = got  # shared with the compiled call: 0 while theirs[j]'s block is awaited
        self.backoff = Backoff()
        self.since = time.monotonic()
        self.napping = False  # the back-off naps: a round per nap, not a core kept busy

    def say(self) -> int:
        """The engine's say (its progress, liveness, back-off); bit 0: the back-off naps."""
        e = self.e
        if e.progress(links=False):  # the compiled rounds drain the links themselves
            self.backoff.reset()
        e.alive(self.since)
        self.backoff.idle()
        self.napping = self.backoff.napping()
        return self.napping | self._gone()

    def hand(self, link: int, items: list) -> int:
        """Hand on what a drain of `link` found and the call did not take."""
        self.e.hand_on(link, items)
        if self.napping:  # something came: poll eagerly again
            self.backoff.reset()
            self.napping = False
        return self._gone()

    def _gone(self) -> int:
        # bit 1: a message from a rank whose block is awaited waits in the engine's queues
        # (an engine round took its envelope), so the blocks left go the reference's way; one
        # from a rank whose block came is its next call's
        unexpected = self.ctx.queues.unexpected
        if unexpected:
            got = self.got
            awaited = [r for j, r in enumerate(self.theirs) if not got[j]]
            if any([m.source in awaited for m in unexpected]):
                return 2
        return 0


def _the_reference_way(c: Coll, slots: dict, ops: list) -> None:
    """Post the reference's receives for the blocks still awaited: `slots`, rank -> view."""
    for r, view in slots.items():
        ops.append((r, c.recv(view, r, T_ALLTOALL)))
