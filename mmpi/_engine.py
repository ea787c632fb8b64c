"""The progress engine of one rank: routes sends, matches receives, drains both transports.

Same-cluster messages travel over native MPI on a per-context duplicate of the cluster's
COMM_WORLD; cross-cluster ones over the control/data intercommunicators to the forwarder.
Every receive goes through our own matcher (`_matching`), fed by matched probes (`Improbe`) on
both transports, so ANY_SOURCE sees both clusters and MPI's ordering rules hold across them.

Rule 1: nothing here blocks inside MPI. Waits poll `progress()` with back-off, so a rank that
        waits for one thing keeps draining the forwarder link; the forwarder can then never
        be stuck behind a rank that is waiting for something else (no deadlock through the
        relay), and idle ranks leave the CPU to others. A wait for native requests alone
        drains on every few polls only (`wait_all`): later, but never not at all.
Rule 2: a local message is left inside MPI (as an `MPI.Message` handle) until a receive
        matches it, then received straight into the user's buffer: no extra copy.
Rule 3: a forwarded large message is received chunk by chunk straight into the user's buffer
        when the receive is already posted; otherwise into a spare buffer, reused afterwards.
Rule 4: a test (Test, Iprobe, ...) that finds nothing progresses once and returns, but a
        caller that tests again at once, in a loop with nothing else in it, gets the same
        back-off as a wait: see `test`.
Rule 5: a collective's small crossings (protocol T_COLL) bypass all of that: the rank that
        needs one polls its forwarder link for that tag alone and takes it as it comes
        (`cross_recv`), in order per (context, sender); other waits that meet one keep it
        for later. No Request, no matching: see `cross_recv` for what that saves. A part
        whose size only its sender knows is a crossing when small, else a message through
        the matcher; its receiver takes whichever comes (`cross_recv(sized=True)`).
Rule 6: a rank that has left (the forwarder's T_LEFT notice) fails what can only wait for it
        for ever: a collective it never completed (see `comm._collective`), a receive from
        it that nothing has matched a grace period later (from any source, once every other
        rank has left), a Probe likewise. MPI itself would hang there.
"""

from __future__ import annotations

import sys
import time
from collections import deque
from collections.abc import Callable

from mpi4py import MPI

from . import protocol as P
from ._backoff import Backoff, yield_cpu
from ._knobs import env_float, env_int
from ._matching import MatchQueues
from ._topology import Layout
from .errors import (
    ForwarderLost,
    ProtocolError,
    RankGone,
    StateError,
    TruncationError,
    UsageError,
)
from .request import Request

_BYTE = MPI.BYTE
_ANY_SOURCE = MPI.ANY_SOURCE
_ANY_TAG = MPI.ANY_TAG
# How often a wait for the bridge checks that the forwarder is still heard from (polls).
_ALIVE_EVERY = 16
# A wait for native requests alone (`Engine.wait_all`) drains the bridge and checks liveness
# once per this many seconds of waiting, and tests the requests this many times between two
# yields of the CPU. Against draining on every 16th poll and one test per yield, 2+2 ranks,
# the two alternated in one job (6 jobs): Barrier as fast or faster in 6 of 6 jobs (median
# 3.5%), 8 B Allreduce faster in 5 (8%), 64 KiB Alltoall in 6 (5%); 1 MiB Bcast and
# Allreduce even. The tests per yield make the difference: with one, the same loop was even
# with the old one. (Testing the bridge several times per yield, in `wait_for`: no gain.)
# The clock is read, and the back-off consulted, once per `_YIELDS_PER_CHECK` yields, not
# on every one, and a single request is tested with its own `Test` (mpi4py's `Testall`
# builds and writes back an array on every call). Each alone gained a little; together,
# against the loop before, alternated in one 2+2 job (4 jobs, medians of 10 rounds of 200
# calls): 8 B Allreduce 72-76 against 80-90 us and Barrier 48-50 against 53-60 us, faster
# in 8 of 8; 1 MiB Allreduce and Bcast even. (The same for the crossing's wait,
# `_await_crossing`, was slower: Barrier 49-66 against 46-55 us in 3 of 4 jobs.) Past the
# back-off's yield phase the loop goes back to one round of tests per nap: with 32 rounds
# per nap, a rank waiting 2 s in a Barrier for a rank that computed used 0.56 s of CPU
# (0.18 s before, 0.16-0.21 s now).
_NATIVE_DRAIN = env_float("MMPI_NATIVE_DRAIN_US", 1000) * 1e-6
_TESTS_PER_YIELD = env_int("MMPI_TESTS_PER_YIELD", 10, minimum=1)
_YIELDS_PER_CHECK = range(32)
_ONE_ROUND = range(1)
_TESTS = range(_TESTS_PER_YIELD)
# A wait's first polls, each followed by a yield, come before it reads a clock or sets up its
# back-off and liveness checks: a small bridged collective's waits mostly end within them,
# and its critical path is the ranks' Python taking turns on the cores.
_FIRST = range(32)
_AGAIN = object()  # see Engine._from_link


class _Posted:
    """A posted receive: what it accepts and where the bytes go (view None = allocate)."""

    __slots__ = ("source", "tag", "view", "req", "op")

    def __init__(self, source, tag, view, req, op):
        self.source, self.tag, self.view, self.req, self.op = source, tag, view, req, op


