"""The progress engine of one rank: drains both transports, waits politely, notices loss.

The engine owns what every communicator shares: the cluster's native world, the links to the
forwarders, the registry of contexts, and the two transports that use them (`p2p` for
point-to-point messages, `_collectives.transport` for collectives' small crossings).
Communicators talk to it through `register`/`unregister` (their contexts), the transports, the
waits (`wait_for`, `wait_one`, `wait_all`, `test`) and `departures` (`departures.Departures`:
`enter` and `leave` around a collective). `backend` runs the hot loops (the links' drain, the
first rounds of a wait, small sends: `mmpi._backend`), `lanes` its whole calls in C or None.

Rule 1: nothing here blocks inside MPI. Waits poll `progress()` with back-off, so a rank that
        waits for one thing keeps draining the forwarder link; the forwarder can then never
        be stuck behind a rank that is waiting for something else (no deadlock through the
        relay), and idle ranks leave the CPU to others. A wait for native requests alone
        drains on every `_NATIVE_DRAIN` of waiting only: later, but never not at all.
Rule 2: a test (Test, Iprobe, ...) that finds nothing progresses once and returns, but a
        caller that tests again at once, in a loop with nothing else in it, gets the same
        back-off as a wait: see `test`.
Rule 3: a rank that has left (the forwarder's T_LEFT notice) fails what can only wait for it
        for ever: a collective it never completed, a receive from it that nothing has matched
        a grace period later (from any source, once every other rank has left), a Probe
        likewise. MPI itself would hang there (see `departures`).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

from .. import _backend
from .._startup.native import MPI
from ..errors import ForwarderLost, ProtocolError, StateError
from ..wire import protocol as P
from ..wire.backoff import Backoff, yield_cpu
from ..wire.knobs import env_float, env_int
from ..wire.layout import Layout
from .context import Context
from .crossings import Crossings
from .departures import Departures
from .op import PENDING
from .p2p import PointToPoint

_BYTE = MPI.BYTE
# How often a wait for the bridge checks that the forwarder is still heard from (polls).
_ALIVE_EVERY = 16
# Seconds a rank listens to a silent forwarder's link before it declares it lost (`alive`).
_LISTEN = 0.1
# A wait for native requests alone drains the bridge and checks liveness once per this many
# seconds, and tests the requests this many times between two yields of the CPU: a test costs
# a fraction of a yield, which on shared cores is a context switch (docs/performance.md,
# "Waiting policy").
_NATIVE_DRAIN = env_float("MMPI_NATIVE_DRAIN_US") * 1e-6
_TESTS_PER_YIELD = env_int("MMPI_TESTS_PER_YIELD")
_YIELDS_PER_CHECK = range(32)
_ONE_ROUND = range(1)
_TESTS = range(_TESTS_PER_YIELD)
# A wait's first polls, each followed by a yield, come before it reads a clock or sets up its
# back-off: a small collective's waits mostly end within them, and its critical path is the
# ranks' Python taking turns on the cores.
_FIRST = range(32)
_BATCH = 4  # the same rounds in batches, compiled
_FIRST_BATCHES = range(32 // _BATCH)
# A test that comes within this many seconds of the last fruitless one continues a polling
# loop; one that comes later follows other work, and does not back off.
_TEST_GAP = 20e-6
_now = time.perf_counter


class Engine:
    """Everything one rank needs to talk to the bridged world."""

    def __init__(self, *, cluster: str, local: MPI.Intracomm,
                 links: list[tuple[MPI.Intercomm, MPI.Intercomm]], layout: Layout,
                 eager_max: int, chunk: int, stripe_min: int) -> None:
        self.cluster = cluster
        self.local = local  # the cluster's own COMM_WORLD
        # Native communicators are made on this one alone: nothing here probes it. Open MPI's
        # Comm_create_group exchanges messages with the caller's tag on the parent's
        # point-to-point context, where the contexts' ANY_TAG probes would take them.
        self.maker = local.Dup()
        self.links = links  # (control, data) intercommunicator to each forwarder
        self.nfwd = len(links)
        self.layout = layout
        self.local_rank = local.Get_rank()
        self.vrank = layout.vrank(cluster, self.local_rank)
        self.eager_max = eager_max
        self.chunk = chunk
        self.stripe_min = stripe_min
        # Native tags: the top bit of the range marks a synchronous send, the largest tag is
        # its acknowledgement (see p2p Rule 4); users get the tags below the bit.
        native_ub = local.Get_attr(MPI.TAG_UB)
        self.sync_bit = 1 << (native_ub.bit_length() - 1)
        self.ack_tag = native_ub
        self.tag_ub = self.sync_bit - 2
        self.communicators: list = []  # the live communicator cores (see _api.core)
        self.contexts: dict[int, Context] = {}
        self.context_list: list[Context] = []  # the same, in registration order, for polling
        self._bye_acks = 0
        # Ranks that have said goodbye: world rank -> (collective calls they completed, per
        # collective context id; when we heard).
        self.departures = Departures(self)
        self.gone = self.departures.gone  # read here; written by the departures only
        # Collective calls completed on freed communicators, per collective context id (the
        # most over the communicators that had it: ids are reused), for the goodbye.
        self._freed_calls: dict[int, int] = {}
        self._closing = False
        self._waiting = Backoff()  # for waits (one at a time: none is made inside another)
        self._test_wait = Backoff()  # for user loops of Test / Iprobe (Rule 2)
        self._tested = 0.0  # when the last fruitless test returned
        self.finalized = False
        self.broken: BaseException | None = None
        # Liveness: the forwarder sends a heartbeat every protocol.HEARTBEAT seconds; MPI here
        # never reports a dead peer, so silence while we wait is how a lost forwarder shows.
        self.heard = [time.monotonic()] * self.nfwd
        self.lost_after = env_float("MMPI_FORWARDER_TIMEOUT")
        self.monitor = None  # a monitor.Monitor while monitoring is on (see set_monitor)
        self.backend = backend = _backend.get()
        self.lanes = backend.lanes  # whole calls in C (mmpi._backend.interface), or None
        self.handles = tuple([backend.link(ctrl) for ctrl, _ in links])  # as the backend takes them
        self.data_handles = tuple([data.handle for _, data in links])
        self.p2p = PointToPoint(self)
        self._fan = self.p2p.fanout  # held sends, flushed before any wait (fanout Rule 1)
        self.crossings = Crossings(self)
        self.tests, self.first = _TESTS, _FIRST  # for the transports' own first rounds
        self.drain_every = _NATIVE_DRAIN  # and their waits' drains (_collectives/compiled)
        self.first_batches, self.batch = _FIRST_BATCHES, _BATCH  # the same, compiled
        # Work that advances only when polled (non-blocking collectives): called on progress.
        self.background: list[Callable[[], bool]] = []
        self._in_background = False

    # -- contexts ------------------------------------------------------------------------
    def register(self, ctx: Context) -> None:
        """Start receiving on `ctx` (its id must be new on this rank)."""
        if ctx.id in self.contexts:
            raise StateError(f"context {ctx.id} exists already on rank {self.vrank}")
        self.contexts[ctx.id] = ctx
        self.context_list.append(ctx)
        self.p2p.deliver_early(ctx)

    def set_monitor(self, monitor) -> None:
        """Count from now on into `monitor` (None: stop counting; the hooks cost nothing)."""
        self.monitor = self.p2p.monitor = self.crossings.monitor = monitor
        for core in self.communicators:
            core.recount(monitor)

    def cancel(self, op) -> bool:
        """Cancel a receive that nothing has matched yet (sends are not cancelled)."""
        return self.p2p.cancel(op)

    def retired(self, coll_id: int, calls: int) -> None:
        """A communicator freed here completed `calls` collective calls on context `coll_id`."""
        self._freed_calls[coll_id] = max(calls, self._freed_calls.get(coll_id, 0))

    def unregister(self, ctx: Context) -> None:
        """Stop receiving on `ctx` (its communicator was freed)."""
        self.contexts.pop(ctx.id, None)
        if ctx in self.context_list:
            self.context_list.remove(ctx)
        # A later communicator may get this id again: it starts with nothing of this one's.
        self.p2p.forget(ctx.id)
        self.crossings.forget(ctx.id)

    # -- progress ------------------------------------------------------------------------
    def check(self) -> None:
        """Refuse to communicate after finalize."""
        if self.finalized:
            raise StateError(f"rank {self.vrank}: MPI communication after Finalize")

    def progress(self, links: bool = True) -> bool:
        """Pull every message that has arrived on either transport into its place.

        `links` False: not the forwarder links (a compiled wait that drains them itself).
        """
        if self._fan.held and self._fan.due():
            self._fan.flush()
        did = self.pull_links() if links else False
        if self.p2p.pull_local():
            did = True
        if self.background and not self._in_background:
            self._in_background = True
            try:
                for step in list(self.background):
                    if step():
                        did = True
            finally:
                self._in_background = False
        if did:
            self._tested = 0.0  # a polling loop of tests starts afresh (see `test`)
        if self.gone and not self._closing:
            self.departures.check()
        return did

    def closing(self) -> bool:
        """Whether this rank has begun to finalize (it sends nothing more to the forwarders)."""
        return self._closing

    def in_flight(self) -> bool:
        """Whether a non-blocking collective or a posted receive waits for progress.

        Asked by the progress thread without the lock: sends and matched receives it keeps
        itself.
        """
        if self.background:
            return True
        try:
            return any([ctx.queues.posted for ctx in self.context_list])
        except RuntimeError:  # changed under us by the program's thread: look again soon
            return True

    # -- the forwarder links ---------------------------------------------------------
    def pull_links(self) -> bool:
        """Pull what the forwarders have sent (the bridged half of `progress`)."""
        did = False
        # each link's messages in one call; compiled, what a posted receive takes whole the
        # drain completes itself
        drain, contexts = self.backend.drain, self.contexts
        for i, link in enumerate(self.handles):
            got = drain(link, contexts)
            if got is not None:
                self.hand_on(i, got)
                did = True
        return did

    def hand_on(self, link: int, got: list) -> None:
        """What the backend's drain of `link` left to Python, in order."""
        self.heard[link] = time.monotonic()
        plain = self.p2p.on_plain
        for tag, buf, src, utag, cid in got:
            if src < 0:
                self.on_forwarded(link, buf, tag)
            else:  # a plain eager message, its envelope read by the backend
                plain(link, buf, src, utag, cid)

    def wait_plain(self, ops: list) -> None:
        """The first rounds of a wait for `ops` (receives from the other cluster), compiled.

        The backend's `wait_ops` drains while posted receives take whole what comes; what it
        leaves to Python is handed on. The wait proper (`wait_for`: back-off, liveness) does
        the rest (all of it with the Python backend, whose `wait_ops` returns at once).
        """
        if self.nfwd != 1 or self._fan.held or self.broken is not None:
            return
        wait, link, contexts = self.backend.wait_ops, self.handles[0], self.contexts
        while True:
            heard, got = wait(link, contexts, ops, len(self.first))  # the wait's first rounds
            if heard:
                self.heard[0] = time.monotonic()
            if got is None:  # all done, or the idle rounds ran out
                return
            self.hand_on(0, got)

    def on_forwarded(self, link: int, buf: bytearray, tag: int) -> None:
        """Hand a message from forwarder `link` to whoever it is for."""
        if tag == P.T_COLL:
            self.crossings.keep(buf)
        elif tag == P.T_EAGER or tag == P.T_LARGE:
            self.p2p.on_forwarded(link, buf, tag)
        elif tag == P.T_PING:
            pass
        elif tag == P.T_LEFT:
            body = P.decode_control(buf, ("rank", "colls"))
            if body["rank"] != self.vrank:
                colls = {int(k): v for k, v in dict(body["colls"]).items()}
                self.departures.heard(body["rank"], colls)
        elif tag == P.T_BYE_ACK:
            self._bye_acks += 1
        else:
            raise ProtocolError(f"rank {self.vrank}: unexpected control tag {tag} "
                                "from the forwarder")

    # -- waiting -------------------------------------------------------------------------
    def wait_for(self, ready: Callable[[], bool], remote: bool = False) -> None:
        """Progress until `ready()` holds, backing off while nothing happens.

        `remote`: only a message through a forwarder can make it hold (a receive from a rank
        of the other cluster). Then the first rounds pull the forwarder links alone, with no
        clock or back-off (see _FIRST).
        """
        if self._fan.held:
            self._fan.flush()
        if ready():
            return
        if remote and self.nfwd == 1:
            # probes and yields in batches, in the backend: compiled, a round costs the core
            # it holds a fraction of an interpreted one (crank.c)
            wait_link, link = self.backend.wait_link, self.handles[0]
            for _ in _FIRST_BATCHES:
                if wait_link(link, _BATCH):
                    self.pull_links()
                if ready():  # every batch: a large message's chunks land with no pull
                    return
        elif remote:
            pull = self.pull_links
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
        # meanwhile take a few polls to come in.
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
                self.alive(since)
            backoff.idle()

    def alive(self, since: float) -> None:
        """Raise ForwarderLost if a forwarder has been silent too long in a wait since `since`.

        Silence is what listening finds: before the verdict the links are looked at once
        more (`_listen`), so that a long step of this rank's own inside the wait (posting the
        many chunk receives of a large message, say) counts for nothing: the forwarder's
        heartbeats queued meanwhile, unread.
        """
        if time.monotonic() - max(min(self.heard), since) > self.lost_after:
            self._listen(since)
            if time.monotonic() - max(min(self.heard), since) > self.lost_after:
                self._lost()

    def _listen(self, since: float) -> None:
        """Probe the control link of each silent forwarder for a while: anything there is life.

        A probe takes nothing: what it sees is drained as usual. Only the control link, which
        every drain empties: the data link may hold a chunk nobody has received.
        """
        deadline = time.monotonic() + _LISTEN
        while True:
            now = time.monotonic()
            quiet = [i for i in range(self.nfwd)
                     if now - max(self.heard[i], since) > self.lost_after]
            if not quiet or now > deadline:
                return
            for i in quiet:
                if self.links[i][0].Iprobe(0, MPI.ANY_TAG):  # the forwarder: rank 0 there
                    self.heard[i] = time.monotonic()
            yield_cpu()

    def test(self, ready: Callable[[], bool]) -> bool:
        """For a test (Test, Iprobe, ...): whether `ready()` holds, progressing once if need be.

        A test that closely follows a fruitless one backs off exactly as a wait does: a loop
        of tests with nothing else in it would otherwise hold a core that the forwarder and
        the sending rank need. A test that follows other work (computation overlapped with
        communication) only yields: a nap there would slow the computation.
        """
        if self._fan.held:
            self._fan.flush()
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

    def wait_until(self, poll: Callable[[], object], drained: Callable[[], object]):
        """Wait until `poll()` gives something other than PENDING, and return it.

        `poll` looks at one transport only; once per `_NATIVE_DRAIN` the bridge is drained
        (`progress`), then `drained()` gets its say (what it awaits may have come that way),
        and the forwarder's liveness is checked.
        """
        if self._fan.held:
            self._fan.flush()
        if self.broken is not None:
            raise self.broken
        backoff = self._waiting
        backoff.reset()
        since = time.monotonic()
        drain_at = _now() + _NATIVE_DRAIN
        while True:
            got = poll()
            if got is not PENDING:
                return got
            if _now() >= drain_at:
                if self.progress():
                    backoff.reset()
                got = drained()
                if got is not PENDING:
                    return got
                self.alive(since)
                drain_at = _now() + _NATIVE_DRAIN
            else:
                backoff.idle()

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
        self.wait_native(req.Test)

    def wait_all(self, natives: list[MPI.Request]) -> None:
        """Wait for native requests: test them, yield, and drain the bridge now and then.

        Nothing the bridge brings can complete a native request, so the bridge is drained
        (and the forwarder's liveness checked) only once per `_NATIVE_DRAIN` of waiting:
        later, but never not at all (Rule 1: large messages pending for this rank hold the
        forwarder's chunk buffers until it drains).
        """
        if len(natives) == 1:
            self.wait_native(natives[0].Test)
            return
        testall = MPI.Request.Testall
        self.wait_native(lambda: testall(natives))

    def wait_native(self, test: Callable[[], bool]) -> None:
        """Wait until `test()` holds, where only native MPI progress can make it hold."""
        if self._fan.held:
            self._fan.flush()
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
        # would keep a third of a core busy between naps.
        while True:
            if _now() >= drain_at:
                if self.progress():
                    backoff.reset()
                self.alive(since)
                drain_at = _now() + _NATIVE_DRAIN
            backoff.idle()
            for _ in _ONE_ROUND if backoff.napping() else _YIELDS_PER_CHECK:
                for _ in tests:
                    if test():
                        return
                yield_cpu()

    # -- shutdown ------------------------------------------------------------------------
    def _discard_unexpected(self, wait: bool = True) -> list[str]:
        """Receive and drop the messages nothing received, so their senders can finish.

        MPI calls such a program erroneous; a sender waiting for its send to complete must
        still get to the end. Returns a line for each message (`wait`: until they are in).
        """
        lines = []
        for ctx in self.context_list:
            while ctx.queues.unexpected:
                m = ctx.queues.unexpected[0]
                lines.append(f"from rank {m.source} (tag {m.tag}, {m.nbytes} bytes)")
                self._discards.append(self.p2p.discard(ctx, m))
        if wait and self._discards:
            self.wait_for(lambda: all([op.poll() for op in self._discards]))
        return lines

    def _flush_sends(self) -> list[str]:
        """Wait for this rank's sends; give up on those to ranks that have left without them.

        Returns a line for each send given up on (a grace period after its receiver left).
        """
        pending = self.p2p.sends
        unreceived = self._unreceived

        def settled() -> bool:
            # One of them may be waiting for this rank itself to take a message.
            unreceived.extend(self._discard_unexpected(wait=False))
            left = self.departures.settled
            return self.p2p.sent_all() and all([op.poll() or left(op.peer) for op in pending])

        self.wait_for(settled)
        return [f"to rank {op.peer} (tag {op.tag}), which finalized without receiving it"
                for op in pending if not op.done]

    def finalize(self) -> None:
        """Flush sends, tell the forwarder we are done, wait for everyone, disconnect."""
        if self.finalized:
            return
        if self.broken is not None:
            # The bridge is gone: a clean goodbye would wait forever. End this cluster's job.
            print(f"mmpi: {self.broken}; aborting", file=sys.stderr, flush=True)
            self.local.Abort(1)
        self._closing = True
        self._discards: list = []
        self._unreceived = unreceived = self._discard_unexpected(wait=False)
        abandoned = self._flush_sends()
        # The collective calls this rank completed, per communicator (collective_gone reads them).
        # A freed one counts too: the notice may reach a rank still in that communicator's
        # last call, which this rank has finished. Where freed communicators shared an id,
        # the most calls: a slower rank is never told a finished call will not be joined.
        colls = dict(self._freed_calls)
        for c in self.communicators:
            colls[c.coll.id] = max(c.calls, colls.get(c.coll.id, 0))
        bye = P.encode_control(colls=colls)
        self.wait_all([ctrl.Isend([bye, _BYTE], 0, P.T_BYE) for ctrl, _ in self.links])
        self.wait_for(lambda: self._bye_acks == self.nfwd)
        unreceived += self._discard_unexpected()  # and what came in while the others finished
        self.wait_for(self._fan.idle)  # the fan-outs this rank passes on (fanout Rule 5)
        self._fan.report()
        _report(self.vrank, "message(s) it never received", unreceived)
        _report(self.vrank, "send(s) that no rank received", abandoned)
        self.finalized = True
        for ctx in self.context_list:
            ctx.comm.Free()
        self.maker.Free()
        for ctrl, data in self.links:
            data.Disconnect()
            ctrl.Disconnect()


def _report(vrank: int, what: str, lines: list[str]) -> None:
    if lines:
        shown = "; ".join(lines[:5]) + (f"; and {len(lines) - 5} more" if len(lines) > 5 else "")
        print(f"mmpi: rank {vrank} finalized with {len(lines)} {what}: {shown}",
              file=sys.stderr, flush=True)


__all__ = ["Engine"]
