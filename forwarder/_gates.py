"""Gates: the collectives a forwarder completes itself (protocol Rule 6). Bookkeeping, no I/O.

Every rank of the world sends its part of a gate, a crossing addressed to `GATE`; once one
has come from each rank for a (context, call), every rank gets the same answer: a crossing
from `GATE` with all the parts side by side in virtual-rank order. The relay does the I/O;
this module only decides what to answer whom, so it can be tested without MPI.

Rule 1: a gate's parts must agree: the same collective (crossing tag) and the same size.
        The first part fixes both; a part that differs refuses the gate.
Rule 2: every rank makes the same collective calls in the same order, so while a gate of
        call k is open nobody may send a collective crossing of call k on its context (that
        rank is in another collective), and no crossing of call k or later can have passed
        before the gate opened (it would need this gate done). Either refuses the gate.
        With several forwarders only the crossings through the gate's own one are seen.
Rule 3: a refused gate answers every part that came, and every part that comes later, with a
        GATE_REFUSED crossing saying what disagreed: its ranks raise instead of waiting for
        parts that will never come, and the job fails loudly.
"""

from __future__ import annotations

import threading
from typing import NamedTuple

from mmpi import protocol as P
from mmpi.errors import ProtocolError


class Answer(NamedTuple):
    """A crossing to send (whole, envelope and payload) to each of `to` (virtual ranks)."""

    crossing: bytearray
    to: tuple[int, ...]


class _Gate:
    __slots__ = ("tag", "nbytes", "first", "parts")

    def __init__(self, tag: int, nbytes: int, first: int) -> None:
        self.tag, self.nbytes, self.first = tag, nbytes, first
        self.parts: dict[int, memoryview] = {}


class Gates:
    """The open gates of one forwarder, for a world of `size` ranks."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._open: dict[tuple[int, int], _Gate] = {}
        self._refused: dict[tuple[int, int], bytearray] = {}  # its answer, for late parts
        # context -> (call, sender, tag) of the crossing of the highest call seen on it
        self._crossed: dict[int, tuple[int, int, int]] = {}
        # The relays of both directions may call in from threads of their own.
        self._lock = threading.Lock()

    def part(self, buf: bytearray) -> Answer | None:
        """Take a rank's part (a T_GATE message); the answer if the gate is now complete."""
        src, cid, tag, call = P.unpack_crossing(buf)
        if not 0 <= src < self.size:
            raise ProtocolError(f"a gate's part from rank {src}, which is not in a world of "
                                f"{self.size}")
        key = (cid, call)
        nbytes = len(buf) - P.ENVELOPE_SIZE
        with self._lock:
            refusal = self._refused.get(key)
            if refusal is not None:
                return Answer(refusal, (src,))
            gate = self._open.get(key)
            if gate is None:
                gate = self._open[key] = _Gate(tag, nbytes, src)
            elif src in gate.parts:
                raise ProtocolError(f"rank {src} sent two parts of gate {key} (context, call)")
            gate.parts[src] = memoryview(buf)[P.ENVELOPE_SIZE:]
            if tag != gate.tag or nbytes != gate.nbytes:
                return self._refuse(key, "tag" if tag != gate.tag else "size", src, tag,
                                    nbytes)
            crossed = self._crossed.get(cid)
            if crossed is not None and crossed[0] >= call:  # Rule 2: it passed before
                return self._refuse(key, "tag", crossed[1], crossed[2], 0)
            if len(gate.parts) < self.size:
                return None
            del self._open[key]
        parts = gate.parts
        payload = b"".join(parts[r] for r in range(self.size))
        return Answer(P.pack_crossing(P.GATE, P.GATE, tag, cid, call, payload),
                      tuple(range(self.size)))

    def crossing(self, buf) -> Answer | None:
        """Note a collective crossing (T_COLL) passing through; an answer if it refuses a gate."""
        cid, call = P.context_call(buf)
        with self._lock:
            crossed = self._crossed.get(cid)
            if crossed is not None and crossed[0] >= call and not self._open:
                return None  # the common case: nothing new to note, no gate to check
            src, _, tag, _ = P.unpack_crossing(buf)
            if crossed is None or call > crossed[0]:
                self._crossed[cid] = (call, src, tag)
            if (cid, call) not in self._open:
                return None
            return self._refuse((cid, call), "tag", src, tag, 0)

    def _refuse(self, key: tuple[int, int], what: str, rank: int, tag: int,
                nbytes: int) -> Answer:
        """Refuse gate `key` (lock held): rank `rank` came with `tag` and `nbytes` (Rule 3)."""
        gate = self._open.pop(key)
        body = P.encode_control(what=what, rank=rank, tag=tag, nbytes=nbytes,
                                gate_rank=gate.first, gate_tag=gate.tag,
                                gate_nbytes=gate.nbytes)
        answer = P.pack_crossing(P.GATE, P.GATE, P.GATE_REFUSED, key[0], key[1], body)
        self._refused[key] = answer
        return Answer(answer, tuple(sorted(gate.parts)))

    @property
    def pending(self) -> int:
        """Number of gates still waiting for parts."""
        return len(self._open)
