"""Process hygiene for whoever starts MPI jobs: mmpi-run, mmpi-bench and the tests.

Four things an MPI job can leave behind, and how to avoid them:

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
- *A rendezvous directory (with the job's secret) and shm segments after a SIGKILLed starter.*
  `start_watchdog` starts a small process that outlives us only to clean up: when our end
  of its pipe closes without a word (we died), it kills what is left of the job, removes the
  directory and the shm files that appeared since we started. `claim` records the owner of a
  rendezvous directory; `sweep_stale` removes those of owners that are gone (should a
  watchdog have died too), with the shm and hwloc files their job left: the snapshot taken
  before the job lies in the directory (`BEFORE_FILE`), so what appeared since, is ours and
  nobody maps is what that job (or another of ours that died) left.

Rule: only what we started, or what names our own rendezvous directory, is ever signalled or
removed; nothing is matched by name or pattern across the machine.
This file imports nothing but the standard library: the watchdog runs it as a script
(``python -I -S hygiene.py --watch DIR``), which starts in a few tens of milliseconds.
"""

from __future__ import annotations

import contextlib
import ctypes
import glob
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

SHM_GLOB = "/dev/shm/mpich_shm_*"
# Hydra writes its hwloc topology here and removes it at a clean exit, not when killed.
HWLOC_GLOB = "/tmp/hydra_hwloc_xmlfile_*"
SHM_SETTLE = 1.0  # seconds SIGKILLed ranks may take to unmap their segments
ENV_RENDEZVOUS = "MMPI_RENDEZVOUS"  # set in every rank's and forwarder's environment
OWNER_FILE = "owner"  # mmpi.wire.rendezvous.OWNER_FILE: "<pid> <start time>" of the starter
RENDEZVOUS_PREFIX = "mmpi-"  # mmpi.wire.rendezvous.make_dir's directories
JOB_GONE_WAIT = 3.0  # seconds the watchdog waits for the job's killed processes to vanish
BEFORE_FILE = "leftovers.before"  # in a rendezvous directory: shm and hwloc files before the job

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


def process_state(pid: int) -> str | None:
    """The state letter of `pid` in /proc (``R``, ``S``, ``T`` stopped...); None if it is gone.

    A zombie (``Z``) counts as gone: it has exited, its parent has not reaped it yet.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    state = stat.rsplit(")", 1)[1].split()[0]
    return None if state in ("Z", "X") else state


def _start_time(pid: int) -> str | None:
    """When `pid` started (clock ticks since boot): tells a process from a reuse of its pid."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def job_processes(rendezvous: str | os.PathLike[str]) -> list[int]:
    """Every live process (ours to see) whose environment names this rendezvous directory.

    That is each mpiexec, Hydra proxy, rank and forwarder of the job, pid file or not.
    """
    me = os.getpid()
    found = []
    for entry in glob.glob("/proc/[0-9]*"):
        pid = int(entry[6:])
        if pid != me and in_job(pid, rendezvous) and process_state(pid) is not None:
            found.append(pid)
    return found


