"""Point-to-point transport: sends routed by where the receiver is, receives matched by us.

Same-cluster messages travel over native MPI on the context's native communicator;
cross-cluster ones go to a forwarder on the control/data intercommunicators. Every receive goes
through our own matcher (`matching`), fed by matched probes on both transports, so ANY_SOURCE
sees both clusters and MPI's ordering rules hold across them.

Rule 1: a local message is left inside MPI (as an `MPI.Message` handle) until a receive
        matches it, then received straight into the user's buffer: no extra copy.
Rule 2: a forwarded large message is received chunk by chunk straight into the user's buffer
        when the receive is already posted, or is posted within MMPI_LATE_US of its envelope
        (the chunks wait at the forwarder meanwhile); otherwise into a spare buffer, reused
        afterwards.
Rule 3: with several forwarders, every message from one sender to one receiver takes the same
        route (protocol Rule 5); one of `stripe_min` bytes or more is striped over all of them
        and put together here at known offsets.
Rule 4: a synchronous send completes once its receiver has matched it: the receiver
        acknowledges at once (protocol Rule 6). A same-cluster one travels with the engine's
        `sync_bit` set in its tag; as messages from one sender on one communicator arrive in
        send order, the receiver names it by its arrival number, and acknowledges with a
        native message of tag `ack_tag` carrying that number.
"""

from __future__ import annotations

from time import monotonic
from typing import TYPE_CHECKING

from .._backend.outbox import Outbox
from .._startup.native import MPI
from ..errors import ProtocolError, TruncationError
from ..wire import protocol as P
from ..wire.knobs import env_float
from . import op as _op
from .context import Context
from .fanout import Fanout
from .flow import Flow
from .large import Spares, Stripes, send_large
from .matching import Arrived, Posted
from .op import Op

if TYPE_CHECKING:
    from .engine import Engine

_BYTE = MPI.BYTE
_ANY_SOURCE = MPI.ANY_SOURCE
_ANY_TAG = MPI.ANY_TAG
_ID = 8  # bytes of a same-cluster acknowledgement: the synchronous send's arrival number
# How long the chunks of an unexpected large message wait at the forwarder for a receive to
# take them straight into its buffer, before they land in a spare (Rule 2).
LATE = env_float("MMPI_LATE_US") / 1e6


