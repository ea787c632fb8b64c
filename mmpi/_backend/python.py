"""The Python backend: the transport's hot loops in Python, the reference of the compiled one.

Every rule the C files follow is written here first; `compiled.CompiledBackend` does the same
steps with fewer interpreted calls. This backend has no lanes: communicators and collectives
run their own steps (the reference) for every call.
"""

from __future__ import annotations

import functools
from threading import get_ident

from .._startup.native import MPI
from ..wire import protocol as P
from ..wire.backoff import yield_cpu
from .outbox import Outbox

_BYTE = MPI.BYTE
_ANY_TAG = MPI.ANY_TAG


class Gate:
    """The progress thread's flags, and the wrapper of a public call (_runtime.progress Rule 1).

    `_compiled.Gate` (cgate.c) is the same in C: 40-115 ns per call instead of this one's
    220-310.
    """

    __slots__ = ("busy", "passing", "owner", "thread", "lock", "op")

    def __init__(self, lock, op) -> None:
        self.lock, self.op = lock, op
        self.busy = 0  # bridged calls under way (one inside another counts twice)
        self.passing = False  # whether the thread is in a pass (or about to begin one)
        self.owner = -1  # the thread's ident: its own calls inside a pass are not the program's
        self.thread = None  # the progress thread, while there is one

    def locked(self, fn):
        """`fn`, run behind the gate."""
        gate = self

        @functools.wraps(fn)
        def call(*args, **kwargs):
            if gate.passing and get_ident() == gate.owner:  # the pass's own call
                return fn(*args, **kwargs)
            gate.busy += 1  # then look for a pass (Rule 1)
            if gate.passing:
                with gate.lock:  # the pass under way ends first
                    pass
            try:
                result = fn(*args, **kwargs)
            finally:
                gate.busy -= 1
            if gate.busy:  # a call inside another: the outer one decides
                return result
            _after(gate)
            return result
        call.__mmpi_locked__ = True
        return call


def _after(gate) -> None:
    """The outermost call's end: forget completed operations, wake an idle thread for work."""
    op = gate.op
    active = op.ACTIVE
    if len(active) > 256:  # completed by the program's own waits: forget them
        op.ACTIVE = active = [o for o in active if not o.done]
    t = gate.thread
    if t is None or not t.idle:  # awake, it looks for work itself
        return
    new, op.NEW_WORK = op.NEW_WORK, False
    # wake the sleeping thread if this call left something in flight: a collective queued,
    # its newest operation, the receive it posted last if still unmatched (older ones: the
    # thread's own look every _IDLE_CHECK); no scan of every queue per call
    if (t.engine.background or (active and not active[-1].done)
            or (new is not True and new and not new.matched)):
        t.wake.set()


class PythonBackend:
    """The reference backend (see interface.Backend)."""

    name = "python"
    lanes = None
    Gate = Gate

    def __init__(self) -> None:
        self._sends = Outbox()
        self._status = MPI.Status()

    def link(self, comm):
        """A link is the intercommunicator itself."""
        return comm

    def drain(self, link, contexts):
        """Every message waiting on `link`, whole, for the engine to hand on.

        None completes here: the engine's arrivals do that.
        """
        st = self._status
        got = None
        while True:
            msg = link.Improbe(0, _ANY_TAG, st)
            if msg is None:
                return got
            buf = bytearray(st.Get_count(_BYTE))
            msg.Recv([buf, _BYTE])
            if got is None:
                got = []
            got.append((st.Get_tag(), buf, -1, 0, 0))

    def wait_link(self, link, rounds: int) -> bool:
        """Probe and yield, `rounds` times at most."""
        probe = link.Iprobe
        for _ in range(rounds):
            if probe(0, _ANY_TAG):
                return True
            yield_cpu()
        return False

    def wait_ops(self, link, contexts, ops, rounds):
        """No first rounds of its own: the engine's wait does them."""
        return False, None

    def send_eager(self, link, mpitag, src, dst, tag, cid, flags, aux, payload) -> None:
        """Envelope and a copy of the payload, sent from a buffer of our own."""
        n = len(payload)
        buf = bytearray(P.ENVELOPE_SIZE + n)
        P.pack_eager_into(buf, src, dst, tag, cid, n, flags, aux)
        buf[P.ENVELOPE_SIZE:] = payload
        self._sends.add(link.Isend([buf, _BYTE], 0, mpitag), buf)

    def reap(self) -> bool:
        """Forget completed sends; True once none is left."""
        return self._sends.reap()

    def pending(self) -> int:
        """Sends not known to be complete."""
        return len(self._sends.reqs)


__all__ = ["Gate", "PythonBackend"]
