"""The rank watch: a thread in mmpi-run to which every rank stays connected while it runs.

A rank that ends without finalizing - `os._exit(0)`, a signal, a crash - while the others wait
for it is invisible to MPI, and Hydra waits for the rest when its status is 0: the job hung
for ever. The kernel closes a process's sockets however it ends, so here a rank's connection
closing without its "bye" (sent once it has finalized) is seen within milliseconds, and the
runner ends the job naming that rank (the wire is `mmpi.wire.watch`).

Rules:
- Where it listens: a Unix socket in the rendezvous directory when every rank runs on this
  machine (it also reaches ranks in other network namespaces, `wrapper: [ip, netns, exec,
  NS]`); when some run elsewhere, also TCP on all interfaces, published under this host's
  name - the address Hydra's own proxies connect back to.
- Only connections that prove the job secret count (a stranger fakes neither a departure nor
  a goodbye); unproven ones are closed after PROOF_TIMEOUT, and at most MAX_CONNECTIONS are
  held.
- A rank about to call MPI_Abort (mmpi's except and exit hooks) says so first. It, and every
  rank that leaves after such a notice (Hydra kills an aborting rank's cluster-mates), is left
  to Hydra's report, which says why; only departures before any abort count. The order of
  the notices is kept (`failing`): of two ranks that raised, the first to say so is the cause.
- A rank whose program has finished says "done" as it starts to finalize: a cluster all of
  whose ranks said so can fail only as a consequence of another (`finished_clusters`), so the
  runner need not wait for it to fail by itself.
- One thread blocked in `select`, woken by the ranks or by `close`; no polling. Its sockets
  are not inherited by the jobs it starts (PEP 446), so only the ranks hold their ends.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import socket
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from mmpi.errors import ProtocolError
from mmpi.wire import proof
from mmpi.wire import rendezvous as R
from mmpi.wire import watch as W

from ._diagnose import CONSEQUENCE, CRASH, Report
from .plan import Plan

SOCKET_NAME = "watch.sock"
PROOF_TIMEOUT = 10.0  # seconds a connection has to prove it is a rank of the job
MAX_CONNECTIONS = 4096  # open connections at most (ranks and strangers)
# Seconds the runner waits after a departure for a job to fail by itself: a rank that raised
# or was killed dies a moment before Hydra reports it, and Hydra's account is the better one
# (it came 15-50 ms after the departure in 4 runs on 2 busy cores).
DEPARTURE_GRACE = 1.0
_UNIX_MAX = 100  # bytes of a Unix socket path (the kernel's limit is 107)


@dataclass(frozen=True)
class Departure:
    """A rank whose connection closed before it said it had finalized."""

    vrank: int
    cluster: str
    local: int
    pid: int
    at: float  # time.monotonic() when it was seen

    @property
    def forwarder(self) -> bool:
        """Whether it is a forwarder (`local` is its index), not a rank."""
        return self.cluster == W.FORWARDER

    @property
    def job(self) -> str:
        """The name of its job in the plan: the cluster, or the forwarder's "fwd<i>"."""
        return f"{W.FORWARDER}{self.local}" if self.forwarder else self.cluster

    @property
    def sentence(self) -> str:
        """The report line."""
        if self.forwarder:
            return (f"forwarder '{self.job}' (pid {self.pid}) ended while the job ran: killed "
                    "or a crash")
        return (f"rank {self.vrank} ({self.cluster}:{self.local}, pid {self.pid}) left without "
                "finalizing: os._exit or a crash")

    @property
    def label(self) -> str:
        """Who, in a few words: "rank 2 (high:0)", "forwarder 'fwd0'"."""
        if self.forwarder:
            return f"forwarder '{self.job}'"
        return f"rank {self.vrank} ({self.cluster}:{self.local})"

    @property
    def short(self) -> str:
        """The cause in a few words."""
        if self.forwarder:
            return f"forwarder '{self.job}' ended while the job ran"
        return f"rank {self.vrank} ({self.cluster}:{self.local}) left without finalizing"

    def named_in(self, who: str) -> bool:
        """Whether a failure report's "rank 2 (high:0, pid 1234)" is this rank."""
        if self.forwarder:
            return f"forwarder '{self.job}'" in who
        return f"rank {self.vrank} ({self.cluster}:{self.local}" in who


@dataclass(eq=False)
class _Conn:
    sock: socket.socket
    nonce: str
    deadline: float  # to prove itself
    buf: bytes = b""
    rank: tuple[str, int, int] | None = None  # (cluster, local, pid) once proven
    bye: bool = False
    aborting: bool = False  # it said it calls MPI_Abort: Hydra reports that one


