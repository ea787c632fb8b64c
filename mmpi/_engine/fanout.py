"""Dynamic broadcasts: the same bytes sent to several ranks of the other cluster cross once.

A task runtime or a master sends one buffer to several workers with separate sends, because
no rank knows the set of receivers in advance. Across the zipper each of those copies would
go through the forwarder, the one link every crossing shares. Here (after Denis and Trahay's
dynamic broadcasts, `references/dynamic-broadcasts-fr.txt`) they cross once:

Rule 1: a standard send of at least `min_bytes` to a rank of the other cluster is held until
        the next progress point: any wait or test, any other send across, or a progress pass
        that finds it older than `_HOLD` (so a progress thread does not split a burst). MPI
        lets a non-blocking send start that late.
Rule 2: at the flush, held sends of the same bytes (the same address and size; for pickled
        objects, equal contents) to at least `min_dests` distinct ranks of the other cluster
        become one fan-out, if the first destination can take the bytes early (Rule 7 of the
        protocol: its credit). Each destination gets a ticket in the place of its message
        among the sender's messages: the envelope (F_TREE, the size, the fan-out's id), no
        payload. The bytes go once, to the first destination (K_TREE), with the list of the
        others. Everything else is sent as it would have been, in the order it was sent.
Rule 3: a ticket is matched as any message is (order, ANY_SOURCE, Status: all as without the
        fan-out); the receive completes once the bytes are in.
Rule 4: a rank that has the bytes sends them on, natively over its own cluster, to its
        children in a binomial tree over the destinations: a head (sender, id, size, the
        child's own subtree) then the bytes. It does so on any progress (the program's calls,
        or its progress thread), whether or not its own ticket has been received.
Rule 5: the bytes are dropped once this rank's ticket has been received (or discarded at
        finalize) and its forwards are complete; the first destination then gives the
        sender's credit back.
"""

from __future__ import annotations

import os
import struct
import sys
import time
from typing import TYPE_CHECKING

from .._startup.native import MPI
from ..wire import protocol as P
from ..wire.knobs import env_flag, env_int
from .large import send_large
from .matching import Arrived

if TYPE_CHECKING:
    from .context import Context
    from .op import Op
    from .p2p import PointToPoint

_BYTE = MPI.BYTE
_ANY_SOURCE = MPI.ANY_SOURCE
_TestAll = MPI.Request.Testall
_HEAD, _DATA = 1, 2  # native tags on the cluster's own world (used by nothing else)
_HEAD_FMT = struct.Struct("<iIQI")  # sender, fan-out id, size, subtree length; then ranks
_HOLD = 200e-6  # seconds a progress pass leaves a burst to grow (Rule 1)
_now = time.perf_counter


def subtrees(below: list[int]) -> list[tuple[int, list[int]]]:
    """(child, the child's subtree) of a node whose subtree without itself is `below`.

    Binomial, by halving: the child that heads the larger half comes first, as its subtree
    is the deepest.
    """
    out = []
    nodes = [-1] + below  # -1: the node itself
    while len(nodes) > 1:
        h = (len(nodes) + 1) // 2
        out.append((nodes[h], nodes[h + 1:]))
        nodes = nodes[:h]
    return out


class _Held:
    """A send held until the next flush (Rule 1)."""

    __slots__ = ("op", "ctx", "view", "dest", "tag", "key", "group")

    def __init__(self, op: Op, ctx: Context, view, dest: int, tag: int, key) -> None:
        self.op, self.ctx, self.view, self.dest, self.tag, self.key = op, ctx, view, dest, tag, key
        self.group: _Group | None = None


class _Group:
    """One fan-out being sent: its id, destinations, and the sends of its bytes."""

    __slots__ = ("fid", "dests", "natives")

    def __init__(self, fid: int, dests: list[int]) -> None:
        self.fid, self.dests = fid, dests
        self.natives: list = []

    def sent(self) -> bool:
        return bool(self.natives) and _TestAll(self.natives)


def _never() -> bool:
    return False


class _Bytes:
    """A fan-out's bytes on a destination: arriving, sent on to the subtree, read by tickets."""

    __slots__ = ("data", "natives", "below", "forwards", "heads", "taken", "credit", "done",
                 "spare", "key", "into")

    def __init__(self, key: tuple[int, int]) -> None:
        self.key = key  # (sender, fan-out id)
        self.data = None  # the bytes (a memoryview), once their receive is posted
        self.natives: list | None = None  # the receives filling them
        self.below: list[int] | None = None  # this rank's subtree, once known
        self.forwards: list | None = None  # the sends to its children, once started
        self.heads: list[bytes] = []  # their heads, alive until sent
        self.taken = False  # this rank's ticket was received (or discarded)
        self.credit = None  # (sender, bytes) to give back when dropped (first destination)
        self.done = False
        self.spare = None  # the pool's buffer under `data`, given back when dropped
        self.into = None  # a receive's buffer, when it was matched before the bytes came

    def ready(self) -> bool:
        """Whether the bytes are all in."""
        if self.done:
            return True
        if self.natives is None or not _TestAll(self.natives):
            return False
        self.done = True
        return True

    def take(self) -> None:
        self.taken = True


