"""Forwarded messages as they arrive at a rank: into the receive posted for them, or queued.

A mixin of `_p2p.PointToPoint` (its state, its matcher queues): what a forwarder link brings
(eager messages, large ones' envelopes, acknowledgements, pulls, credits, stripes, fan-out
bytes) goes where it belongs. The commonest, a plain eager message, takes the shortest way
(`_plain_eager`, through `on_plain` when the compiled path has read its envelope): one
lookup of its context, the matcher, and a copy.
"""

from __future__ import annotations

from time import monotonic

from .._startup.native import MPI
from ..errors import ProtocolError, TruncationError
from ..wire import protocol as P
from ..wire.knobs import env_float
from .matching import Arrived, Posted
from .op import Op

_BYTE = MPI.BYTE
# How long the chunks of an unexpected large message wait at the forwarder for a receive to
# take them straight into its buffer, before they land in a spare (_p2p Rule 2).
LATE = env_float("MMPI_LATE_US", 200.0) / 1e6


class ForwardedArrivals:
    """What `PointToPoint` does with the messages its forwarder links bring."""

    __slots__ = ()

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
        if env.flags & P.F_TREE:  # a fan-out's ticket (see _fanout)
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
        m.credit = (env.src, env.nbytes)  # the sender spent credit on it (see _flow)
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