class RankWatch:
    """Listens for the ranks of one job; `departed()` lists those that left unfinalized."""

    def __init__(self, rendezvous: Path, clusters: Mapping[str, tuple[int, int]], *,
                 remote: bool = False, forwarders: int = 0) -> None:
        self.rendezvous = Path(rendezvous)
        self.clusters = dict(clusters)  # name -> (first virtual rank, number of ranks)
        if forwarders:  # they register as W.FORWARDER, their index for the local rank
            self.clusters[W.FORWARDER] = (-1, forwarders)
        self.remote = remote  # some rank runs on another host
        self._departed: list[Departure] = []
        self._lock = threading.Lock()
        self._listeners: list[socket.socket] = []
        self._conns: dict[socket.socket, _Conn] = {}
        self._wake_r, self._wake_w = socket.socketpair()
        self._thread: threading.Thread | None = None
        self._secret = ""
        self._abort_seen = False  # some rank said it calls MPI_Abort
        self._failing: list[tuple[str, int]] = []  # (cluster, local) of those, in that order
        self._done: set[tuple[str, int]] = set()  # (cluster, local) of ranks that said "done"

    def start(self) -> None:
        """Listen, publish the addresses in the rendezvous directory, start the thread."""
        self._secret = R.read_secret(self.rendezvous)
        addresses = []
        path = self.rendezvous / SOCKET_NAME
        if len(os.fsencode(path)) <= _UNIX_MAX:
            unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self._listeners.append(unix)
            unix.bind(str(path))
            os.chmod(path, 0o600)
            self._listen(unix)
            addresses.append(W.unix_address(path))
        if self.remote or not addresses:
            tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            self._listeners.append(tcp)
            tcp.bind(("0.0.0.0" if self.remote else "127.0.0.1", 0))
            self._listen(tcp)
            host = socket.gethostname() if self.remote else "127.0.0.1"
            addresses.append(W.tcp_address(host, tcp.getsockname()[1]))
        R.write_atomic(self.rendezvous / R.WATCH_FILE, "\n".join(addresses) + "\n")
        self._thread = threading.Thread(target=self._serve, name="mmpi-run rank watch",
                                        daemon=True)
        self._thread.start()

    def departed(self) -> list[Departure]:
        """The ranks that have left without finalizing, in the order they left.

        Not those that said they were calling MPI_Abort, nor any that left after such a
        notice (Hydra kills an aborting rank's cluster-mates): Hydra reports those.
        """
        with self._lock:
            return list(self._departed)

    def failing(self) -> list[tuple[str, int]]:
        """(cluster, local rank) of the ranks that said they call MPI_Abort, first first."""
        with self._lock:
            return list(self._failing)

    def finished_clusters(self) -> set[str]:
        """The clusters every rank of which has finished its program ("done").

        No cluster while a forwarder has left unannounced: that departure is for the runner
        to weigh. Ranks waiting in MPI_Finalize may still fail, but only as consequences.
        """
        with self._lock:
            if any(d.forwarder for d in self._departed):
                return set()
            return {c for c, (_, n) in self.clusters.items() if c != W.FORWARDER
                    and all((c, local) in self._done for local in range(n))}

    def close(self) -> None:
        """Stop the thread and close every socket (idempotent)."""
        if self._thread is not None:
            with contextlib.suppress(OSError):
                self._wake_w.send(b"x")
            self._thread.join(2.0)
            self._thread = None
        for sock in [*self._listeners, *self._conns, self._wake_r, self._wake_w]:
            sock.close()
        self._listeners.clear()
        self._conns.clear()

    # -- the thread ---------------------------------------------------------------------
    def _listen(self, sock: socket.socket) -> None:
        sock.listen(128)
        sock.setblocking(False)

    def _serve(self) -> None:
        with selectors.DefaultSelector() as sel:
            sel.register(self._wake_r, selectors.EVENT_READ)
            for sock in self._listeners:
                sel.register(sock, selectors.EVENT_READ)
            while True:
                pending = [c.deadline for c in self._conns.values() if c.rank is None]
                timeout = max(0.0, min(pending) - time.monotonic()) if pending else None
                # A forwarder gone in the same instant as ranks went first: they lose it
                # (UCX aborts a rank whose peer vanished mid-copy), it does not lose them.
                for key, _ in sorted(sel.select(timeout), key=self._forwarders_first):
                    sock = key.fileobj
                    if sock is self._wake_r:
                        return
                    if sock in self._listeners:
                        self._accept(sel, sock)
                    else:
                        self._read(sel, self._conns[sock])
                now = time.monotonic()
                for conn in [c for c in self._conns.values() if c.rank is None]:
                    if now > conn.deadline:
                        self._drop(sel, conn)

    def _forwarders_first(self, event: tuple[selectors.SelectorKey, int]) -> bool:
        conn = self._conns.get(event[0].fileobj)  # type: ignore[call-overload]
        return not (conn is not None and conn.rank is not None
                    and conn.rank[0] == W.FORWARDER)

    def _accept(self, sel: selectors.BaseSelector, listener: socket.socket) -> None:
        while True:
            try:
                sock, _ = listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return  # e.g. too many open files: that connection is lost, not the watch
            if len(self._conns) >= MAX_CONNECTIONS:
                sock.close()
                continue
            conn = _Conn(sock, proof.nonce(), time.monotonic() + PROOF_TIMEOUT)
            try:
                sock.setblocking(False)
                sock.send(W.greeting(conn.nonce))
            except OSError:
                sock.close()
                continue
            self._conns[sock] = conn
            sel.register(sock, selectors.EVENT_READ)

    def _read(self, sel: selectors.BaseSelector, conn: _Conn) -> None:
        try:
            data = conn.sock.recv(4096)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""  # reset by the peer: it is gone all the same
        if not data:
            # Once any rank has said it aborts, Hydra kills its cluster-mates: they are no
            # cause, and the abort is reported by Hydra (with the rank's words).
            if (conn.rank is not None and not conn.bye and not conn.aborting
                    and not self._abort_seen):
                cluster, local, pid = conn.rank
                first = self.clusters[cluster][0]
                vrank = -1 if cluster == W.FORWARDER else first + local
                with self._lock:
                    self._departed.append(
                        Departure(vrank, cluster, local, pid, time.monotonic()))
            self._drop(sel, conn)
            return
        if conn.bye:
            return
        conn.buf += data
        while b"\n" in conn.buf:
            line, _, conn.buf = conn.buf.partition(b"\n")
            if conn.rank is None:
                if not self._prove(conn, line):
                    self._drop(sel, conn)
                    return
            elif line + b"\n" == W.BYE:
                conn.bye = True
                return
            elif line + b"\n" == W.ABORT:
                conn.aborting = self._abort_seen = True
                if conn.rank[0] != W.FORWARDER:
                    with self._lock:
                        self._failing.append(conn.rank[:2])
            elif line + b"\n" == W.DONE and conn.rank[0] != W.FORWARDER:
                with self._lock:
                    self._done.add(conn.rank[:2])
        if len(conn.buf) > W.MAX_LINE:
            self._drop(sel, conn)

    def _prove(self, conn: _Conn, line: bytes) -> bool:
        try:
            cluster, local, pid, answer = W.parse_claim(line)
        except ProtocolError:
            return False
        if cluster not in self.clusters or not 0 <= local < self.clusters[cluster][1]:
            return False
        if not proof.check(self._secret, answer, proof.WATCH, conn.nonce, cluster, local, pid):
            return False
        try:
            conn.sock.send(W.OK)
        except OSError:
            return False
        conn.rank = (cluster, local, pid)
        return True

    def _drop(self, sel: selectors.BaseSelector, conn: _Conn) -> None:
        sel.unregister(conn.sock)
        conn.sock.close()
        del self._conns[conn.sock]


