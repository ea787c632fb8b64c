r"""The rank watch's wire: every rank holds a stream socket to mmpi-run while it runs.

MPI tells nobody when a rank ends with `os._exit(0)` while the others wait for it, and Hydra
waits for the rest since its status is 0: the job hangs. The kernel closes a process's
sockets however it ends (`os._exit`, a signal, a crash), so mmpi-run (`launch/_watch.py`)
learns at once that a rank left, and whether it had finalized first::

    mmpi-run -> rank   "mmpi-watch 1 NONCE\n"
    rank -> mmpi-run   "CLUSTER LOCAL PID PROOF\n"   PROOF = proof.prove(secret, WATCH, NONCE,
                                                                          CLUSTER, LOCAL, PID)
    mmpi-run -> rank   "ok\n"
    rank -> mmpi-run   "done\n"  when its program has finished and it starts to finalize
    rank -> mmpi-run   "bye\n"  once the rank has finalized; then it closes the socket
    rank -> mmpi-run   "abort\n"  instead, as soon as it knows it will call MPI_Abort: Hydra
                                 will report it, and better (the exception, the sys.exit
                                 status); ranks that leave after that are its consequences

mmpi-run writes where it listens to the rendezvous file `rendezvous.WATCH_FILE`, one address a
line ("unix:PATH", "tcp:HOST:PORT"), tried in order. Without that file (jobs started by hand)
a rank is not watched.

A forwarder registers too, as cluster FORWARDER with its index for the local rank: it says
"bye" when it has served the job and "abort" before it exits on its own (its own words then
say why), so a forwarder killed or crashed is seen the moment it goes - before the ranks that
lose it (Open MPI aborts those at once, and each would look like the cause).

Rule: only a connection that proved the job secret counts, so a stranger can neither fake a
departure nor a goodbye; a proven connection that closes without "bye" is a rank that left
without finalizing.
"""

from __future__ import annotations

import socket
import time
from pathlib import Path

from ..errors import BridgeError, ProtocolError
from . import proof
from . import rendezvous as R

GREETING = "mmpi-watch 1"
OK = b"ok\n"
BYE = b"bye\n"
DONE = b"done\n"
ABORT = b"abort\n"
MAX_LINE = 512  # bytes: a longer line is not ours
FORWARDER = "fwd"  # the "cluster" a forwarder registers as (its index is its local rank)


def unix_address(path: str | Path) -> str:
    """The address of a Unix socket at `path`."""
    return f"unix:{path}"


def tcp_address(host: str, port: int) -> str:
    """The address of a TCP socket."""
    return f"tcp:{host}:{port}"


def greeting(nonce: str) -> bytes:
    """mmpi-run's first line: the challenge."""
    return f"{GREETING} {nonce}\n".encode()


def claim(secret: str, nonce: str, cluster: str, local: int, pid: int) -> bytes:
    """A rank's answer: who it is, proven."""
    answer = proof.prove(secret, proof.WATCH, nonce, cluster, local, pid)
    return f"{cluster} {local} {pid} {answer}\n".encode()


def parse_claim(line: bytes) -> tuple[str, int, int, str]:
    """(cluster, local rank, pid, proof) of a claim line; ProtocolError if malformed."""
    try:
        cluster, local, pid, answer = line.decode("ascii").split()
        return cluster, int(local), int(pid), answer
    except (UnicodeDecodeError, ValueError) as exc:
        raise ProtocolError(f"malformed rank watch claim {line[:80]!r}") from exc


class Membership:
    """A rank's registration with mmpi-run's rank watch (kept open until `leave`)."""

    def __init__(self, sock: socket.socket, address: str) -> None:
        self.sock = sock
        self.address = address

    def _say(self, line: bytes) -> None:
        try:
            self.sock.sendall(line)
        except OSError:
            pass  # mmpi-run may be gone already

    def aborting(self) -> None:
        """Say that this rank is about to call MPI_Abort (the socket stays open)."""
        self._say(ABORT)

    def finishing(self) -> None:
        """Say that the program has finished and this rank starts to finalize."""
        self._say(DONE)

    def leave(self) -> None:
        """Say goodbye (the rank has finalized) and close; mmpi-run may be gone already."""
        try:
            self._say(BYE)
        finally:
            self.sock.close()


def register(rdv: Path, cluster: str, local: int, pid: int,
             timeout: float = 10.0) -> Membership | None:
    """Register with the rank watch of the job in `rdv`; None when there is none."""
    try:
        addresses = (rdv / R.WATCH_FILE).read_text().split()
    except FileNotFoundError:
        return None
    secret = R.read_secret(rdv)
    errors = []
    for address in addresses:
        try:
            sock = _open(address, timeout)
        except (OSError, ValueError) as exc:
            errors.append(f"{address}: {exc}")
            continue
        try:
            nonce = _challenge(sock)
            sock.sendall(claim(secret, nonce, cluster, local, pid))
            if _line(sock) != OK:
                raise ProtocolError("the rank watch did not accept this rank's proof")
        except (OSError, ProtocolError) as exc:
            sock.close()
            errors.append(f"{address}: {exc}")
            continue
        sock.settimeout(None)
        return Membership(sock, address)
    who = f"forwarder {local}" if cluster == FORWARDER else f"rank {local} of cluster {cluster!r}"
    raise BridgeError(f"{who} could not reach mmpi-run's rank watch: {'; '.join(errors)}")


def _open(address: str, timeout: float) -> socket.socket:
    kind, _, rest = address.partition(":")
    if kind == "unix":
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        target: str | tuple = rest
    elif kind == "tcp":
        host, _, port = rest.rpartition(":")
        info = socket.getaddrinfo(host, int(port), type=socket.SOCK_STREAM)[0]
        sock = socket.socket(info[0], socket.SOCK_STREAM)
        target = info[4]
    else:
        raise ValueError(f"unknown address kind {kind!r}")
    # Python sockets are not inherited by child processes (PEP 446): a program that starts
    # others cannot keep a dead rank's registration alive.
    sock.settimeout(timeout)
    try:
        sock.connect(target)
    except OSError:
        sock.close()
        raise
    return sock


def _challenge(sock: socket.socket) -> str:
    head, _, nonce = _line(sock).decode("ascii", "replace").strip().rpartition(" ")
    if head != GREETING or not nonce:
        raise ProtocolError(f"not a rank watch: it said {head!r}")
    return nonce


def _line(sock: socket.socket) -> bytes:
    """One line (with its newline) from a socket with a timeout."""
    data = b""
    deadline = time.monotonic() + (sock.gettimeout() or 10.0)
    while not data.endswith(b"\n"):
        if len(data) > MAX_LINE or time.monotonic() > deadline:
            raise ProtocolError("no answer from the rank watch")
        chunk = sock.recv(MAX_LINE)
        if not chunk:
            raise ProtocolError("the rank watch closed the connection")
        data += chunk
    return data
