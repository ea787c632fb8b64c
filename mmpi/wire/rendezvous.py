"""The rendezvous contract shared by mmpi-run, the forwarder and the ranks: env vars and files.

mmpi-run creates a private directory (mode 0700) per job and passes its path to every process.
Rule: everything in it is written atomically (temp file + rename) with mode 0600, so a reader
either sees the whole file or none, and no other user can read the port names or the secret.
"""

from __future__ import annotations

import os
import secrets
import time
from pathlib import Path

from ..errors import BridgeError
from .layout import CLUSTERS as CLUSTERS  # the cluster names are part of this contract too

# Environment variables set by mmpi-run.
ENV_RENDEZVOUS = "MMPI_RENDEZVOUS"  # path of the job's rendezvous directory
ENV_CLUSTER = "MMPI_CLUSTER"  # "low" or "high" for cluster jobs
ENV_CONNECT_TIMEOUT = "MMPI_CONNECT_TIMEOUT"  # seconds to wait for the forwarder at start-up
ENV_FORWARDERS = "MMPI_FORWARDERS"  # number of forwarders in the job (default 1)
ENV_MONITOR = "MMPI_MONITOR"  # a directory: ranks count their traffic and write it there
# "1": in a rank whose PYTHONPATH starts with startup_dir(), `import mpi4py.MPI` gives the
# bridged namespace; "0": such an import is refused (it would make a world of one cluster).
ENV_MPI4PY_HOOK = "MMPI_MPI4PY_HOOK"

SECRET_FILE = "secret"  # written by mmpi-run before anything starts
OWNER_FILE = "owner"  # "<pid> <start time>" of the mmpi-run that made the directory
# Where mmpi-run's rank watch listens ("unix:PATH" or "tcp:HOST:PORT", one per line, tried in
# order); written before any job starts. Absent when the jobs were started by hand.
WATCH_FILE = "watch"


def startup_dir() -> str:
    """The directory whose sitecustomize installs the mpi4py hook (first on PYTHONPATH)."""
    # Computed from this file so that the launcher needs no import of the library's internals.
    return str(Path(__file__).resolve().parent.parent / "_startup" / "site")


def port_file(cluster: str, forwarder: int = 0) -> str:
    """Name of the file in which forwarder `forwarder` publishes the port for `cluster`."""
    return f"port.{forwarder}.{cluster}"


def read_secret(path: Path) -> str:
    """The job secret of the rendezvous directory `path`."""
    return (path / SECRET_FILE).read_text().strip()


def make_dir(parent: str | None = None) -> Path:
    """Create a fresh private rendezvous directory with a new job secret in it."""
    import tempfile

    path = Path(tempfile.mkdtemp(prefix="mmpi-", dir=parent))
    os.chmod(path, 0o700)
    write_atomic(path / SECRET_FILE, secrets.token_hex(16))
    return path


def write_atomic(path: Path, text: str) -> None:
    """Write `text` to `path` so that readers never see a partial file; mode 0600."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def wait_for_file(path: Path, timeout: float, what: str) -> str:
    """Poll for `path` to appear and return its content; raise TimeoutError naming `what`."""
    deadline = time.monotonic() + timeout
    delay = 0.002
    while True:
        try:
            return path.read_text()
        except FileNotFoundError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} did not appear within {timeout:g} s ({path})")
        time.sleep(delay)
        delay = min(delay * 2, 0.05)


# The virtual-rank layout of a job run with a rank map (mmpi-run --rank-map): the cluster of
# each virtual rank, in rank order, separated by spaces ("low high low high"), written by
# mmpi-run before anything starts. The forwarder places its links by it and hands it to the
# ranks; absent, the default layout (low's ranks first) holds.
LAYOUT_FILE = "layout"


def write_layout(path: Path, owners) -> None:
    """Write the layout file of the rendezvous directory `path` (atomically, mode 0600)."""
    owners = list(owners)
    bad = [c for c in owners if c not in CLUSTERS]
    if bad or not owners:
        raise ValueError(f"a layout lists clusters {', '.join(CLUSTERS)}, got {owners!r:.80}")
    write_atomic(path / LAYOUT_FILE, " ".join(owners) + "\n")


def read_layout(path: Path) -> tuple[str, ...] | None:
    """The cluster of each virtual rank from `path`'s layout file; None when there is none."""
    try:
        text = (path / LAYOUT_FILE).read_text()
    except (FileNotFoundError, NotADirectoryError):
        return None
    owners = tuple(text.split())
    bad = [c for c in owners if c not in CLUSTERS]
    if bad or not owners:
        raise BridgeError(f"{path / LAYOUT_FILE}: expected the cluster of each rank "
                          f"({' or '.join(CLUSTERS)}), got {text[:80]!r}")
    return owners