class Fanout:
    """The dynamic broadcasts of one rank: as a sender (held sends) and as a destination."""

    def __init__(self, p2p: PointToPoint) -> None:
        engine = p2p.engine
        self.p2p = p2p
        self.engine = engine
        self.on = env_flag("MMPI_DYNAMIC_BCAST")
        # Where it paid on the 2-core machine (docs/performance.md, "Dynamic broadcasts"):
        # 1 MiB to three ranks 1.3x faster; 256 KiB, or two ranks, slower.
        self.min_bytes = max(env_int("MMPI_DYNAMIC_BCAST_MIN"), p2p.eager_max + 1)
        self.min_dests = env_int("MMPI_DYNAMIC_BCAST_DESTS")
        self.held: list[_Held] = []
        self._since = 0.0
        self.tree = engine.local  # the cluster's own world: the heads and bytes (Rule 4)
        self.locate = engine.layout.locate
        self.entries: dict[tuple[int, int], _Bytes] = {}
        self._status = MPI.Status()
        self._serving = False
        self.combined = 0  # sends that went as tickets
        self.fanouts = 0  # the crossings of their bytes
        self.kept = 0  # bytes that did not cross the zipper thanks to them

    # -- sender --------------------------------------------------------------------------
    def hold(self, op: Op, ctx: Context, view, dest: int, tag: int) -> None:
        """Hold a send of `view` to world rank `dest` until the next flush (Rule 1)."""
        n = len(view)
        key = (n, MPI.buffer(view).address)
        base = view.obj
        if type(base) is bytes:  # a pickled object: the same contents make the same bytes
            for h in self.held:
                if h.key[0] == n and type(h.view.obj) is bytes and h.view.obj == base:
                    key = h.key
                    break
        if not self.held:
            self._since = _now()
        self.held.append(_Held(op, ctx, view, dest, tag, key))
        op.start([], more=_never)

    def due(self) -> bool:
        """Whether a progress pass should flush (a burst left alone for `_HOLD`)."""
        return _now() - self._since > _HOLD

    def flush(self) -> None:
        """Send what is held, sends of the same bytes to several ranks as one fan-out."""
        held, self.held = self.held, []
        by_key: dict = {}
        for h in held:
            by_key.setdefault(h.key, []).append(h)
        p2p = self.p2p
        for items in by_key.values():
            seen: dict[int, _Held] = {}
            for h in items:
                seen.setdefault(h.dest, h)  # a destination named twice: the later goes alone
            if len(seen) < self.min_dests:
                continue
            dests = list(seen)
            if not p2p.flow.spend(dests[0], len(items[0].view)):
                continue
            group = _Group(p2p.next_id(), dests)
            for h in seen.values():
                h.group = group
        for h in held:
            group = h.group
            if group is None:
                p2p.send_held(h.op, h.ctx, h.view, h.dest, h.tag)
                continue
            self._ticket(h, group)
            if h.dest == group.dests[0]:
                self._bytes(h, group)
            h.op.start([], more=group.sent)

    def _ticket(self, h: _Held, group: _Group) -> None:
        """The envelope alone, in the message's place (the first destination's: the others).

        The first destination learns its subtree from its ticket, so the bytes go as they are.
        """
        p2p = self.p2p
        below = group.dests[1:] if h.dest == group.dests[0] else []
        buf = bytearray(P.ENVELOPE_SIZE)
        P.Envelope(P.K_P2P, p2p.vrank, h.dest, h.tag, h.ctx.id, len(h.view), flags=P.F_TREE,
                   aux=group.fid).pack_into(buf)
        if below:
            buf += struct.pack(f"<{len(below)}i", *below)
        link = p2p.links[P.route(p2p.vrank, h.dest, p2p.nfwd)][0]
        p2p.outbox.add(link.Isend([buf, _BYTE], 0, P.T_EAGER), buf)
        self.combined += 1

    def _bytes(self, h: _Held, group: _Group) -> None:
        """The bytes, once, to the first destination (K_TREE), right after its ticket."""
        p2p = self.p2p
        n = len(h.view)
        env = P.Envelope(P.K_TREE, p2p.vrank, h.dest, 0, 0, n, p2p.chunk, p2p.next_xfer(), 0,
                         group.fid)
        group.natives = send_large(p2p.links[P.route(p2p.vrank, h.dest, p2p.nfwd)], env,
                                   h.view)
        self.fanouts += 1
        self.kept += n * (len(group.dests) - 1)
        if p2p.monitor is not None:
            p2p.monitor.fanout(len(group.dests), 1, n * (len(group.dests) - 1))

    # -- destination ---------------------------------------------------------------------
    def _entry(self, src: int, fid: int) -> _Bytes:
        key = (src, fid)
        e = self.entries.get(key)
        if e is None:
            e = self.entries[key] = _Bytes(key)
            if not self._serving:
                self._serving = True
                self.engine.background.append(self.serve)
        return e

    def ticket(self, env: P.Envelope, source: int, buf) -> Arrived:
        """The message a ticket stands for, to be matched (Rule 3)."""
        m = Arrived(source, env.tag, env.nbytes)
        m.tree = e = self._entry(env.src, env.aux)
        if len(buf) > P.ENVELOPE_SIZE:  # the first destination's: the others follow
            e.below = list(struct.unpack_from(f"<{(len(buf) - P.ENVELOPE_SIZE) // 4}i", buf,
                                              P.ENVELOPE_SIZE))
        return m

    def _land(self, e: _Bytes, n: int) -> memoryview:
        """Where the bytes go: the buffer of a receive that took the ticket already.

        Else one of the pool: its pages are touched already, a faster receive than a new one.
        """
        if e.into is not None:
            e.data = e.into
        else:
            e.spare = self.p2p.spares.take(n)
            e.data = memoryview(e.spare)[:n]
        return e.data

    def on_bytes(self, env: P.Envelope, data: MPI.Intercomm) -> None:
        """A fan-out's bytes from the forwarder, this rank the first destination (K_TREE)."""
        e = self._entry(env.src, env.aux)
        view = self._land(e, env.nbytes)
        e.natives = [data.Irecv([view[off:off + n], n, _BYTE], 0, env.xfer)
                     for off, n in P.chunks(env.nbytes, env.chunk)]
        e.credit = (env.src, env.nbytes)

    def deliver(self, recv, m: Arrived, truncated) -> None:
        """A receive took ticket `m`: it completes with the bytes, copied into its buffer."""
        e = m.tree
        op, view, n = recv.op, recv.view, m.nbytes
        op.source, op.tag, op.nbytes = m.source, m.tag, n
        if view is not None and n > len(view):
            op.start([], e.take, more=e.ready)
            op.fail(truncated(recv, m))
            return

        if view is not None and e.natives is None:  # straight into the receive's buffer,
            e.into = view[:n]  # which it keeps until the children have the bytes too

            def landed() -> bool:
                return self._start_forwards(e) and _TestAll(e.forwards)

            op.start([], e.take, more=landed)
            return

        def finish() -> None:
            if view is None:
                op.obj, e.spare = e.data, None  # the program's now, not the pool's
            else:
                view[:n] = e.data
            e.taken = True
            self._start_forwards(e)  # the children need not wait for the next progress pass

        op.start([], finish, more=e.ready)

    def serve(self) -> bool:
        """Take heads from parents, send on what is in, drop what is done (a progress step)."""
        did = False
        tree, st = self.tree, self._status
        while True:
            msg = tree.Improbe(_ANY_SOURCE, _HEAD, st)
            if msg is None:
                break
            head = bytearray(st.Get_count(_BYTE))
            msg.Recv([head, _BYTE])
            src, fid, n, count = _HEAD_FMT.unpack_from(head)
            e = self._entry(src, fid)
            e.below = list(struct.unpack_from(f"<{count}i", head, _HEAD_FMT.size))
            e.natives = [tree.Irecv([self._land(e, n), n, _BYTE], st.Get_source(), _DATA)]
            did = True
        for key, e in list(self.entries.items()):
            if e.forwards is None:
                if not self._start_forwards(e):
                    continue
                did = True
            if e.taken and _TestAll(e.forwards):
                del self.entries[key]
                if e.spare is not None:
                    self.p2p.spares.give(e.spare)
                if e.credit is not None and not self.engine.closing():
                    self.p2p.flow.consumed(*e.credit)
                did = True
        if not self.entries:
            self._serving = False
            self.engine.background.remove(self.serve)
        return did

    def _start_forwards(self, e: _Bytes) -> bool:
        """Send the bytes on once they are in and the subtree is known; whether they were."""
        if e.forwards is None:
            if e.below is None or not e.ready():
                return False
            e.forwards = self._forward(e)
        return True

    def _forward(self, e: _Bytes) -> list:
        """The heads and bytes to this rank's children (Rule 4)."""
        src, fid = e.key
        n = len(e.data)
        sends = []
        for child, below in subtrees(e.below):
            head = _HEAD_FMT.pack(src, fid, n, len(below)) + struct.pack(f"<{len(below)}i",
                                                                          *below)
            e.heads.append(head)
            local = self.locate(child)[1]
            sends.append(self.tree.Isend([head, _BYTE], local, _HEAD))
            sends.append(self.tree.Isend([e.data, n, _BYTE], local, _DATA))
        return sends

    def report(self) -> None:
        """Say what was combined (mmpi-run --verbose), at finalize."""
        if self.combined and os.environ.get("MMPI_VERBOSE"):
            print(f"mmpi: rank {self.p2p.vrank} combined {self.combined} sends into "
                  f"{self.fanouts} crossing(s) of their bytes: {self.kept} bytes did not "
                  "cross the zipper (dynamic broadcasts)", file=sys.stderr, flush=True)

    def idle(self) -> bool:
        """Whether nothing is left to send on or to drop (finalize waits for it)."""
        return not self.entries


__all__ = ["Fanout", "subtrees"]
