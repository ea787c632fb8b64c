"""One relay direction (e.g. low -> high): envelopes, eager payloads and pipelined chunks.

A relay touches only its source link for receiving and its destination link for sending.
Both directions proceed at the same time (full duplex): by default one thread polls both and
moves their envelopes and small messages, and each direction's mover thread moves its
multi-chunk streams (`poll`, `move`); or each direction has a polling thread of its own.

Rule 1: envelopes are handled strictly in arrival order and forwarded at once, so MPI's
        per-sender order is kept end to end (the receiver matches in envelope order).
Rule 2: a large message is moved in chunks through a bounded pool of buffers: receiving chunk
        k+1 overlaps sending chunk k, and memory stays bounded whatever the message size.
        A destination that does not drain holds at most `depth` buffers of the pool. The pool
        in use is `pool` buffers while one pair of ranks streams, `pool_many` while several do.
Rule 3: payloads are opaque bytes: only the envelope in front is read (and its xfer rewritten).
Rule 4: nothing blocks inside MPI: the loop polls with back-off so an idle forwarder leaves
        the CPU to the ranks.
Rule 5: a message of one chunk whose data is already here when its envelope is relayed is
        received and sent on at once (`_quick`), with no transfer to advance, unless an
        earlier transfer still waits for a buffer (buffers go in arrival order, Rule 2).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, field

from mpi4py import MPI

from mmpi.wire import ProtocolError
from mmpi.wire import protocol as P
from mmpi.wire.backoff import Backoff

_BYTE = MPI.BYTE
# Sends on are tested for completion (`_reap`) in batches, not after every message: a poll
# that only probes keeps the forwarder's turns on shared cores short.
_REAP_AT = 16
_clock = time.perf_counter


@dataclass(eq=False)
class Link:
    """The forwarder's side of one cluster: control and data intercommunicators."""

    cluster: str
    ctrl: MPI.Intercomm
    data: MPI.Intercomm
    size: int
    vranks: tuple[int, ...] = ()  # virtual rank of each local rank (set once the layout is known)
    local_of: dict[int, int] = field(default_factory=dict)  # virtual rank -> local rank

    def place(self, vranks: tuple[int, ...]) -> None:
        """Record which virtual rank each of this cluster's local ranks is."""
        self.vranks = vranks
        self.local_of = {v: i for i, v in enumerate(vranks)}


@dataclass(eq=False)
class _Transfer:
    """A large message on its way through: chunks received from src, sent on to dst."""

    src: int
    in_tag: int
    dst: int
    out_tag: int
    nbytes: int
    chunk: int
    next: int = 0  # offset of the next chunk to receive
    recvs: deque = field(default_factory=deque)  # (request, buffer, length), in chunk order
    sends: deque = field(default_factory=deque)  # (request, buffer)


