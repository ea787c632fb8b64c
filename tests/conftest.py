"""Shared fixtures: start real bridged (mmpi-run) and native (mpiexec) jobs with timeouts."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from launch import hygiene, launcher

ROOT = Path(__file__).resolve().parent.parent
PROGS = ROOT / "tests" / "mpi" / "progs"

# Every rank imports numpy, whose OpenBLAS starts a thread per core that spins a while: on the
# suite's shared cores that is CPU the jobs' own processes wait for (no test uses BLAS).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


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


def _run(cmd: list[str], timeout: float, env: dict | None = None, *,
         bridged: bool = False, in_tmp: bool = False) -> Job:
    full_env = dict(os.environ)
    full_env.pop("MMPI_RENDEZVOUS", None)
    full_env.update(env or {})
    with tempfile.TemporaryDirectory(prefix="mmpi-test-", ignore_cleanup_errors=True) as tmp:
        if bridged:
            full_env["TMPDIR"] = tmp  # mmpi-run makes the job's rendezvous directory here
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=full_env, cwd=tmp if in_tmp else ROOT,
                             start_new_session=True)
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            # A hang is a failure, and must not leave the job behind: end what we started.
            _stop(p, Path(tmp) if bridged else None)
            out, err = p.communicate()
            pytest.fail(f"job timed out after {timeout} s: {' '.join(cmd)}\n{out[-3000:]}\n"
                        f"--- stderr ---\n{err[-3000:]}")
    return Job(p.returncode, out, err)


def _stop(p: subprocess.Popen, tmp: Path | None) -> None:
    """SIGKILL the process group we started and, for a bridged job, its ranks and forwarders.

    start_new_session made the launched pid the group's id. mmpi-run starts each of its jobs
    in a group of its own, so those are found through the job's pid files instead (a killed
    mmpi-run leaves its rendezvous directory behind).
    """
    rendezvous = sorted(tmp.glob("mmpi-*")) if tmp else []
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(p.pid, signal.SIGKILL)
    for rdv in rendezvous:
        hygiene.kill_job(rdv, signal.SIGKILL)


def _built(name: str) -> bool:
    """Whether extension `name` was built, without importing it (which would initialize MPI
    in the test runner): its file beside the package's, in the copy this Python imports."""
    package, leaf = name.rsplit(".", 1)
    spec = importlib.util.find_spec(package)
    where = Path(spec.origin).parent if spec and spec.origin else None
    return bool(where and any(where.glob(leaf + ".*.so")))


# Both relays of the forwarder run the relay tests: the compiled one where the install built it
# (a skip that says why elsewhere), and the Python one, the reference and the fallback.
# (find_spec, not an import: importing it would initialize MPI in the test runner.)
_COMPILED = _built("forwarder._crelay")
RELAYS = [pytest.param("compiled", marks=pytest.mark.skipif(
    not _COMPILED, reason="the compiled relay was not built (no C compiler at install)")),
    "python"]
# Likewise the ranks' crossing path (MMPI_RANK_PATH).
RANK_COMPILED = _built("mmpi._backend._compiled")
RANK_PATHS = [pytest.param("compiled", marks=pytest.mark.skipif(
    not RANK_COMPILED, reason="the compiled rank path was not built (no C compiler at install)")),
    "python"]


def mmpi_run_cmd() -> list[str]:
    """The launcher: the installed console script (beside this Python first: not a wrapper
    such as pyenv's shim) when present, else the module."""
    beside = Path(sysconfig.get_path("scripts")) / "mmpi-run"
    exe = str(beside) if beside.is_file() else shutil.which("mmpi-run")
    return [exe] if exe else [sys.executable, "-m", "launch"]


MPIEXEC = launcher("mpiexec")  # the one mmpi-run starts its jobs with


@pytest.fixture(scope="session", autouse=True)
def _no_shm_left_behind():
    """Killed MPI jobs leave /dev/shm/mpich_shm_* segments; the suite removes the ones it made.

    mmpi-run cleans up after its own failed jobs, but several tests start MPI jobs by hand and
    kill them on purpose.
    """
    before = hygiene.shm_files()
    hwloc_before = hygiene.hwloc_files()
    logs_before = set(ROOT.glob("mmpi-run.*.log"))
    yield
    # jobs that fail on purpose keep their log in the working directory, as mmpi-run does
    for log in set(ROOT.glob("mmpi-run.*.log")) - logs_before:
        log.unlink(missing_ok=True)
    hygiene.remove_new_shm(before)
    hygiene.remove_new_hwloc(hwloc_before)


@pytest.fixture
def rendezvous(tmp_path: Path) -> Path:
    """A rendezvous directory for launch.runner's tests, as if a rank of each cluster had
    joined the bridge (no process has pid 0): else the runner fails their clusters of
    one-liners as separate worlds."""
    path = tmp_path / "rendezvous"
    path.mkdir()
    (path / "secret").write_text("x")
    for c in ("low", "high"):
        (path / f"rank.{c}.9.pid").write_text("0 9")
    return path


@pytest.fixture
def bridged():
    """bridged(prog, *args, low=2, high=2, timeout=120) -> Job, through mmpi-run."""

    def run(prog: str, *args: str, low: int = 2, high: int = 2, timeout: float = 120,
            env: dict | None = None, launcher_args: tuple[str, ...] = ()) -> Job:
        cmd = [*mmpi_run_cmd(), "--low", str(low), "--high", str(high), *launcher_args,
               sys.executable, str(PROGS / prog) if not prog.startswith("-") else prog, *args]
        return _run(cmd, timeout, env, bridged=True)

    return run


@pytest.fixture
def native():
    """native(prog, *args, n=4, timeout=120) -> Job, through plain mpiexec."""

    def run(prog: str, *args: str, n: int = 4, timeout: float = 120,
            env: dict | None = None) -> Job:
        cmd = [MPIEXEC, "-n", str(n), sys.executable, str(PROGS / prog), *args]
        return _run(cmd, timeout, env)

    return run
