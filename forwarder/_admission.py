"""Admission at a forwarder's ports: challenge whoever connects, admit clusters, shut out the rest.

Rule 1: nothing a connection sends before it has proven the job secret is relayed. The
        intercommunicator `Accept` returns carries the challenge and the answer only; an
        admitted cluster's control and data channels are Dup'ed from it after the proof
        (protocol Rule 8), so they are communicators the stranger never had.
Rule 2: a refused connection is never freed while the forwarder runs. MPICH gives a freed
        context id to the next communicator it creates, and whatever the stranger sent or
        still sends on the old one would then match there: that is how a stranger's queued
        messages used to be relayed as the real cluster's. Refused connections are kept in a
        quarantine instead, whose thread receives and discards what they send.
Rule 3: what a stranger can make the forwarder hold is bounded: its messages are received
        into one scratch buffer (longer ones truncated) and dropped, at most DRAIN_BUDGET
        seconds of work per DRAIN_EVERY; at most MAX_REFUSED connections are held, beyond
        which the forwarder gives up (BridgeError) rather than run out of context ids.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

from mpi4py import MPI

from mmpi.wire import BridgeError, MMPIError
from mmpi.wire import proof as Q
from mmpi.wire import protocol as P
from mmpi.wire import rendezvous as R
from mmpi.wire.backoff import Backoff

from ._relay import Link

MAX_HELLO = 4096  # bytes: a HELLO is a short JSON object
MAX_REFUSED = 64  # refused connections held in quarantine before the forwarder gives up
SCRATCH = 64 << 10  # bytes of a stranger's message looked at (and then dropped)
DRAIN_EVERY = 0.05  # seconds between two rounds of discarding what strangers sent
DRAIN_BUDGET = 0.01  # seconds of discarding per round at most: a flood costs 20% of a core


class Refused(BridgeError):
    """A connection to a forwarder port did not prove that it belongs to the job."""


class Gate:
    """The admission of clusters at one forwarder: `admit` one cluster per port, `close`."""

    def __init__(self, rendezvous: Path, index: int, hello_timeout: float,
                 warn: Callable[[str], None]) -> None:
        self.rendezvous = rendezvous
        self.index = index
        self.hello_timeout = hello_timeout
        self.warn = warn
        self.quarantine = Quarantine(warn)

    def admit(self, cluster: str, port: str) -> Link:
        """Accept on `cluster`'s port until a connection proves it is that cluster; its Link.

        A stranger is refused and quarantined, and we accept again, so the real cluster,
        queued in its Connect, is admitted next without noticing.
        """
        while True:
            acc = MPI.COMM_SELF.Accept(port, MPI.INFO_NULL, 0)
            nonce = Q.nonce()
            body = P.encode_control(nonce=nonce, index=self.index)
            challenge = acc.Isend([body, MPI.BYTE], 0, P.T_CHALLENGE)
            try:
                hello = self._answer(acc, cluster, nonce)
            except MMPIError as exc:
                self.warn(f"refused a connection on the {cluster!r} port: {exc}")
                self.quarantine.add(acc, challenge, cluster)
                continue
            challenge.Wait()
            size = acc.Get_remote_size()
            if hello["size"] != size:
                raise BridgeError(f"cluster {cluster!r} says it has {hello['size']} ranks, "
                                  f"the link has {size}")
            MPI.Request.Waitall([acc.Isend([b"", MPI.BYTE], r, P.T_ADMIT) for r in range(size)])
            ctrl, data = acc.Dup(), acc.Dup()
            acc.Free()
            return Link(cluster, ctrl, data, size)

    def _answer(self, acc: MPI.Intercomm, cluster: str, nonce: str) -> dict:
        """The connection's answer to the challenge `nonce`: its HELLO, if that proves it.

        The very first message must be that HELLO from rank 0: a cluster sends nothing else
        before it.
        """
        st = MPI.Status()
        backoff = Backoff(spin=1e-3, max_sleep=5e-3)
        deadline = time.monotonic() + self.hello_timeout
        while (msg := acc.Improbe(MPI.ANY_SOURCE, MPI.ANY_TAG, st)) is None:
            if time.monotonic() > deadline:
                raise Refused(f"no answer to the challenge within {self.hello_timeout:g} s")
            backoff.idle()
        source, tag, count = st.Get_source(), st.Get_tag(), st.Get_count(MPI.BYTE)
        if source != 0 or tag != P.T_HELLO or count > MAX_HELLO:
            # Improbe took the message off the queue: it must be received, and is dropped.
            acc.Set_errhandler(MPI.ERRORS_RETURN)  # a truncated message is an error to ignore
            self.quarantine.discard(msg, count)
            if count > MAX_HELLO and tag == P.T_HELLO:
                raise Refused(f"oversized HELLO of {count} bytes")
            raise Refused(f"its rank {source} sent a message with tag {tag} before proving "
                          "that it belongs to the job")
        buf = bytearray(count)
        msg.Recv([buf, MPI.BYTE])
        hello = P.decode_control(buf, ("cluster", "size", "proof"))
        if hello["cluster"] != cluster:
            raise Refused(f"it claims to be cluster {hello['cluster']!r}")
        if not isinstance(hello["size"], int):
            raise Refused(f"malformed HELLO: size {hello['size']!r}")
        secret = R.read_secret(self.rendezvous)
        if not Q.check(secret, hello["proof"], Q.ADMIT, nonce, cluster, self.index):
            raise Refused("wrong proof of the job secret")
        return hello

    def close(self) -> None:
        """Stop discarding and free the refused connections (nothing is created after)."""
        self.quarantine.close()


class Quarantine:
    """Refused connections: held, never used, and drained by a thread of their own."""

    def __init__(self, warn: Callable[[str], None]) -> None:
        self.warn = warn
        self._comms: list[tuple[MPI.Intercomm, MPI.Request, str]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._scratch = bytearray(SCRATCH)
        self.messages = 0  # discarded in all
        self.bytes = 0
        self._seen = 0  # discarded since the last refusal was reported

    def discard(self, msg: MPI.Message, count: int) -> None:
        """Receive one message that a probe took off a connection's queue, and drop it."""
        with self._lock:
            self._drop(msg, count)
            self._seen += 1

    def add(self, acc: MPI.Intercomm, req: MPI.Request, cluster: str) -> None:
        """Hold `acc` (with its challenge request) for good; drain what it sent so far."""
        acc.Set_errhandler(MPI.ERRORS_RETURN)  # a truncated message is an error to ignore
        with self._lock:
            self._comms.append((acc, req, cluster))
            n = len(self._comms)
            self._drain(acc, time.monotonic() + 10 * DRAIN_BUDGET)
            got, self._seen = self._seen, 0
        if got:
            self.warn(f"discarded {got} message(s) it had sent so far")
        if n >= MAX_REFUSED:
            raise BridgeError(f"refused {n} connections to this forwarder's ports; giving "
                              "up (somebody who knows the port names keeps connecting)")
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="quarantine", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(DRAIN_EVERY):
            with self._lock:
                deadline = time.monotonic() + DRAIN_BUDGET
                for acc, _, _ in self._comms:
                    self._drain(acc, deadline)

    def _drain(self, acc: MPI.Intercomm, deadline: float) -> None:
        """Receive and drop what `acc` has delivered, until nothing is left or `deadline`."""
        st = MPI.Status()
        while (msg := acc.Improbe(MPI.ANY_SOURCE, MPI.ANY_TAG, st)) is not None:
            self._drop(msg, st.Get_count(MPI.BYTE))
            self._seen += 1
            if time.monotonic() > deadline:
                break

    def _drop(self, msg: MPI.Message, count: int) -> None:
        try:
            msg.Recv([self._scratch, MPI.BYTE])  # a longer message is truncated, and gone
        except MPI.Exception as exc:
            if exc.Get_error_class() != MPI.ERR_TRUNCATE:
                raise
        self.messages += 1
        self.bytes += count

    def close(self) -> None:
        """Stop the drain thread, drain once more, free the connections."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        with self._lock:
            for acc, req, _ in self._comms:
                self._drain(acc, time.monotonic() + DRAIN_BUDGET)
                if not req.Test():
                    req.Free()  # a challenge nobody took: let MPI finish it in the background
                acc.Free()
            if self._comms:
                self.warn(f"discarded {self.messages} message(s), {self.bytes} bytes in all, "
                          f"from {len(self._comms)} refused connection(s)")
            self._comms.clear()