class _Arrived:
    """An arrived, unmatched message: a native Message handle, or forwarded bytes."""

    __slots__ = ("source", "tag", "nbytes", "message", "data", "natives", "more", "spare")

    def __init__(self, source, tag, nbytes, message=None, data=None, natives=None):
        self.source, self.tag, self.nbytes = source, tag, nbytes
        self.message = message  # MPI.Message for a same-cluster message
        self.data = data  # payload of a forwarded message (may still be filling)
        self.natives = natives or []  # chunk receives still filling `data`
        self.more = None  # for a striped message: True once every stripe is in
        self.spare = None  # the engine's buffer holding `data`, to give back once copied out


class _Reassembly:
    """One striped message coming together: a stripe per forwarder, at known offsets.

    Stripes may arrive before the envelope that says where they go (they travel through
    other forwarders); those land in their own buffer and are copied once it is known.
    """

    __slots__ = ("parts", "arrived", "target", "nbytes", "early", "natives", "done", "_forget")

    def __init__(self, parts: int, forget) -> None:
        self.parts = parts
        self.arrived = 0
        self.target: memoryview | None = None
        self.nbytes = 0
        self.early: list[tuple[int, bytearray]] = []
        self.natives: list[MPI.Request] = []
        self.done = False
        self._forget = forget

    def stripe(self, k: int, env: P.Envelope, data: MPI.Intercomm) -> None:
        self.arrived += 1
        if self.target is None:
            buf = bytearray(env.nbytes)
            self.early.append((k, buf))
            into = memoryview(buf)
        else:
            off, n = P.stripe_bounds(self.nbytes, self.parts, k)
            if n != env.nbytes:
                raise ProtocolError(f"stripe {k} carries {env.nbytes} bytes, expected {n}")
            into = self.target[off:off + n]
        self.natives += [data.Irecv([into[o:o + m], m, _BYTE], 0, env.xfer)
                         for o, m in P.chunks(env.nbytes, env.chunk)]

    def place(self, target: memoryview, nbytes: int) -> None:
        self.target, self.nbytes = target, nbytes

    def ready(self) -> bool:
        if self.done:
            return True
        if self.arrived < self.parts or not MPI.Request.Testall(self.natives):
            return False
        for k, buf in self.early:
            off, n = P.stripe_bounds(self.nbytes, self.parts, k)
            if n != len(buf):
                raise ProtocolError(f"stripe {k} carried {len(buf)} bytes, expected {n}")
            self.target[off:off + n] = buf
        self.early = []
        self.done = True
        self._forget()
        return True


_SCRATCH_MAX = 64 << 20  # larger collective temporaries are not kept
# Seconds a receive from a rank that has left may still wait: its last messages may still be
# on their way (a local one, say, or one routed through another forwarder than the first
# notice), and a loaded 2-core machine can hold a process off the CPU for a while.
_GONE_GRACE = 3.0
_SPARE_BYTES = 64 << 20  # kept at most in spare buffers for large forwarded messages
# A test that comes within this many seconds of the last fruitless one continues a polling
# loop (a loop of Test alone comes back after 2-3 us, 1+1 ranks on 2 cores); one that comes
# later follows other work, and does not back off.
_TEST_GAP = 20e-6
_now = time.perf_counter


class Context:
    """One communication context: a native communicator and its matching queues."""

    __slots__ = ("id", "comm", "queues", "offset")

    def __init__(self, cid: int, comm: MPI.Intracomm, offset: int) -> None:
        self.id = cid
        self.comm = comm
        self.queues: MatchQueues[_Arrived, _Posted] = MatchQueues()
        self.offset = offset  # virtual rank of local rank 0 in this cluster


