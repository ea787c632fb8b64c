"""Shared fixtures: start real bridged (mmpi-run) and native (mpiexec) jobs with timeouts."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PROGS = ROOT / "tests" / "mpi" / "progs"


@dataclass
class Job:
    """The outcome of one job."""

    returncode: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        """Both streams together, for assertion messages."""
        return self.stdout + "\n--- stderr ---\n" + self.stderr


def _run(cmd: list[str], timeout: float, env: dict | None = None) -> Job:
    full_env = dict(os.environ)
    full_env.pop("MMPI_RENDEZVOUS", None)
    full_env.update(env or {})
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=full_env,
                           cwd=ROOT, start_new_session=True)
    except subprocess.TimeoutExpired as exc:
        # A hang is a failure, and must not leave the job behind.
        subprocess.run(["pkill", "-f", str(PROGS)], check=False)
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        pytest.fail(f"job timed out after {timeout} s: {' '.join(cmd)}\n{out[-3000:]}")
    return Job(p.returncode, p.stdout, p.stderr)


def mmpi_run_cmd() -> list[str]:
    """The launcher: the installed console script when present, else the module."""
    exe = shutil.which("mmpi-run")
    return [exe] if exe else [sys.executable, "-m", "launch"]


@pytest.fixture(scope="session", autouse=True)
def _no_shm_left_behind():
    """Killed MPI jobs leave /dev/shm/mpich_shm_* segments; the suite removes the ones it made.

    mmpi-run cleans up after its own failed jobs, but several tests start MPI jobs by hand and
    kill them on purpose.
    """
    import glob

    from launch.runner import HWLOC_GLOB, _remove_new_hwloc, _remove_new_shm, _shm_files

    before = _shm_files()
    hwloc_before = set(glob.glob(HWLOC_GLOB))
    yield
    _remove_new_shm(before)
    _remove_new_hwloc(hwloc_before)


@pytest.fixture
def bridged():
    """bridged(prog, *args, low=2, high=2, timeout=120) -> Job, through mmpi-run."""

    def run(prog: str, *args: str, low: int = 2, high: int = 2, timeout: float = 120,
            env: dict | None = None, launcher_args: tuple[str, ...] = ()) -> Job:
        cmd = [*mmpi_run_cmd(), "--low", str(low), "--high", str(high), *launcher_args,
               sys.executable, str(PROGS / prog) if not prog.startswith("-") else prog, *args]
        return _run(cmd, timeout, env)

    return run


@pytest.fixture
def native():
    """native(prog, *args, n=4, timeout=120) -> Job, through plain mpiexec."""

    def run(prog: str, *args: str, n: int = 4, timeout: float = 120,
            env: dict | None = None) -> Job:
        cmd = ["mpiexec", "-n", str(n), sys.executable, str(PROGS / prog), *args]
        return _run(cmd, timeout, env)

    return run