def start_for(plan: Plan, rendezvous: Path) -> RankWatch | None:
    """Start the rank watch of `plan`'s job; None without a job secret to prove against."""
    if not (rendezvous / R.SECRET_FILE).is_file():
        return None
    clusters = {c.name: (c.first_vrank, c.ranks) for c in plan.clusters}
    remote = any(p.host != "localhost" for layout in plan.layouts for p in layout.places)
    watch = RankWatch(rendezvous, clusters, remote=remote, forwarders=len(plan.forwarders))
    try:
        watch.start()
    except OSError:
        watch.close()
        raise
    return watch


def explain(departures: list[Departure], report: Report,
            shown: tuple[str, int | None]) -> tuple[list[str], int, str, tuple[str, int | None]]:
    """The failure report (lines, exit status, headline, whose output to show), and the watch.

    `shown` is the report's own choice of whose held-back output to show.

    What Hydra and the ranks said wins when it names a direct cause or a crash (a signal, an
    exception, sys.exit): it says more than "left". Except a signal that killed a rank the
    watch saw leave *after* another: when a rank ends without finalizing, Hydra kills its
    cluster-mates and its banner names one of them ("rank 0 was killed by signal 9").
    Otherwise the first departure is the cause, and the rest follow it.
    A departure the report explains as a consequence (a forwarder that says it lost a rank)
    is no cause, whenever it was seen: a SIGKILLed process's sockets close only once its
    memory is freed, which on a busy machine can be after the forwarder that lost it aborted.
    """
    as_is = report.lines, report.status, report.headline, shown
    explained = [f.who for f in report.consequences if f.directness == CONSEQUENCE]
    departures = [d for d in departures if not any(d.named_in(who) for who in explained)]
    if not departures:
        return as_is
    cause = report.cause
    first = departures[0]
    # (a forwarder is no cluster-mate: nothing kills it because a rank left)
    killed_later = (cause.what.startswith("was killed by") and not first.named_in(cause.who)
                    and any(d.named_in(cause.who) for d in departures[1:] if not d.forwarder))
    if cause.directness <= CRASH and not killed_later:
        return as_is
    lines = [first.sentence]
    if len(departures) > 1:  # mostly cluster-mates Hydra killed because of the first
        names = [d.label for d in departures[1:]]
        more = f" and {len(names) - 4} more" if len(names) > 4 else ""
        lines.append(f"then {', '.join(names[:4])}{more} left too")
    # The report's own lines, but not the departure again (the runner's failure for it).
    lines += [f"then {line.removeprefix('then ')}" for line in report.lines
              if first.sentence not in line]
    return lines, 1, first.short, (first.job, None if first.forwarder else first.local)