class Engine:
    """Everything one rank needs to talk to the bridged world."""

    def __init__(self, *, cluster: str, local: MPI.Intracomm,
                 links: list[tuple[MPI.Intercomm, MPI.Intercomm]], layout: Layout,
                 eager_max: int, chunk: int, stripe_min: int) -> None:
        self.cluster = cluster
        self.local = local  # the cluster's own COMM_WORLD
        self.links = links  # (control, data) intercommunicator to each forwarder
        self.nfwd = len(links)
        self.stripe_min = stripe_min if self.nfwd > 1 else 1 << 62
        self._stripes: dict[tuple[int, int], _Reassembly] = {}
        self._sid = 0
        self.layout = layout
        self.offset = layout.offset(cluster)
        self.local_rank = local.Get_rank()
        self._nlocal = local.Get_size()  # for `where`, asked on every send and remote receive
        self.vrank = self.offset + self.local_rank
        self.eager_max = eager_max
        self.chunk = chunk
        self.contexts: dict[int, Context] = {}
        self._ctx_list: list[Context] = []
        self._xfer = 0
        self._sends: list[Request] = []
        self._scratch: dict[int, bytearray] = {}
        self._spares: list[bytearray] = []
        self._status = MPI.Status()
        self._bye_acks = 0
        # Collective crossings (T_COLL) that came in while nobody asked for them yet:
        # (context, sender) -> deque of (tag, its collective call number, payload), in
        # arrival order.
        self._crossed: dict[tuple[int, int], deque] = {}
        # Ranks that have said goodbye: vrank -> (collective calls they made, when we heard).
        self.gone: dict[int, tuple[int, float]] = {}
        # Kept by `comm._collective` around every collective call (Rule 6):
        self.colls = 0  # collective calls this rank has completed (a refused call does not count)
        self._coll_op = ""  # the current call's name, for errors
        self._in_coll = False  # inside a collective call
        self._closing = False
        self._waiting = Backoff()  # for waits (one at a time: none is made inside another)
        self._test_wait = Backoff()  # for user loops of Test / Iprobe (Rule 4)
        self._tested = 0.0  # when the last fruitless test returned
        self.finalized = False
        self.broken: BaseException | None = None
        # Liveness: the forwarder sends a heartbeat every protocol.HEARTBEAT seconds; MPI here
        # never reports a dead peer, so silence while we wait is how a lost forwarder shows.
        self.heard = [time.monotonic()] * self.nfwd
        self.lost_after = env_float("MMPI_FORWARDER_TIMEOUT", P.LOST_AFTER, above=True)

    # -- contexts ------------------------------------------------------------------------
    def new_context(self, cid: int) -> Context:
        """Create context `cid` (collectively across the cluster: it duplicates a comm)."""
        if cid in self.contexts:
            raise StateError(f"context {cid} exists already")
        ctx = Context(cid, self.local.Dup(), self.offset)
        self.contexts[cid] = ctx
        self._ctx_list.append(ctx)
        return ctx

    def where(self, vrank: int) -> int | None:
        """Local rank of `vrank` if it is in this cluster, else None."""
        local = vrank - self.offset
        return local if 0 <= local < self._nlocal else None

    def scratch(self, slot: int, nbytes: int) -> memoryview:
        """A reusable temporary of `nbytes` for collectives (slot: one per buffer in a call).

        Fresh buffers are slow to communicate: their pages fault in on first touch, inside the
        transfer. A 1 MiB exchange across the zipper took 1000 us with new bytearrays against
        500 us with reused ones (2 cores, 1+1 ranks). Collectives block, so one set of slots
        serves every call; very large temporaries are not kept.
        """
        buf = self._scratch.get(slot)
        if buf is None or len(buf) < nbytes:
            buf = bytearray(nbytes)
            if nbytes <= _SCRATCH_MAX:
                self._scratch[slot] = buf
        return memoryview(buf)[:nbytes]

    # -- progress ------------------------------------------------------------------------
    def check(self) -> None:
        """Refuse to communicate after finalize."""
        if self.finalized:
            raise StateError(f"rank {self.vrank}: MPI communication after Finalize")

    def progress(self) -> bool:
        """Pull every message that has arrived on either transport into the matcher."""
        did = self._pull_links()
        st = self._status
        for ctx in self._ctx_list:
            comm = ctx.comm
            while True:
                msg = comm.Improbe(_ANY_SOURCE, _ANY_TAG, st)
                if msg is None:
                    break
                m = _Arrived(ctx.offset + st.Get_source(), st.Get_tag(), st.Get_count(_BYTE),
                             message=msg)
                recv = ctx.queues.arrive(m)
                if recv is not None:
                    self._deliver_local(recv, m)
                did = True
        if did:
            self._tested = 0.0  # a polling loop of tests starts afresh (see `test`)
        if self.gone and not self._closing:
            self._check_gone()
        return did

    def _pull_links(self) -> bool:
        """Pull what the forwarders have sent (the bridged half of `progress`)."""
        did = False
        st = self._status
        for i, (ctrl, _) in enumerate(self.links):
            while True:
                msg = ctrl.Improbe(0, _ANY_TAG, st)
                if msg is None:
                    break
                self.heard[i] = time.monotonic()
                self._on_forwarded(i, msg, st.Get_tag(), st.Get_count(_BYTE))
                did = True
        return did

    def _check_gone(self) -> None:
        """Fail what waits for a rank that has left: see protocol T_LEFT."""
        for rank, (colls, _) in self.gone.items():
            if self._in_coll and colls <= self.colls:
                raise RankGone(
                    f"{self._coll_op} on rank {self.vrank}: rank {rank} has already finalized "
                    f"(or exited) after {colls} collective call(s); this is call "
                    f"{self.colls + 1}, which it will never join"
                )
        for ctx in self._ctx_list:
            for recv in list(ctx.queues.posted):
                error = self.doomed(recv.op, recv.source, recv.tag, "receive")
                if error is not None:
                    self._fail_posted(ctx, recv, error)

    def doomed(self, op: str, source: int | None, tag: int | None,
               what: str) -> RankGone | None:
        """The RankGone for a wait that a rank's departure has made hopeless, else None.

        The wait (`what`: receive, probe) is for a message from `source` (None: any) with
        `tag`. Hopeless only once the notice is a grace period old: its last messages may
        still be arriving.
        """
        if not self.gone:
            return None
        settled = time.monotonic() - _GONE_GRACE
        if source is not None:
            left = self.gone.get(source)
            if left is None or left[1] > settled:
                return None
            who = f"rank {source} has"
        elif (len(self.gone) >= self.layout.size - 1
              and max(w for _, w in self.gone.values()) <= settled):
            who = "every other rank has"  # only then is an ANY_SOURCE wait hopeless
        else:
            return None
        return RankGone(f"{op} on rank {self.vrank}: {who} already finalized (or exited) and "
                        f"sent nothing that matches this {what} "
                        f"(tag {tag if tag is not None else 'ANY_TAG'})")

    def wait_for(self, ready: Callable[[], bool], remote: bool = False) -> None:
        """Progress until `ready()` holds, backing off while nothing happens.

        `remote`: only a message through a forwarder can make it hold (a receive from a rank
        of the other cluster). Then the first rounds pull the forwarder links alone, with no
        clock or back-off (see _FIRST): probing the local contexts too, and the bookkeeping,
        cost 2-3 us each of a 25 us bridged 8 B one-way time (benchmarks/pingpong_lean.py).
        """
        if ready():
            return
        if remote:
            pull = self._pull_links
            for _ in _FIRST:
                pull()
                if ready():  # every round: a large message's chunks land with no pull
                    return
                yield_cpu()
        if self.broken is not None:
            raise self.broken
        backoff = self._waiting
        backoff.reset()
        progress = self.progress
        # Silence counts only while we wait: after a long computation the heartbeats queued
        # meanwhile take a few polls to come in (seen: none on the first poll after 4 s).
        since = time.monotonic()
        polls = 0
        while True:
            if progress():
                backoff.reset()
            if ready():
                return
            polls += 1
            if polls == _ALIVE_EVERY:
                polls = 0
                self._alive(since)
            backoff.idle()

    def _alive(self, since: float) -> None:
        """Raise ForwarderLost if a forwarder has been silent too long in a wait since `since`."""
        if time.monotonic() - max(min(self.heard), since) > self.lost_after:
            self._lost()

    def test(self, ready: Callable[[], bool]) -> bool:
        """For a test (Test, Iprobe, ...): whether `ready()` holds, progressing once if need be.

        If it still does not, give the CPU away a little.

        `while not req.Test(): pass` would otherwise spin without a pause, and on a machine
        with fewer cores than processes it holds a core the forwarder and the sending rank
        need (benchmarks/poll_loops.py, 1+1 ranks on 2 cores: 8 B one way 350-780 us in a
        Test loop and 850-1280 us in an Iprobe loop, against 45-65 us in Wait). So a test
        that closely follows a fruitless one backs off exactly as a wait does: it yields the
        CPU and, after a long quiet, naps; the quiet starts again whenever progress brings
        something. A test that follows other work (computation overlapped with
        communication) only yields: a nap there would slow the computation.
        """
        if ready():
            return True
        self.progress()
        if ready():
            return True
        if _now() - self._tested > _TEST_GAP:
            self._test_wait.reset()
            yield_cpu()
        else:
            self._test_wait.idle()
        self._tested = _now()
        return False

    def _lost(self) -> None:
        i = min(range(self.nfwd), key=self.heard.__getitem__)
        which = "the forwarder" if self.nfwd == 1 else f"forwarder {i}"
        self.broken = ForwarderLost(
            f"rank {self.vrank} ({self.cluster} cluster, local rank {self.local_rank}): lost "
            f"{which}: nothing heard from it for {self.lost_after:g} s of waiting "
            f"(it sends a heartbeat every {P.HEARTBEAT:g} s)"
        )
        raise self.broken

    def wait_one(self, req: MPI.Request) -> None:
        """`wait_all` for one native request, the most common wait: its own `Test`."""
        self._wait_native(req.Test)

    def wait_all(self, natives: list[MPI.Request]) -> None:
        """Wait for native requests: test them, yield, and drain the bridge now and then.

        Nothing the bridge brings can complete a native request, so the bridge is drained
        (and the forwarder's liveness checked) only once per `_NATIVE_DRAIN` of waiting: later,
        but never not at all (Rule 1; large messages pending for this rank hold the
        forwarder's chunk buffers until it drains: tests/mpi/progs/pending_then_collective.py).
        Between two yields of the CPU the requests are tested
        `_TESTS_PER_YIELD` times: a test costs a fraction of a yield, which on oversubscribed
        cores is a context switch. Everything else is kept out of the loop: each microsecond
        a waiting rank spends in Python is taken from the rank or forwarder that has work to do.
        """
        if len(natives) == 1:
            self._wait_native(natives[0].Test)
            return
        testall = MPI.Request.Testall

        def test() -> bool:
            return testall(natives)
        self._wait_native(test)

    def _wait_native(self, test: Callable[[], bool]) -> None:
        # The first rounds of tests and yields come before anything else: no clock, back-off
        # or liveness to set up, which most of a small collective's waits never need (each
        # microsecond of a call's Python costs several on oversubscribed cores; see _FIRST).
        tests = _TESTS
        for _ in _FIRST:
            for _ in tests:
                if test():
                    return
            yield_cpu()
        if self.broken is not None:
            raise self.broken
        backoff = self._waiting
        backoff.reset()
        since = time.monotonic()
        drain_at = _now() + _NATIVE_DRAIN
        # Rounds of tests and yields with no clock in between, for as long as the back-off
        # would only yield anyway; once it naps, one round of tests per nap, or a long wait
        # (a rank computing elsewhere) would keep a third of a core busy between naps.
        while True:
            if _now() >= drain_at:
                if self.progress():
                    backoff.reset()
                self._alive(since)
                drain_at = _now() + _NATIVE_DRAIN
            backoff.idle()
            for _ in _ONE_ROUND if backoff.napping() else _YIELDS_PER_CHECK:
                for _ in tests:
                    if test():
                        return
                yield_cpu()

    # -- collective crossings (protocol T_COLL) ------------------------------------------
    def cross_send(self, ctx: Context, view, dest: int, tag: int) -> MPI.Request:
        """Send a collective's crossing of at most `eager_max` bytes to `dest` (other cluster).

        The bytes are copied out at once: the caller may reuse `view` straight away. The
        envelope carries this rank's collective call number (see `_keep_crossing`).
        """
        buf = P.pack_crossing(self.vrank, dest, tag, ctx.id, self.colls, view)
        return self.links[P.route(self.vrank, dest, self.nfwd)][0].Isend([buf, _BYTE], 0,
                                                                           P.T_COLL)

    def cross_recv(self, ctx: Context, source: int, tag: int, op: str,
                   sized: bool = False) -> memoryview | None:
        """The payload of the next crossing from `source` on `ctx`; it must carry `tag`.

        `sized`: only the sender knows the size, and sent a part larger than a crossing
        through the matcher; then None: the caller receives it there (it has arrived, or
        its envelope has).

        Every rank makes the same collective calls in the same order, so a collective's
        crossings from one sender come in the order they are asked for, and nothing needs
        matching. The wait polls only the forwarder link for T_COLL and receives into a
        fresh buffer; the bridge is drained, gone ranks noticed and the forwarder's liveness
        checked once per `_NATIVE_DRAIN`, as in `wait_all`. Against a receive through the
        matcher (Request, `progress`, `_on_forwarded`: about 6 us against 1.4 us per message
        on a loaded core), 2+2 ranks, alternated in one job, 4 jobs: Barrier 50-64 us
        against 69-75 us with the matcher and 73-92 us for the library's Barrier of then.
        """
        key = (ctx.id, source)
        if sized:
            # A drain may have taken both this call's crossing (kept) and the sender's part
            # of a later call through the matcher: the kept one's call number says which
            # came first. Else a part in the matcher came during an earlier wait, before any
            # later crossing.
            kept = self._crossed.get(key)
            if not (kept and kept[0][1] == self.colls) and \
                    self._through_matcher(ctx, source, tag, op, sized):
                return None
        crossing = (self._crossed and self._take_kept(key)) or \
            self._await_crossing(ctx, key, tag, op, sized)
        if crossing is None:
            return None
        sent, call, data = crossing
        if sent != tag or call != self.colls:
            raise self._other_call(op, source, sent, call, tag)
        return data

    def cross_swap(self, ctx: Context, view, peer: int, tag: int, op: str) -> memoryview:
        """Send `view` to `peer` as a crossing and return `peer`'s crossing back.

        `cross_send`, `cross_recv` and the wait for the send in one call: the leaders'
        exchange in every small bridged collective, whose Python is its critical path on
        oversubscribed cores (the call chain it replaces was 3-6 us of a 70 us Barrier:
        benchmarks/barrier_lean.py).
        """
        vrank = self.vrank
        s = self.links[P.route(vrank, peer, self.nfwd)][0].Isend(
            [P.pack_crossing(vrank, peer, tag, ctx.id, self.colls, view), _BYTE], 0, P.T_COLL)
        key = (ctx.id, peer)
        sent, call, data = (self._crossed and self._take_kept(key)) or \
            self._await_crossing(ctx, key, tag, op, False)
        if sent != tag or call != self.colls:
            raise self._other_call(op, peer, sent, call, tag)
        if not s.Test():
            self._wait_native(s.Test)
        return data

    def _other_call(self, op: str, source: int, sent: int, call: int, tag: int) -> UsageError:
        """The error for a crossing of another collective call than this rank's."""
        return UsageError(
            f"{op} on rank {self.vrank}: rank {source} sent its part of another collective "
            f"(its call {call + 1}, internal tag {sent}; this is call {self.colls + 1}, tag "
            f"{tag}): the ranks called different collectives, or in a different order"
        )

    def _await_crossing(self, ctx: Context, key: tuple[int, int], tag: int, op: str,
                        sized: bool) -> tuple[int, int, memoryview] | None:
        """Poll for the next crossing from key's sender (none is kept): (tag, call, payload).

        The one awaited is taken straight from the link, past `_crossed` (the common case,
        and the critical path of every small bridged collective); others are kept there.
        `sized` (see cross_recv): every message on the link is taken, and None returned as
        soon as the part is found to have come through the matcher.
        """
        source = key[1]
        link = P.route(self.vrank, source, self.nfwd)
        ctrl = self.links[link][0]
        st = self._status
        want = _ANY_TAG if sized else P.T_COLL
        probe = ctrl.Improbe
        # Probed `_TESTS_PER_YIELD` times per yield, as native waits test: the leaders'
        # crossing comes while the rank waits for its turn on the core, and a turn that ends
        # after one probe hands the core on just before it lands. 2+2 ranks, alternated
        # round by round in one job against one probe per yield (15 jobs of 16-20 rounds of
        # 300 calls, each followed by a Barrier): the 8 B Allreduce faster in 14 of the 15
        # jobs, by 1-18 us of 84-94 (median 6.5); 4 or 16 probes the same, 30 slower
        # (benchmarks/RESULTS.md, "The small collectives taken apart").
        for _ in _FIRST:  # probes and yields only (see _FIRST)
            for _ in _TESTS:
                msg = probe(0, want, st)
                if msg is not None:
                    break
            else:
                yield_cpu()
                continue
            got = self._from_link(ctx, key, link, msg, tag, op, sized)
            if got is not _AGAIN:
                return got
        if self.broken is not None:
            raise self.broken
        backoff = self._waiting
        backoff.reset()
        since = time.monotonic()
        drain_at = _now() + _NATIVE_DRAIN
        while True:
            msg = ctrl.Improbe(0, want, st)
            if msg is not None:
                got = self._from_link(ctx, key, link, msg, tag, op, sized)
                if got is not _AGAIN:
                    return got
                backoff.reset()
            elif _now() >= drain_at:
                if self.progress():  # may bring ours too (see _on_forwarded)
                    backoff.reset()
                crossing = self._take_kept(key)
                if crossing is not None:
                    return crossing
                if self._through_matcher(ctx, source, tag, op, sized):
                    return None
                self._alive(since)
                drain_at = _now() + _NATIVE_DRAIN
            else:
                backoff.idle()

    def _from_link(self, ctx: Context, key: tuple[int, int], link: int, msg: MPI.Message,
                   tag: int, op: str, sized: bool):
        """What a message `_await_crossing` probed on the link means for its wait.

        The crossing it waits for; None (sized: the part came through the matcher); or
        _AGAIN: it was kept, or matched, for later.
        """
        st = self._status
        if sized and st.Get_tag() != P.T_COLL:
            self.heard[link] = time.monotonic()
            self._on_forwarded(link, msg, st.Get_tag(), st.Get_count(_BYTE))
            return None if self._through_matcher(ctx, key[1], tag, op, sized) else _AGAIN
        buf = bytearray(st.Get_count(_BYTE))
        msg.Recv([buf, _BYTE])
        self.heard[link] = time.monotonic()
        head = P.unpack_crossing(buf)
        if head[0] == key[1] and head[1] == key[0]:  # ours, and none of its is kept
            return head[2], head[3], memoryview(buf)[P.ENVELOPE_SIZE:]
        self._keep_crossing(buf, head)
        return _AGAIN

    def _take_kept(self, key: tuple[int, int]) -> tuple[int, int, memoryview] | None:
        """The first crossing kept for key (context, sender), if any: (tag, call, payload)."""
        got = self._crossed.get(key)
        if not got:
            return None
        crossing = got.popleft()
        if not got:
            del self._crossed[key]
        return crossing

    def _through_matcher(self, ctx: Context, source: int, tag: int, op: str,
                         sized: bool) -> bool:
        """Whether `source`'s part of this call came through the matcher (sized waits only).

        A sender's messages to one rank come in order, and it sends its part of this call
        before anything of a later one; so the first message from it in the matcher's queue,
        if any, is of this call. Of another collective, or too large for a crossing where
        this side expected one: the arguments disagree, and waiting would never end.
        """
        m = ctx.queues.peek(source, None)
        if m is None:
            return False
        if m.tag != tag:
            raise UsageError(
                f"{op} on rank {self.vrank}: rank {source} sent its part of another collective "
                f"(internal tag {m.tag}, through the matcher; this is call {self.colls + 1}, "
                f"tag {tag}): the ranks called different collectives, or in a different order"
            )
        if not sized:
            raise UsageError(
                f"{op}: mismatched arguments: rank {self.vrank} ({self.cluster} cluster) has at "
                f"most {self.eager_max} bytes of data, rank {source} sent {m.nbytes}"
            )
        return True

    def _keep_crossing(self, buf: bytearray, head: tuple | None = None) -> None:
        """Keep a crossing nobody waits for yet, per (context, sender), in arrival order."""
        src, cid, tag, call = head or P.unpack_crossing(buf)
        key = (cid, src)
        got = self._crossed.get(key)
        if got is None:
            got = self._crossed[key] = deque()
        got.append((tag, call, memoryview(buf)[P.ENVELOPE_SIZE:]))
        ctx = self.contexts.get(cid)
        if ctx is not None and ctx.queues.posted:
            self.cross_conflict(ctx, src)

    def cross_conflict(self, ctx: Context, source: int) -> None:
        """Fail a receive through the matcher that this call's crossing from `source` beats.

        Sender and receiver each choose between a crossing (T_COLL, at most `eager_max`
        bytes) and the matcher by their own size. If they disagree the arguments do, and
        the one that waits in the matcher would wait for ever: its receive fails instead.
        Only a crossing of this very call counts (its envelope says which); one of a later
        call may come early and is kept.
        """
        got = self._crossed.get((ctx.id, source))
        if not got or got[0][1] != self.colls:
            return
        tag, _, data = got[0]
        for recv in ctx.queues.posted:
            if recv.source == source and recv.tag == tag:
                self._fail_posted(ctx, recv, UsageError(
                    f"{recv.op}: mismatched arguments: rank {self.vrank} ({self.cluster} "
                    f"cluster) has more than {self.eager_max} bytes of data, rank {source} "
                    f"sent {len(data)}"
                ))
                return

    @staticmethod
    def _fail_posted(ctx: Context, recv: _Posted, error: BaseException) -> None:
        """Withdraw a posted receive and complete its request with `error`."""
        ctx.queues.cancel(recv)
        recv.req._start([])
        recv.req._fail(error)

    # -- receiving -----------------------------------------------------------------------
    def irecv(self, ctx: Context, view, source, tag, op: str, pickled: bool = False) -> Request:
        """Post a receive; `view` None means allocate on arrival (pickled objects)."""
        req = Request(self, matched=False, pickled=pickled)
        recv = _Posted(source, tag, view, req, op)
        m = ctx.queues.post(recv)
        if m is not None:
            self._deliver(recv, m)
        elif source is not None and self.where(source) is None:
            req._remote = True  # only a forwarder can bring it (see wait_for)
        return req

    def _deliver(self, recv: _Posted, m: _Arrived) -> None:
        if m.message is not None:
            self._deliver_local(recv, m)
        else:
            self._deliver_forwarded(recv, m)

    def _deliver_local(self, recv: _Posted, m: _Arrived) -> None:
        req = recv.req
        req.source, req.tag, req.nbytes = m.source, m.tag, m.nbytes
        if recv.view is None:
            buf = bytearray(m.nbytes)
            req._obj = buf
            req._start([m.message.Irecv([buf, _BYTE])])
        elif m.nbytes > len(recv.view):
            # Consume the message anyway so nothing is left half-received, then fail.
            sink = bytearray(m.nbytes)
            req._start([m.message.Irecv([sink, _BYTE])])
            req._fail(self._truncated(recv, m))
        else:
            req._start([m.message.Irecv([recv.view, m.nbytes, _BYTE])])

    def _truncated(self, recv: _Posted, m: _Arrived) -> TruncationError:
        return TruncationError(
            f"{recv.op} on rank {self.vrank}: message from rank {m.source} with tag {m.tag} "
            f"has {m.nbytes} bytes but the receive buffer holds only {len(recv.view)} "
            "(MPI_ERR_TRUNCATE)"
        )

    def _deliver_forwarded(self, recv: _Posted, m: _Arrived) -> None:
        req = recv.req
        req.source, req.tag, req.nbytes = m.source, m.tag, m.nbytes
        if recv.view is None:
            req._obj = m.data
            req._spare = m.spare
            req._start(m.natives, more=m.more)
            return
        if m.nbytes > len(recv.view):
            req._start(m.natives, more=m.more)
            req._fail(self._truncated(recv, m))
            return
        view, data = recv.view, m.data

        def copy() -> None:
            view[: m.nbytes] = data
            if m.spare is not None:
                self._give_spare(m.spare)

        req._start(m.natives, copy, more=m.more)

    def _on_forwarded(self, link: int, msg: MPI.Message, tag: int, count: int) -> None:
        buf = bytearray(count)
        msg.Recv([buf, _BYTE])
        if tag == P.T_COLL:
            self._keep_crossing(buf)
            return
        if tag == P.T_EAGER or tag == P.T_LARGE:
            env = P.unpack(buf)
            if env.kind == P.K_STRIPE:
                self._reassembly(env.src, env.aux).stripe(env.tag, env, self.links[link][1])
                return
            ctx = self.contexts.get(env.context)
            if ctx is None:
                raise ProtocolError(f"rank {self.vrank}: message for unknown context {env.context}")
            if tag == P.T_EAGER and not env.flags & P.F_STRIPED:
                if count - P.ENVELOPE_SIZE != env.nbytes:
                    raise ProtocolError(
                        f"rank {self.vrank}: eager message says {env.nbytes} bytes, "
                        f"carries {count - P.ENVELOPE_SIZE}"
                    )
                m = _Arrived(env.src, env.tag, env.nbytes, data=memoryview(buf)[P.ENVELOPE_SIZE:])
                recv = ctx.queues.arrive(m)
                if recv is not None:
                    self._deliver_forwarded(recv, m)
                return
            m = _Arrived(env.src, env.tag, env.nbytes)
            recv = ctx.queues.arrive(m)
            if recv is not None and recv.view is not None and env.nbytes <= len(recv.view):
                target = recv.view  # straight into the user's buffer
            elif not env.flags & P.F_STRIPED:  # unexpected, or wanted whole (view None)
                m.spare = self._take_spare(env.nbytes)
                target = memoryview(m.spare)
            else:
                target = memoryview(bytearray(env.nbytes))
            m.data = target[: env.nbytes]
            if env.flags & P.F_STRIPED:
                ra = self._reassembly(env.src, env.aux)
                ra.place(m.data, env.nbytes)
                m.more = ra.ready
            else:
                data = self.links[link][1]
                m.natives = [
                    data.Irecv([target[off:off + n], n, _BYTE], 0, env.xfer)
                    for off, n in P.chunks(env.nbytes, env.chunk)
                ]
            if recv is None:
                return
            if target is recv.view:  # already on its way into the user's buffer
                req = recv.req
                req.source, req.tag, req.nbytes = m.source, m.tag, m.nbytes
                req._start(m.natives, more=m.more)
            else:
                self._deliver_forwarded(recv, m)
            return
        if tag == P.T_PING:
            return
        if tag == P.T_LEFT:
            body = P.decode_control(buf, ("rank", "colls"))
            if body["rank"] != self.vrank:
                self.gone.setdefault(body["rank"], (body["colls"], time.monotonic()))
            return
        if tag == P.T_BYE_ACK:
            self._bye_acks += 1
            return
        raise ProtocolError(f"rank {self.vrank}: unexpected control tag {tag} from the forwarder")

    def _take_spare(self, nbytes: int) -> bytearray:
        """A buffer for a large forwarded message that cannot go straight into a user buffer.

        That is one that arrived before its receive was posted, or whose receive takes it
        whole (pickled objects, collectives' sized crossings). Fresh buffers are slow (see
        `scratch`): in bidirectional 4 MiB streams, allocating them took 40% of a rank's time.
        One of at most twice the size is reused, else a new one is made.
        """
        for i, buf in enumerate(self._spares):
            if nbytes <= len(buf) <= 2 * nbytes:
                return self._spares.pop(i)
        return bytearray(nbytes)

    def _give_spare(self, buf: bytearray) -> None:
        if sum(map(len, self._spares)) + len(buf) <= _SPARE_BYTES:
            self._spares.append(buf)

    def _reassembly(self, src: int, sid: int) -> _Reassembly:
        key = (src, sid)
        ra = self._stripes.get(key)
        if ra is None:
            ra = self._stripes[key] = _Reassembly(self.nfwd, lambda: self._stripes.pop(key))
        return ra

    def probe(self, ctx: Context, source, tag) -> _Arrived | None:
        """The message a receive for (source, tag) would match now, if any."""
        found: list[_Arrived] = []

        def ready() -> bool:
            m = ctx.queues.peek(source, tag)
            if m is not None:
                found.append(m)
            return m is not None

        return found[0] if self.test(ready) else None

    # -- sending -------------------------------------------------------------------------
    def isend(self, ctx: Context, view: memoryview, dest: int, tag: int,
              pickled: bool = False) -> Request:
        """Start sending `view` to virtual rank `dest`."""
        req = Request(self, pickled=pickled)
        n = len(view)
        local = self.where(dest)
        if local is not None:
            req._start([ctx.comm.Isend([view, n, _BYTE], local, tag)])
        elif n <= self.eager_max:
            buf = bytearray(P.ENVELOPE_SIZE + n)
            P.pack_eager_into(buf, self.vrank, dest, tag, ctx.id, n)
            buf[P.ENVELOPE_SIZE:] = view
            req._keep = buf
            ctrl = self.links[P.route(self.vrank, dest, self.nfwd)][0]
            req._start([ctrl.Isend([buf, _BYTE], 0, P.T_EAGER)])
        elif n < self.stripe_min:
            route = P.route(self.vrank, dest, self.nfwd)
            env = P.Envelope(P.K_P2P, self.vrank, dest, tag, ctx.id, n, self.chunk,
                             self._next_xfer())
            req._keep = (env, view)
            req._start(self._send_large(route, env, view))
        else:
            # Striped: the envelope keeps this pair's route (and so its order); the bytes go
            # through every forwarder at once, one stripe each.
            self._sid = self._sid % P.MAX_XFER + 1
            head = bytearray(P.ENVELOPE_SIZE)
            P.Envelope(P.K_P2P, self.vrank, dest, tag, ctx.id, n, flags=P.F_STRIPED,
                       aux=self._sid).pack_into(head)
            ctrl = self.links[P.route(self.vrank, dest, self.nfwd)][0]
            natives = [ctrl.Isend([head, _BYTE], 0, P.T_EAGER)]
            for k in range(self.nfwd):
                off, ln = P.stripe_bounds(n, self.nfwd, k)
                env = P.Envelope(P.K_STRIPE, self.vrank, dest, k, ctx.id, ln, self.chunk,
                                 self._next_xfer(), aux=self._sid)
                natives += self._send_large(k, env, view[off:off + ln])
            req._keep = (head, view)
            req._start(natives)
        self._sends.append(req)
        if len(self._sends) > 256:
            self._sends = [r for r in self._sends if not r._done]
        return req

    def _next_xfer(self) -> int:
        self._xfer = self._xfer % P.MAX_XFER + 1
        return self._xfer

    def _send_large(self, link: int, env: P.Envelope, view: memoryview) -> list[MPI.Request]:
        """Envelope on the control channel, then at once the chunks on the data channel."""
        ctrl, data = self.links[link]
        head = env.pack()
        return [ctrl.Isend([head, _BYTE], 0, P.T_LARGE)] + [
            data.Isend([view[off:off + k], k, _BYTE], 0, env.xfer)
            for off, k in P.chunks(env.nbytes, env.chunk)
        ]

    def adopt(self, req: Request) -> None:
        """Keep a freed request alive until it completes (finalize waits for it)."""
        if req not in self._sends:
            self._sends.append(req)

    # -- shutdown ------------------------------------------------------------------------
    def finalize(self) -> None:
        """Flush sends, tell the forwarder we are done, wait for everyone, disconnect."""
        if self.finalized:
            return
        if self.broken is not None:
            # The bridge is gone: a clean goodbye would wait forever. End this cluster's job.
            print(f"mmpi: {self.broken}; aborting", file=sys.stderr, flush=True)
            self.local.Abort(1)
        self._closing = True
        pending = self._sends
        self.wait_for(lambda: all([r._poll() for r in pending]))
        bye = P.encode_control(colls=self.colls)
        self.wait_all([ctrl.Isend([bye, _BYTE], 0, P.T_BYE) for ctrl, _ in self.links])
        self.wait_for(lambda: self._bye_acks == self.nfwd)
        left = sum(len(c.queues.unexpected) for c in self._ctx_list)
        if left:
            print(f"mmpi: rank {self.vrank} finalized with {left} message(s) never received",
                  file=sys.stderr, flush=True)
        self.finalized = True
        for ctx in self._ctx_list:
            ctx.comm.Free()
        for ctrl, data in self.links:
            data.Disconnect()
            ctrl.Disconnect()