class Relay(threading.Thread):
    """Relays everything that `src` sends across to `dst`."""

    def __init__(self, src: Link, dst: Link, *, chunk: int, pool: int, depth: int,
                 eager_budget: int, on_error, pool_many: int | None = None) -> None:
        super().__init__(name=f"relay-{src.cluster}->{dst.cluster}", daemon=True)
        self.src, self.dst = src, dst
        self.chunk, self.depth, self.eager_budget = chunk, depth, eager_budget
        self._pool_one = pool
        self._pool_many = max(pool, pool_many or pool)
        self._pool: list[bytearray] = []  # free buffers, reused last-in first-out (warm ones)
        self._allocated = 0
        self._transfers: list[_Transfer] = []
        self._pairs: dict[tuple[int, int], int] = {}  # (source, destination) -> transfers
        self._inflight: list[MPI.Request] = []
        self._inflight_bufs: list[bytearray] = []
        self._inflight_bytes = 0
        self._reap_bytes = eager_budget // 2
        self._sent: list[MPI.Request] = []  # one-chunk messages sent on at once (Rule 5) ...
        self._sent_bufs: list[tuple[bytearray, tuple[int, int]]] = []  # ... their buffers, pairs
        self._xfer = [0] * dst.size
        self._byes = 0
        self._on_error = on_error
        self._st = MPI.Status()
        # Large transfers may be moved by a thread of their own (`move`): this guards them,
        # and `_wake` rouses that thread when one arrives.
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self.messages = 0
        self.bytes = 0
        self.busy = 0.0  # seconds in polls that moved something (see Forwarder.summary)

    @property
    def name_short(self) -> str:
        """E.g. 'low->high'."""
        return f"{self.src.cluster}->{self.dst.cluster}"

    def run(self) -> None:
        """Relay until every source rank has said BYE and everything is delivered."""
        try:
            self._loop()
        except BaseException as exc:  # a relay that dies must take the job down, not hang it
            self._on_error(self, exc)

    @property
    def finished(self) -> bool:
        """Every source rank said BYE and everything it sent has been delivered."""
        return (self._byes >= self.src.size and not self._transfers and not self._inflight
                and not self._sent)

    def _loop(self) -> None:
        busy = Backoff()
        while not self.finished:
            if self.poll():
                busy.reset()
            else:
                busy.idle()

    def poll(self) -> bool:
        """One round: take new envelopes, relay eager messages, advance transfers, reap sends.

        True if there was any work. Safe alongside `move` in another thread.
        """
        t0 = _clock()
        did = self._poll()
        if did:
            self.busy += _clock() - t0
        return did

    def _poll(self) -> bool:
        did = False
        st = self._st
        ctrl = self.src.ctrl
        for _ in range(64):
            if self._inflight_bytes > self.eager_budget:
                break  # backpressure: let the senders wait in MPI until we drain
            msg = ctrl.Improbe(MPI.ANY_SOURCE, MPI.ANY_TAG, st)
            if msg is None:
                break
            self._on_message(msg, st.Get_source(), st.Get_tag(), st.Get_count(_BYTE))
            did = True
        inflight = self._inflight
        if inflight and (len(inflight) >= _REAP_AT or self._inflight_bytes > self._reap_bytes
                         or self._byes >= self.src.size) and self._reap():
            did = True
        # Transfers too, unless this direction's mover has them in hand right now: a message
        # of one chunk is done quicker here than after waking another thread (split mode).
        if (self._transfers or self._sent) and self._lock.acquire(blocking=False):
            try:
                if self._sent and self._reap_sent():
                    did = True
                if self._transfers and self._advance():
                    did = True
            finally:
                self._lock.release()
        return did

    def move(self, stop) -> None:
        """Move large transfers until `stop()`; sleep (no CPU, no GIL) while there are none.

        For the split mode: one thread polls both directions (`poll`) and relays every small
        and single-chunk message itself; a message of several chunks also wakes its
        direction's mover, which then advances the transfers alongside until none is left.
        So an idle direction costs nothing, small messages never wait for the GIL of a second
        polling thread, and two streams in opposite directions are moved by two threads.
        """
        busy = Backoff()
        lock, wake = self._lock, self._wake
        while not stop():
            with lock:
                active = bool(self._transfers)
                did = active and self._advance()
            if did:
                busy.reset()
            elif active:
                busy.idle()
            else:
                wake.wait(0.05)
                wake.clear()
                busy.reset()

    # -- envelopes ----------------------------------------------------------------------
    def _on_message(self, msg: MPI.Message, source: int, tag: int, count: int) -> None:
        buf = bytearray(count)
        msg.Recv([buf, _BYTE])
        if tag == P.T_EAGER or tag == P.T_COLL:
            local = self._dst_local(P.dst_of(buf), source)
            self._inflight.append(self.dst.ctrl.Isend([buf, _BYTE], local, tag))
            self._inflight_bufs.append(buf)
            self._inflight_bytes += count
            self.messages += 1
            self.bytes += count - P.ENVELOPE_SIZE
        elif tag == P.T_LARGE:
            env = P.unpack(buf)
            local = self._dst_local(env.dst, source)
            if not 0 < env.chunk <= self.chunk:
                raise ProtocolError(
                    f"rank {self.src.vranks[source]} sent chunks of {env.chunk} bytes; "
                    f"this forwarder takes at most {self.chunk}"
                )
            self._xfer[local] = self._xfer[local] % P.MAX_XFER + 1
            out_tag = self._xfer[local]
            P.with_xfer(buf, out_tag)
            # The envelope goes on at once so the receiver can post its chunk receives early.
            self._inflight.append(self.dst.ctrl.Isend([buf, _BYTE], local, P.T_LARGE))
            self._inflight_bufs.append(buf)
            self._inflight_bytes += count
            with self._lock:
                if env.nbytes > env.chunk or not self._quick(source, env.xfer, local, out_tag,
                                                             env.nbytes):
                    self._transfers.append(
                        _Transfer(source, env.xfer, local, out_tag, env.nbytes, env.chunk)
                    )
                    self._pair_on((source, local))
            if env.nbytes > env.chunk:
                self._wake.set()  # a stream of chunks: worth a thread of its own (`move`)
            self.messages += 1
            self.bytes += env.nbytes
        elif tag == P.T_BYE:
            self._byes += 1
            self._announce_left(self.src.vranks[source],
                                P.decode_control(buf, ("colls",))["colls"])
        else:
            raise ProtocolError(
                f"rank {self.src.vranks[source]} of cluster {self.src.cluster!r} "
                f"sent unknown control tag {tag}"
            )

    def _announce_left(self, vrank: int, colls: int) -> None:
        """Tell every rank of both clusters that `vrank` has finished (protocol T_LEFT).

        MPI reports nothing when a rank leaves early (say `raise SystemExit(3)` while the
        others sit in a Barrier): its goodbye waits for theirs, theirs never comes, and the
        job hangs. With this notice the ranks still waiting for it can fail instead.
        """
        body = bytearray(P.encode_control(rank=vrank, colls=colls))
        for link in (self.src, self.dst):
            for r in range(link.size):
                self._inflight.append(link.ctrl.Isend([body, _BYTE], r, P.T_LEFT))
                self._inflight_bufs.append(body)
                self._inflight_bytes += len(body)

    def _dst_local(self, dst: int, source: int) -> int:
        local = self.dst.local_of.get(dst)
        if local is None:
            raise ProtocolError(
                f"rank {self.src.vranks[source]} of cluster {self.src.cluster!r} addressed "
                f"rank {dst}, which is not in cluster {self.dst.cluster!r}"
            )
        return local

    # -- large transfers ----------------------------------------------------------------
    def _pair_on(self, pair: tuple[int, int]) -> None:
        """One more message of (source, destination) holds or awaits buffers (see _room)."""
        self._pairs[pair] = self._pairs.get(pair, 0) + 1

    def _pair_off(self, pair: tuple[int, int]) -> None:
        """One message of (source, destination) is through."""
        if self._pairs[pair] == 1:
            del self._pairs[pair]
        else:
            self._pairs[pair] -= 1

    def _room(self) -> bool:
        """Whether another buffer may go into use.

        One stream between two ranks moves fastest through a small pool that stays in cache;
        several streams need more buffers in flight, or they take turns for them.
        """
        limit = self._pool_one if len(self._pairs) <= 1 else self._pool_many
        return self._allocated - len(self._pool) < limit

    def _buffer(self) -> bytearray | None:
        if not self._room():
            return None
        if self._pool:
            return self._pool.pop()
        self._allocated += 1
        return bytearray(self.chunk)

    def _quick(self, src: int, in_tag: int, dst: int, out_tag: int, n: int) -> bool:
        """Rule 5: receive a one-chunk message and send it on now, if its data is here.

        False if not done (the caller queues a transfer). As a transfer, such a message would
        cost an Irecv, a Test on every poll, an Isend and a Test again; collectives relay many
        of them. Call with the lock held.
        """
        if self._transfers and self._transfers[-1].next == 0:
            return False  # an earlier transfer waits for a buffer: it goes first (Rule 2)
        pair = (src, dst)
        self._pair_on(pair)  # counted first, as a queued transfer is, for the pool's size
        buf = self._buffer()
        if buf is None:
            self._pair_off(pair)
            return False
        req = self.src.data.Irecv([buf, n, _BYTE], src, in_tag)
        if not req.Test():
            # Not here yet: a transfer whose one receive is under way.
            t = _Transfer(src, in_tag, dst, out_tag, n, n, next=n)
            t.recvs.append((req, buf, n))
            self._transfers.append(t)
            return True
        self._sent.append(self.dst.data.Isend([buf, n, _BYTE], dst, out_tag))
        self._sent_bufs.append((buf, pair))
        return True

    def _reap_sent(self) -> bool:
        """Return the buffers of completed Rule-5 sends to the pool. Call with the lock held."""
        done = _completed(self._sent, self._sent_bufs)
        for buf, pair in done:
            self._pool.append(buf)
            self._pair_off(pair)
        return bool(done)

    def _advance(self) -> bool:
        did = finished = False
        src_data, dst_data = self.src.data, self.dst.data
        pool = self._pool
        for t in self._transfers:
            if t.next == 0 and not self._room():
                # Not started and no buffer free. Transfers get buffers strictly in arrival
                # order, so none after this one has started either: stop here. (A window of
                # 64 large messages made this loop and the list rebuild below a third of the
                # forwarder's time when they ran over every queued transfer on every poll.)
                break
            while t.sends and t.sends[0][0].Test():
                pool.append(t.sends.popleft()[1])
                did = True
            while t.recvs and t.recvs[0][0].Test():
                _, buf, n = t.recvs.popleft()
                t.sends.append((dst_data.Isend([buf, n, _BYTE], t.dst, t.out_tag), buf))
                did = True
            while t.next < t.nbytes and len(t.recvs) + len(t.sends) < self.depth:
                buf = self._buffer()
                if buf is None:
                    break
                n = min(t.chunk, t.nbytes - t.next)
                t.recvs.append((src_data.Irecv([buf, n, _BYTE], t.src, t.in_tag), buf, n))
                t.next += n
                did = True
            if t.next >= t.nbytes and not t.recvs and not t.sends:
                finished = True
        if finished:
            keep = []
            for t in self._transfers:
                if t.next < t.nbytes or t.recvs or t.sends:
                    keep.append(t)
                else:
                    self._pair_off((t.src, t.dst))
            self._transfers = keep
        return did

    def _reap(self) -> bool:
        """Forget the control-link sends that have completed; True if any had."""
        done = _completed(self._inflight, self._inflight_bufs)
        for buf in done:
            self._inflight_bytes -= len(buf)
        return bool(done)


def _completed(reqs: list[MPI.Request], kept: list) -> list:
    """Take the completed requests out of `reqs`, and their items (same index) out of `kept`.

    Returns those items. One `Testsome` for the whole list: the forwarder reaps its sends in
    batches, not one `Test` each.
    """
    done = MPI.Request.Testsome(reqs)
    if not done:
        return []
    out = []
    for i in sorted(done, reverse=True):
        out.append(kept[i])
        del reqs[i]
        del kept[i]
    return out
