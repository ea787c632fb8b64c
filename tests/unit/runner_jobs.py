"""Jobs for the runner's tests: python one-liners that stand in for MPI jobs, and their pids.

Shared by test_runner.py and test_hygiene.py (real processes, no MPI).
"""

from __future__ import annotations

import sys
import textwrap
import time
from pathlib import Path

from launch.plan import CHUNK_MARK, CLUSTER, FORWARDER, Launch

M = CHUNK_MARK  # what Hydra's -prepend-pattern puts before "[k] "


def py(code: str, *args: str, site: bool = False) -> tuple[str, ...]:
    """Argv running the python one-liner `code` with `args`."""
    # -S (no site-packages) halves the start-up time, which dominates these tests on 2 cores.
    return (sys.executable, *(() if site else ("-S",)), "-c", textwrap.dedent(code), *args)


def fwd(code: str, name: str = "fwd0") -> Launch:
    return Launch(name, FORWARDER, py(code))


def cluster(name: str, code: str, ranks: int = 2, first_vrank: int = 0) -> Launch:
    return Launch(name, CLUSTER, py(code), {"JOB": name}, ranks, first_vrank)


# A job that records its pid (and a grandchild's, in the same process group), then sleeps.
SLEEPER = """
import os, subprocess, sys, time
child = subprocess.Popen(["sleep", "60"])
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(f"{os.getpid()} {child.pid}")
os.replace(sys.argv[1] + ".tmp", sys.argv[1])
time.sleep(60)
"""

# Wait until the sleepers have written their pid files, then run the rest of the job.
AFTER_SLEEPERS = """
import os, sys, time
while not all(os.path.exists(p) for p in sys.argv[1:]):
    time.sleep(0.01)
"""


def sleeper(name: str, role: str, pidfile: Path) -> Launch:
    return Launch(name, role, py(SLEEPER, str(pidfile)), {}, 1, 0)


def pids(*files: Path) -> list[int]:
    return [int(p) for f in files for p in f.read_text().split()]


def alive(pid: int) -> bool:
    """Whether `pid` runs; a zombie nobody reaps (PID 1 here does not) counts as dead."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):  # gone, or reaped mid-read
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def wait_dead(pid_list: list[int], timeout: float = 2.0) -> list[int]:
    """Return the pids still alive after `timeout` s (grandchildren die asynchronously)."""
    deadline = time.monotonic() + timeout
    while any(alive(p) for p in pid_list) and time.monotonic() < deadline:
        time.sleep(0.02)
    return [p for p in pid_list if alive(p)]
