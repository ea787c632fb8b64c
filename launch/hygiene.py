"""Process hygiene for whoever starts MPI jobs: mmpi-run, mmpi-bench and the tests.

Three things an MPI job can leave behind, and how to avoid them:

- *Jobs outliving their starter.* `die_with_parent` makes the kernel SIGTERM a child when the
  process that started it dies, even by SIGKILL (Linux).
- *MPICH shared memory and Hydra's hwloc files.* A killed job leaves ``/dev/shm/mpich_shm_*``
  segments and ``/tmp/hydra_hwloc_xmlfile_*`` behind (a clean exit removes them). Take a
  snapshot before the job (`shm_files`, `hwloc_files`); afterwards `remove_new_shm` and
  `remove_new_hwloc` remove what appeared, is ours and no live process still uses.
- *Processes that left their process group.* Every rank and forwarder of a bridged job writes a
  pid file in the job's rendezvous directory (``rank.<cluster>.<local>.pid`` holding
  ``"<pid> <vrank>"``, ``forwarder.<i>.pid`` holding ``"<pid>"``). `read_pids` reads them;
  `kill_job` signals those processes, but only while they still belong to that job.

Rule: only what we started, or what names our own rendezvous directory, is ever signalled or
removed; nothing is matched by name or pattern across the machine.
"""

from __future__ import annotations

import contextlib
import ctypes
import glob
import os
import re
import signal
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

SHM_GLOB = "/dev/shm/mpich_shm_*"
# Hydra writes its hwloc topology here and removes it at a clean exit, not when killed.
HWLOC_GLOB = "/tmp/hydra_hwloc_xmlfile_*"
SHM_SETTLE = 1.0  # seconds SIGKILLed ranks may take to unmap their segments
ENV_RENDEZVOUS = "MMPI_RENDEZVOUS"  # set in every rank's and forwarder's environment

_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>
_RANK_FILE = re.compile(r"rank\.(\w+)\.(\d+)\.pid\Z")
_FORWARDER_FILE = re.compile(r"forwarder\.(\d+)\.pid\Z")


# -- parent death ---------------------------------------------------------------------------------
def die_with_parent() -> Callable[[], None] | None:
    """Return a ``preexec_fn`` that makes the kernel SIGTERM the child if we die (Linux).

    For ``subprocess.Popen(..., preexec_fn=die_with_parent())``: our own clean-up covers every
    way of stopping us except SIGKILL (a harness's timeout, the OOM killer); then the child
    (mpiexec, mmpi-run) gets SIGTERM and stops its ranks itself. None where unsupported.
    """
    if not sys.platform.startswith("linux"):
        return None
    prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up before the fork, not in it
    parent = os.getpid()

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before prctl took effect
            os.kill(os.getpid(), signal.SIGTERM)

    return preexec


# -- MPICH shared memory and Hydra's hwloc files ------------------------------------------------
def shm_files() -> set[str]:
    """The MPICH shared-memory files present now (a snapshot for `remove_new_shm`)."""
    return set(glob.glob(SHM_GLOB))


def hwloc_files() -> set[str]:
    """Hydra's hwloc topology files present now (a snapshot for `remove_new_hwloc`)."""
    return set(glob.glob(HWLOC_GLOB))


def remove_new_shm(before: set[str]) -> None:
    """Remove MPICH shm files that appeared since `before`, are ours and nobody maps any more."""
    uid = os.getuid()
    candidates = []
    for path in shm_files() - before:
        with contextlib.suppress(OSError):
            if os.stat(path).st_uid == uid:
                candidates.append(path)
    # Another MPI job of ours may have started meanwhile; its segments are mapped, leave them.
    # Ours may look mapped for a moment too: a killed rank unmaps as it dies, which can be
    # after its mpiexec (all the caller waited for) has gone. So look again for a while.
    deadline = time.monotonic() + SHM_SETTLE
    while candidates:
        in_use = paths_in_use(Path(SHM_GLOB).parent)
        for path in candidates:
            if path not in in_use:
                with contextlib.suppress(OSError):
                    os.unlink(path)
        candidates = [p for p in candidates if p in in_use]
        if not candidates or time.monotonic() > deadline:
            return
        time.sleep(0.1)