# -- after a starter that died: the watchdog and the sweep ---------------------------------------
def claim(rendezvous: str | os.PathLike[str]) -> None:
    """Record this process as the owner of the rendezvous directory (for `sweep_stale`)."""
    path = Path(rendezvous) / OWNER_FILE
    tmp = path.with_name(f".{OWNER_FILE}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(f"{os.getpid()} {_start_time(os.getpid())}")
    os.replace(tmp, path)


def owner_alive(rendezvous: str | os.PathLike[str]) -> bool | None:
    """Whether the process that claimed the directory still runs; None if nobody claimed it."""
    try:
        pid, started = (Path(rendezvous) / OWNER_FILE).read_text().split()
    except (OSError, ValueError):
        return None
    return _start_time(int(pid)) == started and process_state(int(pid)) is not None


def clean_up_job(rendezvous: str | os.PathLike[str], before: set[str] | None = None) -> None:
    """Kill what is left of a job whose starter died, remove its directory and leftovers.

    `before`: the shm and hwloc files present before the job started (None: leave them).
    """
    pids = job_processes(rendezvous)
    if before is None:  # a stale directory: the snapshot its starter left there, if any
        before = _read_before(rendezvous)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + JOB_GONE_WAIT
    while any(process_state(p) is not None for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    shutil.rmtree(rendezvous, ignore_errors=True)
    if before is not None:
        remove_new_shm(before)
        remove_new_hwloc(before)


def _read_before(rendezvous: str | os.PathLike[str]) -> set[str] | None:
    try:
        text = (Path(rendezvous) / BEFORE_FILE).read_text()
    except OSError:
        return None
    return {line for line in text.splitlines() if line}


def sweep_stale(parent: str | os.PathLike[str] | None = None) -> list[Path]:
    """Clean up the rendezvous directories in `parent` whose owner is gone; return them.

    Directories that nobody claimed (older versions, tests' own) and other users' are left
    alone. `parent` defaults to the temporary directory, where `make_dir` creates them.
    """
    swept = []
    uid = os.getuid()
    for path in Path(parent or tempfile.gettempdir()).glob(f"{RENDEZVOUS_PREFIX}*"):
        with contextlib.suppress(OSError):
            if path.is_symlink() or not path.is_dir() or path.stat().st_uid != uid:
                continue
            if owner_alive(path) is False:
                clean_up_job(path)
                swept.append(path)
    return swept


@dataclass
class Watchdog:
    """The helper process of `start_watchdog`; `release()` it when we end cleanly."""

    proc: subprocess.Popen[bytes]

    def release(self) -> None:
        """Tell the watchdog we cleaned up ourselves, and let it go."""
        with contextlib.suppress(OSError, ValueError):
            assert self.proc.stdin is not None
            self.proc.stdin.write(b"done\n")
            self.proc.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)


def start_watchdog(rendezvous: str | os.PathLike[str], before: set[str]) -> Watchdog | None:
    """Start a process that cleans up after the job if we die without releasing it.

    `before` are the shm and hwloc files present before the job (`shm_files() |
    hwloc_files()`). The watchdog waits on a pipe only we hold (no polling): end of file
    without "done" means we died, however. It runs in a session of its own, so a Ctrl-C in
    the terminal does not reach it; None if it cannot be started. `before` is also left in
    the directory (`BEFORE_FILE`), for a later `sweep_stale` should the watchdog die too.
    """
    with contextlib.suppress(OSError):
        fd = os.open(Path(rendezvous) / BEFORE_FILE,
                     os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write("".join(f"{p}\n" for p in sorted(before)))
    try:
        proc = subprocess.Popen(
            [sys.executable, "-I", "-S", os.path.abspath(__file__), "--watch",
             os.fspath(rendezvous)],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip
    except OSError:
        return None
    assert proc.stdin is not None
    try:
        proc.stdin.write("".join(f"{p}\n" for p in sorted(before)).encode() + b"\n")
        proc.stdin.flush()
    except OSError:
        proc.kill()
        proc.wait()
        return None
    return Watchdog(proc)


def _watchdog_main(rendezvous: str) -> int:
    for signum in (signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, signal.SIG_IGN)
    before = set()
    pipe = sys.stdin.buffer
    for line in iter(pipe.readline, b""):
        if line == b"\n":
            break
        before.add(os.fsdecode(line.rstrip(b"\n")))
    if pipe.read().startswith(b"done"):
        return 0
    clean_up_job(rendezvous, before)
    return 0


__all__ = [
    "BEFORE_FILE",
    "ENV_RENDEZVOUS",
    "HWLOC_GLOB",
    "NO_PIDS",
    "OWNER_FILE",
    "Pids",
    "SHM_GLOB",
    "Watchdog",
    "claim",
    "clean_up_job",
    "die_with_parent",
    "hwloc_files",
    "in_job",
    "job_processes",
    "kill_job",
    "owner_alive",
    "paths_in_use",
    "process_state",
    "read_pids",
    "remove_new_hwloc",
    "remove_new_shm",
    "shm_files",
    "start_watchdog",
    "sweep_stale",
]


if __name__ == "__main__" and sys.argv[1:2] == ["--watch"] and len(sys.argv) == 3:
    raise SystemExit(_watchdog_main(sys.argv[2]))