class PointToPoint:
    """The point-to-point transport of one rank (both clusters' messages to and from it)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.vrank = engine.vrank
        self.links = engine.links
        self.nfwd = len(engine.links)
        self.eager_max = engine.eager_max
        self.chunk = engine.chunk
        self.stripe_min = engine.stripe_min if self.nfwd > 1 else 1 << 62
        self.spares = Spares()
        self.late: list[Arrived] = []  # unexpected large messages whose chunks wait (LATE)
        self.monitor = None  # a monitor.Monitor while monitoring is on
        self.sends: list[Op] = []  # sends not known to be complete (finalize flushes them)
        self.outbox = Outbox()  # and the eager forwarded ones, complete for the program
        self.backend = engine.backend
        self.send_eager = engine.backend.send_eager
        self.stripes = Stripes(self)
        self._xfer = 0
        self._status = MPI.Status()
        self.sync_bit, self.ack_tag = engine.sync_bit, engine.ack_tag
        self._tag_mask = self.sync_bit - 1
        self.syncs: dict = {}  # synchronous sends not acknowledged yet: by id (forwarded), by
        #                        (context, destination, number) (same cluster)
        self._sync_id = 0
        self._sync_sent: dict[tuple[int, int], int] = {}  # (context, dest) -> sends numbered
        self._sync_seen: dict[tuple[int, int], int] = {}  # (context, source) -> arrivals
        # Forwarded messages for a context this rank has not registered yet: a faster peer may
        # send on a new communicator before this rank has finished creating it.
        self.early: dict[int, list[tuple[int, bytearray, int]]] = {}
        layout = engine.layout
        others = layout.size - layout.cluster_size(engine.cluster)
        self.flow = Flow(self, others)
        self.fanout = fan = Fanout(self)
        self.hold_min = fan.min_bytes if fan.on else 1 << 62

    def forget(self, cid: int) -> None:
        """Context `cid` is gone: its synchronous sends' numbering starts afresh if reused."""
        for table in (self._sync_sent, self._sync_seen):
            for key in [k for k in table if k[0] == cid]:
                del table[key]

    def deliver_early(self, ctx: Context) -> None:
        """Deliver, in arrival order, what came for `ctx` before it was registered."""
        for link, buf, tag in self.early.pop(ctx.id, ()):
            self.on_forwarded(link, buf, tag)

    # -- sending -------------------------------------------------------------------------
    def isend(self, ctx: Context, view: memoryview, dest: int, tag: int,
              sync: bool = False) -> Op:
        """Start sending `view` to rank `dest` of `ctx`'s communicator (`sync`: Rule 4)."""
        op = Op()
        n = len(view)
        local = ctx.local_of[dest]
        op.peer, op.tag = ctx.world_of[dest], tag
        if self.monitor is not None:
            self.monitor.count(ctx.kind, ctx.world_of[dest], n)
        if local < 0 and n >= self.hold_min and not sync:
            self.fanout.hold(op, ctx, view, ctx.world_of[dest], tag)  # see fanout
        elif sync:
            if local < 0 and self.fanout.held:
                self.fanout.flush()
            self._isend_sync(op, ctx, view, dest, tag)
        elif local >= 0:
            op.start([ctx.comm.Isend([view, n, _BYTE], local, tag)])
        else:
            if self.fanout.held:
                self.fanout.flush()
            self._send_forwarded(op, ctx, view, ctx.world_of[dest], tag)
            if op.done:
                return op
        self.sends.append(op)
        if len(self.sends) > 256:
            self.sends = [s for s in self.sends if not s.done]
        return op

    def send_now(self, ctx: Context, view: memoryview, dest: int, tag: int) -> bool:
        """Send's short way: a small message across, done at once (the backend's outbox).

        False where it is not such a message.
        """
        if len(view) > self.eager_max or ctx.local_of[dest] >= 0 or self.monitor is not None:
            return False
        if self.fanout.held:
            self.fanout.flush()
        world = ctx.world_of[dest]
        self.send_copy(P.route(self.vrank, world, self.nfwd), P.T_EAGER, world, tag, ctx.id,
                       view)
        return True

    def send_copy(self, route: int, mpitag: int, dest: int, tag: int, cid: int, view,
                  aux: int = 0) -> None:
        """Envelope and a copy of `view` to world rank `dest`, done at once (the backend's outbox).

        A small message (T_EAGER) or a collective's crossing (T_COLL, `aux` its call number)
        through forwarder `route`, by the backend (its outbox keeps the send).
        """
        self.send_eager(self.engine.handles[route], mpitag, self.vrank, dest, tag, cid, 0, aux,
                        view)

    def send_held(self, op: Op, ctx: Context, view: memoryview, dest: int, tag: int) -> None:
        """Send a held send of `view` to world rank `dest` as it would have gone (fanout)."""
        self._send_forwarded(op, ctx, view, dest, tag)

    def recv_now(self, ctx: Context, view: memoryview, source: int | None,
                 tag: int | None) -> Arrived | None:
        """Recv's short way: a small forwarded message come already, if it fits; else None."""
        m = ctx.queues.peek(source, tag)
        if m is None or not m.whole() or m.nbytes > len(view):
            return None
        self.take(ctx, m)
        view[: m.nbytes] = m.data
        return m

    def _isend_sync(self, op: Op, ctx: Context, view: memoryview, dest: int, tag: int) -> None:
        local = ctx.local_of[dest]
        if local >= 0:
            pair = (ctx.id, dest)
            number = self._sync_sent.get(pair, 0)
            self._sync_sent[pair] = number + 1
            key = (ctx.id, dest, number)
            natives = [ctx.comm.Isend([view, len(view), _BYTE], local, tag | self.sync_bit)]
        else:
            key = self.next_id()
            self.syncs[key] = op
            self._send_forwarded(op, ctx, view, ctx.world_of[dest], tag, key)
            return
        self.syncs[key] = op
        op.start(natives, more=lambda: key not in self.syncs)

    def sent_all(self) -> bool:
        """Whether every eager forwarded send has left this rank (finalize waits for it)."""
        return self.outbox.reap() and self.backend.reap()

    def next_id(self) -> int:
        """A new id for a synchronous or deferred send of this rank."""
        self._sync_id = self._sync_id % P.MAX_XFER + 1
        return self._sync_id

    def _acknowledge(self, m: Arrived, sid: int) -> None:
        """Tell the sender of synchronous message `m` that a receive matched it."""
        ctx = m.ctx
        local = ctx.local_of[m.source]
        if local >= 0:
            buf = bytearray((-1 - sid).to_bytes(_ID, "little"))
            op = Op()
            op.keep = buf
            op.start([ctx.comm.Isend([buf, _BYTE], local, self.ack_tag)])
        else:
            dest = ctx.world_of[m.source]
            buf = bytearray(P.ENVELOPE_SIZE)
            P.Envelope(P.K_ACK, self.vrank, dest, 0, ctx.id, 0, aux=sid).pack_into(buf)
            op = Op()
            op.keep = buf
            route = self.links[P.route(self.vrank, dest, self.nfwd)][0]
            op.start([route.Isend([buf, _BYTE], 0, P.T_EAGER)])
        self.sends.append(op)

    def _matched(self, m: Arrived) -> None:
        """A receive (or a matched probe) has taken `m`: a synchronous send hears of it now."""
        if m.sync is not None:
            self._acknowledge(m, m.sync)
            m.sync = None

    def _send_forwarded(self, op: Op, ctx: Context, view: memoryview, dest: int,
                        tag: int, sync: int = 0) -> list:
        n = len(view)
        route = P.route(self.vrank, dest, self.nfwd)
        flags = P.F_SYNC if sync else 0
        if n > self.eager_max and not self.flow.spend(dest, n):
            self.flow.defer(op, ctx.id, view, dest, tag, route, sync)  # protocol Rule 7
        elif n <= self.eager_max and not sync:  # the bytes are ours now: done (Outbox)
            self.send_copy(route, P.T_EAGER, dest, tag, ctx.id, view)
            op.done = op.matched = True
            return []
        elif n <= self.eager_max:  # synchronous: complete once acknowledged (below)
            buf = bytearray(P.ENVELOPE_SIZE + n)
            P.pack_eager_into(buf, self.vrank, dest, tag, ctx.id, n, flags, sync)
            buf[P.ENVELOPE_SIZE:] = view
            op.keep = buf
            op.start([self.links[route][0].Isend([buf, _BYTE], 0, P.T_EAGER)])
        elif n < self.stripe_min or sync:
            env = P.Envelope(P.K_P2P, self.vrank, dest, tag, ctx.id, n, self.chunk,
                             self.next_xfer(), flags, sync)
            op.keep = (env, view)
            op.start(send_large(self.links[route], env, view))
        else:
            head, natives = self.stripes.send(view, dest, tag, ctx.id, route)
            op.keep = (head, view)
            op.start(natives)
        if sync:  # complete once acknowledged too
            more = op.more
            op.more = (lambda: sync not in self.syncs) if more is None else \
                (lambda: more() and sync not in self.syncs)
        return op.natives

    def next_xfer(self) -> int:
        """A new data-channel tag for a large message's chunks (protocol Rule 3)."""
        self._xfer = self._xfer % P.MAX_XFER + 1
        return self._xfer

    def adopt(self, op: Op) -> None:
        """Keep a freed send alive until it completes (finalize waits for it)."""
        if op not in self.sends:
            self.sends.append(op)

    # -- receiving -----------------------------------------------------------------------
    def irecv(self, ctx: Context, view, source: int | None, tag: int | None,
              call: str) -> Op:
        """Post a receive (source, tag None: any); `view` None means allocate on arrival."""
        op = Op(matched=False)
        recv = Posted(source, tag, view, op, call)
        m = ctx.queues.post(recv)
        if m is not None:
            if m.whole() and m.sync is None:
                self._eager_into(recv, m.source, m.tag, m.data, False)  # come already, whole
            else:
                self._deliver(recv, m)
        else:
            _op.NEW_WORK = op  # a progress thread, if any, has a receive to look after
            if source is not None and ctx.local_of[source] < 0:
                op.remote = True  # only a forwarder can bring it (see Engine.wait_for)
        return op

    def pull_local(self) -> bool:
        """Take every same-cluster message that has arrived into the matcher."""
        did = False
        st = self._status
        for ctx in self.engine.context_list:
            comm = ctx.comm
            while True:
                msg = comm.Improbe(_ANY_SOURCE, _ANY_TAG, st)
                if msg is None:
                    break
                did = True
                tag = st.Get_tag()
                if tag & self.sync_bit:
                    source = ctx.from_local[st.Get_source()]
                    if tag == self.ack_tag:
                        buf = bytearray(_ID)
                        msg.Recv([buf, _BYTE])
                        self.syncs.pop((ctx.id, source, int.from_bytes(buf, "little")), None)
                        continue
                    pair = (ctx.id, source)
                    number = self._sync_seen.get(pair, 0)
                    self._sync_seen[pair] = number + 1
                    m = Arrived(source, tag & self._tag_mask, st.Get_count(_BYTE), message=msg,
                                sync=-1 - number, ctx=ctx)
                else:
                    m = Arrived(ctx.from_local[st.Get_source()], tag, st.Get_count(_BYTE),
                                message=msg)
                recv = ctx.queues.arrive(m)
                if recv is not None:
                    if m.sync is not None:
                        self._matched(m)
                    self._deliver_local(recv, m)
        return did

    def _deliver(self, recv: Posted, m: Arrived) -> None:
        self._matched(m)
        if m.message is not None:
            self._deliver_local(recv, m)
        else:
            self._deliver_forwarded(recv, m)

    def _deliver_local(self, recv: Posted, m: Arrived) -> None:
        op = recv.op
        op.source, op.tag, op.nbytes = m.source, m.tag, m.nbytes
        if recv.view is None:
            buf = bytearray(m.nbytes)
            op.obj = buf
            op.start([m.message.Irecv([buf, _BYTE])])
        elif m.nbytes > len(recv.view):
            # Consume the message anyway so nothing is left half-received, then fail.
            op.start([m.message.Irecv([bytearray(m.nbytes), _BYTE])])
            op.fail(self._truncated(recv, m))
        else:
            op.start([m.message.Irecv([recv.view, m.nbytes, _BYTE])])

    def take(self, ctx: Context, m: Arrived) -> Arrived:
        """A matched probe takes `m` out of the queue: it is matched now."""
        ctx.queues.take(m)
        self._matched(m)
        return m

    def receive(self, m: Arrived, view, call: str) -> Op:
        """Receive the message a matched probe took into `view` (None: allocate)."""
        op = Op(matched=False)
        recv = Posted(m.source, m.tag, view, op, call)
        if m.message is not None:
            self._deliver_local(recv, m)
        else:
            self._deliver_forwarded(recv, m)
        return op

    def discard(self, ctx: Context, m: Arrived) -> Op:
        """Take `m` out of the queue and receive it into a buffer of its own, to be dropped."""
        ctx.queues.take(m)
        self._matched(m)
        return self.receive(m, None, "Finalize")

    def cancel(self, op: Op) -> bool:
        """Withdraw a receive no message has matched yet; False if it is matched already."""
        for ctx in self.engine.context_list:
            for recv in ctx.queues.posted:
                if recv.op is op:
                    ctx.queues.cancel(recv)
                    op.cancelled = True
                    op.start([])
                    return True
        return False

    @staticmethod
    def fail_posted(ctx: Context, recv: Posted, error: BaseException) -> None:
        """Withdraw a posted receive and complete its operation with `error`."""
        ctx.queues.cancel(recv)
        recv.op.start([])
        recv.op.fail(error)

    # -- arrivals: what the forwarder links bring, into its receive or queued -----------

    def _truncated(self, recv: Posted, m: Arrived | Op) -> TruncationError:
        return TruncationError(
            f"{recv.call} on rank {self.vrank}: message from rank {m.source} with tag {m.tag} "
            f"has {m.nbytes} bytes but the receive buffer holds only {len(recv.view)} "
            "(MPI_ERR_TRUNCATE)"
        )

    def _deliver_forwarded(self, recv: Posted, m: Arrived) -> None:
        op = recv.op
        if m.tree is not None:
            self.fanout.deliver(recv, m, self._truncated)
            return
        op.source, op.tag, op.nbytes = m.source, m.tag, m.nbytes
        if m.pull is not None:
            self.flow.deliver_pulled(recv, m, self._truncated)
            return
        credit = m.credit
        if m.late is not None:
            if recv.view is not None and m.nbytes <= len(recv.view):
                self._land(m, recv.view)  # its chunks still wait: no copy through a spare
                op.start(m.natives, lambda: self.flow.consumed(*credit))
                return
            self._land(m, None)

        def consumed() -> None:
            if credit is not None:
                self.flow.consumed(*credit)

        if recv.view is None:
            op.obj = m.data
            op.spare = m.spare
            op.start(m.natives, consumed, more=m.more)
            return
        if m.nbytes > len(recv.view):
            op.start(m.natives, consumed, more=m.more)
            op.fail(self._truncated(recv, m))
            return
        view, data = recv.view, m.data
        if m.whole():
            view[: m.nbytes] = data  # an eager message: its bytes are all here
            op.start([])
            return

        def copy() -> None:
            view[: m.nbytes] = data
            if m.spare is not None:
                m.spare[0].give(m.spare[1])
            consumed()

        op.start(m.natives, copy, more=m.more)

    def _land(self, m: Arrived, into: memoryview | None) -> None:
        """Receive the waiting chunks of `m` into `into`, or (None) into a spare buffer."""
        link, xfer, chunk, deadline = m.late
        m.late = None
        if deadline is not None:  # it waited among the late ones (land_late)
            self.late.remove(m)
        if into is None:
            spare = self.spares.take(m.nbytes)
            m.spare = (self.spares, spare)
            into = memoryview(spare)
        m.data = into[: m.nbytes]
        data = self.links[link][1]
        m.natives = [data.Irecv([into[off:off + n], n, _BYTE], 0, xfer)
                     for off, n in P.chunks(m.nbytes, chunk)]

    def land_late(self) -> bool:
        """Land the chunks no receive came for in time in spares (a progress step)."""
        late = self.late
        now, did = monotonic(), False
        while late and late[0].late[3] <= now:
            self._land(late[0], None)
            did = True
        if not late:
            self.engine.background.remove(self.land_late)
        return did

    def on_plain(self, link: int, buf: bytearray, src: int, tag: int, cid: int) -> None:
        """A plain eager message from `link`, its envelope read by the compiled path."""
        if not self._plain_eager(buf, src, tag, cid):
            self.on_forwarded(link, buf, P.T_EAGER)  # not registered yet, or wrong

    def _plain_eager(self, buf: bytearray, src: int, tag: int, cid: int) -> bool:
        """A plain eager message into its receive, or queued; False if no context knows it.

        `buf` holds envelope and payload, from world rank `src` on context `cid`.
        """
        ctx = self.engine.contexts.get(cid)
        source = ctx.from_world.get(src) if ctx is not None else None
        if source is None:
            return False
        queues = ctx.queues
        recv = queues.match(source, tag) if queues.posted else None
        data = memoryview(buf)[P.ENVELOPE_SIZE:]
        if recv is None:
            queues.keep(Arrived(source, tag, len(data), data=data))
        else:
            self._eager_into(recv, source, tag, data)
        return True

    def _eager_into(self, recv: Posted, source: int, tag: int, data: memoryview,
                    posted: bool = True) -> None:
        """Complete receive `recv` with eager bytes `data` (or fail it: too many).

        `posted` False: the receive is being posted, and its caller may still add steps to
        run at completion (`Op.after`): `poll` completes it then.
        """
        op, view = recv.op, recv.view
        op.source, op.tag, op.nbytes = source, tag, len(data)
        if view is None:
            op.obj = data
        elif len(data) > len(view):
            op.fail(self._truncated(recv, op))
        else:
            view[: len(data)] = data
        if posted and op.after is None:
            op.matched = op.done = True  # nothing left for poll(), nor a progress thread
        else:
            op.start([])

    def on_forwarded(self, link: int, buf: bytearray, tag: int) -> None:
        """A T_EAGER or T_LARGE message (envelope, maybe payload) from forwarder `link`."""
        head = P.plain_eager(buf) if tag == P.T_EAGER else None
        if head is not None and self._plain_eager(buf, head[0], head[1], head[2]):  # commonest
            return
        env = P.unpack(buf)
        kind = env.kind
        if kind == P.K_ACK:
            self.syncs.pop(env.aux, None)
            return
        if kind == P.K_PULL:
            self.flow.on_pull(env.src, env.aux)
            return
        if kind == P.K_CREDIT:
            self.flow.on_credit(env.src, env.nbytes)
            return
        if env.flags & P.F_PULLED:
            self.flow.on_pulled(env, self.links[link][1])
            return
        if kind == P.K_TREE:
            self.fanout.on_bytes(env, self.links[link][1])
            return
        if kind == P.K_STRIPE:
            self.stripes.of(env.src, env.aux).stripe(env.tag, env, self.links[link][1])
            return
        ctx = self.engine.contexts.get(env.context)
        if ctx is None:
            self.early.setdefault(env.context, []).append((link, buf, tag))
            return
        source = ctx.from_world.get(env.src)
        if source is None:
            raise ProtocolError(f"rank {self.vrank}: message on context {env.context} from "
                                f"rank {env.src}, which is not in its communicator")
        if env.flags & P.F_TREE:  # a fan-out's ticket (see fanout)
            m = self.fanout.ticket(env, source, buf)
            recv = ctx.queues.arrive(m)
            if recv is not None:
                self.fanout.deliver(recv, m, self._truncated)
            return
        sync = env.aux if env.flags & P.F_SYNC else None
        if env.flags & P.F_DEFER:  # protocol Rule 7: the data comes once a receive pulls it
            m = Arrived(source, env.tag, env.nbytes, sync=sync, ctx=ctx)
            m.pull = (env.src, env.aux)
            recv = ctx.queues.arrive(m)
            if recv is not None:
                self._matched(m)
                self._deliver_forwarded(recv, m)
            return
        if tag == P.T_EAGER and not env.flags & P.F_STRIPED:
            if len(buf) - P.ENVELOPE_SIZE != env.nbytes:
                raise ProtocolError(
                    f"rank {self.vrank}: eager message says {env.nbytes} bytes, "
                    f"carries {len(buf) - P.ENVELOPE_SIZE}"
                )
            m = Arrived(source, env.tag, env.nbytes, data=memoryview(buf)[P.ENVELOPE_SIZE:],
                        sync=sync, ctx=ctx)
            recv = ctx.queues.arrive(m)
            if recv is not None:
                self._matched(m)
                self._deliver_forwarded(recv, m)
            return
        m = Arrived(source, env.tag, env.nbytes, sync=sync, ctx=ctx)
        m.credit = (env.src, env.nbytes)  # the sender spent credit on it (see flow)
        recv = ctx.queues.arrive(m)
        if not env.flags & P.F_STRIPED:
            # its chunks wait at the forwarder until landed; if unexpected, a moment more: a
            # loop of blocking receives posts the next one while its envelope is fresh
            waits = recv is None and LATE
            m.late = (link, env.xfer, env.chunk, monotonic() + LATE if waits else None)
            if recv is not None:
                self._matched(m)
                self._deliver_forwarded(recv, m)  # lands them, straight in if they fit
            elif waits:
                self.late.append(m)
                if len(self.late) == 1 and self.land_late not in self.engine.background:
                    self.engine.background.append(self.land_late)
            else:
                self._land(m, None)
            return
        if recv is not None and recv.view is not None and env.nbytes <= len(recv.view):
            target = recv.view  # straight into the user's buffer
        else:  # unexpected, or wanted whole (view None)
            target = memoryview(bytearray(env.nbytes))
        m.data = target[: env.nbytes]
        ra = self.stripes.of(env.src, env.aux)
        ra.place(m.data, env.nbytes)
        m.more = ra.ready
        if recv is None:
            return
        self._matched(m)
        if target is recv.view:  # already on its way into the user's buffer
            op = recv.op
            op.source, op.tag, op.nbytes = m.source, m.tag, m.nbytes
            op.start(m.natives, lambda: self.flow.consumed(*m.credit), more=m.more)
        else:
            self._deliver_forwarded(recv, m)

__all__ = ["PointToPoint"]