def remove_new_hwloc(before: set[str]) -> None:
    """Remove the hwloc files that appeared since `before` and no live process has open."""
    new = hwloc_files() - before
    if not new:
        return
    in_use = paths_in_use(Path(HWLOC_GLOB).parent)
    for path in new - in_use:
        with contextlib.suppress(OSError):
            os.unlink(path)


def paths_in_use(directory: Path) -> set[str]:
    """Paths under `directory` that a live process has open or mapped (best effort, Linux)."""
    prefix = f"{directory}/"
    used: set[str] = set()
    for proc in glob.glob("/proc/[0-9]*"):
        with contextlib.suppress(OSError):
            with open(f"{proc}/maps") as maps:
                for line in maps:
                    where = line.find(prefix)
                    if where >= 0:
                        used.add(line[where:].rstrip("\n").removesuffix(" (deleted)"))
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"{proc}/fd"):
                with contextlib.suppress(OSError):
                    target = os.readlink(f"{proc}/fd/{fd}")
                    if target.startswith(prefix):
                        used.add(target)
    return used


# -- the job's pid files --------------------------------------------------------------------------
@dataclass(frozen=True)
class Pids:
    """Who is who in one bridged job, from its rendezvous pid files."""

    ranks: Mapping[tuple[str, int], tuple[int, int]]  # (cluster, local) -> (pid, vrank)
    forwarders: Mapping[int, int]  # forwarder index -> pid

    def rank_of(self, pid: int, cluster: str | None = None) -> tuple[str, int, int] | None:
        """(cluster, local, vrank) of the rank with `pid` (in `cluster`, when given)."""
        for (c, local), (p, vrank) in self.ranks.items():
            if p == pid and cluster in (None, c):
                return c, local, vrank
        return None

    def forwarder_of(self, pid: int) -> int | None:
        """Index of the forwarder with `pid`."""
        return next((i for i, p in self.forwarders.items() if p == pid), None)

    def all(self) -> list[int]:
        """Every pid named: the forwarders', then the ranks'."""
        return [*self.forwarders.values(), *(pid for pid, _ in self.ranks.values())]


NO_PIDS = Pids({}, {})


def read_pids(rendezvous: str | os.PathLike[str]) -> Pids:
    """Read every pid file in the rendezvous directory (missing or torn files are skipped)."""
    ranks: dict[tuple[str, int], tuple[int, int]] = {}
    forwarders: dict[int, int] = {}
    try:
        entries = list(Path(rendezvous).iterdir())
    except OSError:
        return NO_PIDS
    for path in entries:
        try:
            if m := _RANK_FILE.match(path.name):
                pid, vrank = path.read_text().split()
                ranks[(m[1], int(m[2]))] = (int(pid), int(vrank))
            elif m := _FORWARDER_FILE.match(path.name):
                forwarders[int(m[1])] = int(path.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue
    return Pids(ranks, forwarders)


def in_job(pid: int, rendezvous: str | os.PathLike[str]) -> bool:
    """Whether `pid` is alive and is a process of the job with this rendezvous directory.

    A pid file can outlive its process, and the pid be reused: the process must still carry
    the job's ``MMPI_RENDEZVOUS`` in its environment (readable for our own processes only).
    """
    key = f"{ENV_RENDEZVOUS}=".encode()
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            entries = f.read().split(b"\0")
    except OSError:
        return False
    want = os.path.realpath(rendezvous)
    return any(
        os.path.realpath(os.fsdecode(e[len(key):])) == want for e in entries if e.startswith(key)
    )


def kill_job(rendezvous: str | os.PathLike[str], signum: int = signal.SIGKILL) -> list[int]:
    """Send `signum` to the job's ranks and forwarders still alive; return the pids signalled.

    For processes that left the process group their starter leads (Hydra starts ranks in
    their own); a process no longer of this job (`in_job`) is left alone.
    """
    hit = []
    for pid in read_pids(rendezvous).all():
        if in_job(pid, rendezvous):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signum)
                hit.append(pid)
    return hit


__all__ = [
    "ENV_RENDEZVOUS",
    "HWLOC_GLOB",
    "NO_PIDS",
    "SHM_GLOB",
    "Pids",
    "die_with_parent",
    "hwloc_files",
    "in_job",
    "kill_job",
    "paths_in_use",
    "read_pids",
    "remove_new_hwloc",
    "remove_new_shm",
    "shm_files",
]
