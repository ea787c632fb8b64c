"""The Open MPI DVM of one run: started first, stopped last with everything it started.

It is ready for jobs once it has reported its address; launch/_openmpi.py says why there is one.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

from . import _openmpi, hygiene
from .plan import DVM, Launch

READY_TIMEOUT = 60.0  # seconds for prte to report its address (it is usually under one)
STOP_GRACE = 10.0  # seconds between asking the DVM to stop and killing its process group
LOG = "dvm.log"


class DVMError(RuntimeError):
    """The DVM did not start (the runner reports it as a launch error)."""


def start(launch: Launch, rendezvous: Path) -> subprocess.Popen[bytes]:
    """Start the DVM and wait until it takes jobs; DVMError (with its output) if it won't."""
    log = open(rendezvous / LOG, "wb")  # noqa: SIM115 - the DVM writes it until it ends
    try:
        proc = subprocess.Popen(launch.argv, env={**os.environ, **launch.env},
                                stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                cwd=rendezvous,  # where it finds the rankfiles (_openmpi)
                                start_new_session=True, preexec_fn=hygiene.die_with_parent())
    except OSError as exc:
        raise DVMError(f"cannot start the Open MPI DVM ({launch.argv[0]}): {exc}") from exc
    finally:
        log.close()
    deadline = time.monotonic() + READY_TIMEOUT
    while not _openmpi.uri_ready(rendezvous):
        code = proc.poll()
        if code is not None or time.monotonic() > deadline:
            stop(proc)
            why = f"exited with status {code}" if code is not None else \
                f"reported no address in {READY_TIMEOUT:.0f} s"
            raise DVMError(f"the Open MPI DVM ({launch.argv[0]}) {why}: "
                           f"{_tail(rendezvous / LOG)}")
        time.sleep(0.05)
    return proc


@contextlib.contextmanager
def running(command: str, directory: Path, env: Mapping[str, str]) -> Iterator[list[str]]:
    """A DVM of this host, started in `directory` and stopped on the way out.

    Yields the options of launcher `command` for a job in it, the variables `env` the jobs add
    to the DVM's environment named. For tools that join separately launched jobs on Open MPI
    (mmpi-bench's across-jobs baseline).
    """
    base = _openmpi.prefix_env(command, os.environ)
    launch = Launch(DVM, DVM, _openmpi.dvm_argv(command, str(directory), os.environ), base)
    proc = start(launch, Path(directory))
    try:
        yield _openmpi.job_args(str(directory), {**base, **env})
    finally:
        stop(proc)


def stop(proc: subprocess.Popen[bytes]) -> None:
    """Stop the DVM: SIGTERM (prte ends its daemons and their jobs), then its group killed."""
    if proc.poll() is None:
        _signal(proc, signal.SIGTERM)
        try:
            proc.wait(STOP_GRACE)
        except subprocess.TimeoutExpired:
            pass
    _signal(proc, signal.SIGKILL)  # whatever of its group is left
    proc.wait()


def remove_session_dirs(pids: list[int]) -> None:
    """Remove what the jobs' launchers (`pids`, ours) left in the temporary directory.

    An mpirun of a DVM that is stopped rather than finishing (mmpi-run interrupted, a job
    killed after the grace period) leaves its session directory behind,
    ``prterun.session.<host>.<uid>.<pid>`` in TMPDIR.
    """
    base = Path(tempfile.gettempdir())
    host, uid = socket.gethostname(), os.getuid()
    for pid in pids:
        shutil.rmtree(base / f"prterun.session.{host}.{uid}.{pid}", ignore_errors=True)


def _signal(proc: subprocess.Popen[bytes], signum: int) -> None:
    try:
        os.killpg(proc.pid, signum)  # its own session: the group is the DVM's alone
    except (ProcessLookupError, PermissionError):
        pass


def _tail(path: Path, lines: int = 6) -> str:
    try:
        text = path.read_text(errors="replace").strip().splitlines()[-lines:]
    except OSError:
        return "(no output)"
    return " | ".join(text) or "(no output)"


__all__ = ["DVMError", "remove_session_dirs", "running", "start", "stop"]
