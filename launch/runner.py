"""Run a Plan: start the jobs in order, label their output, stop everything on the first failure.

Rules:
- Every job leads its own process group (``start_new_session``): stopping a job signals the
  whole group (mpiexec, its local proxies and ranks), and a Ctrl-C in the terminal reaches only
  mmpi-run, which then stops the jobs itself.
- Whatever happens, every group we started is sent SIGKILL before ``run`` returns, so no rank
  outlives mmpi-run on this machine (remote ranks are Hydra's to stop when mpiexec dies); if
  mmpi-run itself is SIGKILLed, the kernel sends each mpiexec SIGTERM (Linux PDEATHSIG).
  If it is SIGKILLed, its watchdog (`hygiene.start_watchdog`) also kills what is left of the
  job and removes the rendezvous directory and the job's shm segments.
- Output is written one whole line at a time under one lock; lines never interleave. Every
  line goes to the log; a failure's noise is held back from the screen (_console.py).
- Only the job that holds virtual rank 0 gets our standard input (Hydra gives it to its rank 0).
- The rendezvous directory is always removed; after a failure, MPICH shared-memory files that
  appeared during the run and are no longer in use are removed too.
- Success is: every cluster job exits 0, then every forwarder exits 0. A cluster that exits 0
  without any rank having joined the bridge ran as a separate world: that is a failure.
- A rank that the rank watch (_watch.py) saw leave without finalizing is a failure too, even
  while its job still runs (`os._exit(0)`: Hydra waits for the other ranks).
- After the first failure, the other jobs get FAILURE_GRACE seconds to fail by themselves
  before they are stopped: one dead rank brings down its cluster, the forwarder and maybe the
  other cluster, and the job that exits first is often not the cause. Every failure is then
  explained from the job's own output and the rendezvous pid files (see _diagnose.py), the
  cause first; mmpi-run exits with the cause's status.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from mmpi.errors import MMPIError

from . import _diagnose, _dvm, _readers, _status, hygiene
from . import _watch as rank_watch
from ._console import Console, keep_log, open_log
from ._diagnose import JobEnd
from ._supervise import Failure, Job, departures, separate_worlds, settled, wait_for_end
from .plan import Launch, Plan

TERM_GRACE = 3.0  # seconds between SIGTERM and SIGKILL
# A forwarder exits 0 once every rank has left; the clusters' mpiexec may take a while longer
# (Python teardown of every rank on busy cores: 5 s was seen to be too short). A rank that
# still needed it fails on its own (ForwarderLost) long before this.
EARLY_EXIT_GRACE = 30.0
SHUTDOWN_GRACE = 10.0  # seconds forwarders get to exit after the clusters finished
READER_GRACE = 2.0  # seconds to drain output after the jobs are gone
FAILURE_GRACE = 1.0  # seconds the other jobs get to fail by themselves after the first failure
LOG_FILE = "output.log"  # in the rendezvous directory, unless the caller names a log

class LaunchError(MMPIError, RuntimeError):
    """A job could not be started."""


class _Terminated(BaseException):
    """mmpi-run itself received SIGTERM or SIGHUP (a BaseException, like KeyboardInterrupt)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def run(
    plan: Plan,
    *,
    rendezvous: str | os.PathLike[str],
    log: str | os.PathLike[str] | None = None,
    log_dir: str | os.PathLike[str] | None = None,
    verbose: bool = False,
    early_exit_grace: float = EARLY_EXIT_GRACE,
    shutdown_grace: float = SHUTDOWN_GRACE,
    term_grace: float = TERM_GRACE,
    failure_grace: float = FAILURE_GRACE,
) -> int:
    """Run `plan` to completion; return 0, the failure's cause's status, 130 on Ctrl-C.

    Every line of every job is written to the file `log` as it comes; without one, to a file
    in the rendezvous directory that is kept, if the run fails, as ``mmpi-run.<time>.log`` in
    `log_dir` (not at all without a `log_dir`). `verbose` shows everything on the screen; by
    default a failure's secondary noise is held back (see _console.py).
    """
    rendezvous = Path(rendezvous)
    shm_before = hygiene.shm_files()
    hwloc_before = hygiene.hwloc_files()
    # Cleans up should we be SIGKILLed; started before the jobs, so it misses none of them.
    watchdog = hygiene.start_watchdog(rendezvous, shm_before | hwloc_before)
    log_path = Path(log) if log is not None else rendezvous / LOG_FILE
    log_file = open_log(log_path)
    output = Console(log_file, verbose=verbose)
    jobs: list[Job] = []
    failures: list[Failure] = []
    status = 1  # what a LaunchError or a bug leaves behind
    watch: rank_watch.RankWatch | None = None
    dvm = None
    try:
        watch = _start_watch(plan, rendezvous)
        for name, text in plan.files.items():  # what the launches name (rankfiles)
            (rendezvous / name).write_text(text)
        if plan.dvm is not None:  # Open MPI: every job goes into it (_openmpi)
            try:
                dvm = _dvm.start(plan.dvm, rendezvous)
            except _dvm.DVMError as exc:
                raise LaunchError(str(exc)) from None
        try:
            with _signals_raise():
                try:
                    for launch in plan.launches:
                        jobs.append(_spawn(launch))
                finally:
                    # Readers start once every job is spawned: forking while other threads
                    # run is unsafe with a preexec_fn. The pipes buffer the first output.
                    for job in jobs:
                        _start_readers(job, output)
                checks = [separate_worlds(jobs, rendezvous)]
                if watch is not None:
                    checks.append(departures(jobs, watch))
                failures = wait_for_end(jobs, early_exit_grace, shutdown_grace, failure_grace,
                                        checks, settled(jobs, watch) if watch is not None else None)
            status = 0
        except KeyboardInterrupt:
            failures = [Failure("interrupted", _status.INTERRUPTED)]
            status = 0
        except _Terminated as exc:
            signame = signal.Signals(exc.signum).name
            failures = [Failure(f"received {signame}", _status.killed(exc.signum))]
            status = 0
        finally:
            with _signals_ignored():
                # The pid files go with the rendezvous directory: read them first.
                pids = hygiene.read_pids(rendezvous) if failures else hygiene.NO_PIDS
                failed = _shut_down(jobs, failures, output, term_grace, pids, rendezvous, watch)
                status = failed if failed is not None else status
                if status != 0:
                    hygiene.remove_new_shm(shm_before)
                    hygiene.remove_new_hwloc(hwloc_before)
    finally:
        if log_file is not None:
            log_file.close()
        if status != 0 and failures:  # a job that could not even start has nothing to log
            kept = log_path if log is not None else keep_log(log_path, log_dir)
            if kept is not None:
                output.message(f"the output of every rank and forwarder is in {kept}")
        if watch is not None:
            watch.close()
        if dvm is not None:  # after the jobs: it ends whatever of theirs is left
            _dvm.stop(dvm)
            _dvm.remove_session_dirs([job.proc.pid for job in jobs])
        shutil.rmtree(rendezvous, ignore_errors=True)
        if watchdog is not None:
            watchdog.release()
    return status


def _start_watch(plan: Plan, rendezvous: Path) -> rank_watch.RankWatch | None:
    try:
        return rank_watch.start_for(plan, rendezvous)
    except OSError as exc:
        raise LaunchError(f"cannot start the rank watch: {exc}") from exc


def _shut_down(
    jobs: list[Job],
    failures: list[Failure],
    output: Console,
    term_grace: float,
    pids: hygiene.Pids,
    rendezvous: Path,
    watch: rank_watch.RankWatch | None = None,
) -> int | None:
    """Report the failures, stop what still runs, drain the output, recap; return the status."""
    running = [j for j in jobs if j.proc.poll() is None]
    status: int | None = None
    headline = ""
    try:
        if failures:
            for failure in failures:
                if failure.exited and failure.job is not None:
                    # Let a failed job's last words (a traceback, Hydra's banner) come first:
                    # they are also the evidence for the diagnosis.
                    failure.job.join_readers(0.5)
            shown: tuple[str, int | None] | None = None
            said = None
            if failures[0].job is None:  # interrupted: nobody's fault
                lines, status, headline = [failures[0].what], failures[0].status, failures[0].what
                others = "all jobs"
            else:
                # Whether a forwarder the ranks lost is stopped, gone or wedged.
                states = {i: hygiene.process_state(p) for i, p in pids.forwarders.items()}
                report = _diagnose.diagnose(
                    [f.end(i) for i, f in enumerate(failures) if f.job is not None],
                    pids,
                    stopped=[_still_running(j) for j in running],
                    forwarder_states=states,
                    failing=watch.failing() if watch is not None else (),
                )
                cause = report.cause
                shown = (cause.end.name, cause.rank[1] if cause.rank else None)
                lines, status, headline = report.lines, report.status, report.headline
                if watch is not None:  # a rank that left without a word may be the cause
                    lines, status, headline, shown = rank_watch.explain(
                        watch.departed(), report, shown
                    )
                # the exception line the cause's traceback ends with, if the report quotes it
                said = cause.said if lines[0] == report.lines[0] else None
                others = "the other jobs"
            # The cause first, then where it happened (its own traceback), then the rest.
            for i, line in enumerate(lines):
                last = i == len(lines) - 1
                output.message(line + (f"; stopping {others}" if last and running else ""))
                if i == 0 and shown is not None:
                    output.show(shown, omit=said)
    finally:
        # A stopped forwarder would hold its mpiexec up until SIGKILL: end it first.
        for pid in pids.forwarders.values():
            if hygiene.process_state(pid) in ("T", "t") and hygiene.in_job(pid, rendezvous):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
        _stop(jobs, term_grace)
        if failures:
            # A rank or forwarder outside its job's process group (a stopped forwarder that
            # Hydra could not end) is still ours: the pid files say so.
            hygiene.kill_job(rendezvous, signal.SIGKILL)
    for job in jobs:
        job.join_readers(READER_GRACE)
    if failures:
        output.drop()  # the report stands for the rest; the log has it
    else:
        output.release()
    if failures and running:
        # Hydra reports the jobs we stopped as BAD TERMINATION; say once more who failed first.
        stopped = ", ".join(j.what for j in running)
        output.message(f"stopped {stopped} ({headline}); exit status {status}")
    return status


def _still_running(job: Job) -> JobEnd:
    """A job still running at the failure, for the diagnosis (its ranks may have failed)."""
    launch = job.launch
    return JobEnd(
        launch.name, launch.role, 0, "was stopped", job.evidence, launch.first_vrank,
        vranks=launch.vranks, running=True,
    )


def _spawn(launch: Launch) -> Job:
    try:
        proc = subprocess.Popen(
            launch.argv,
            env={**os.environ, **launch.env},
            stdin=_stdin_for(launch),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            preexec_fn=hygiene.die_with_parent(),
        )
    except OSError as exc:
        raise LaunchError(f"cannot start {launch.role} {launch.name!r}: {exc}") from exc
    return Job(launch, proc)


def _stdin_for(launch: Launch) -> int | None:
    """Our standard input for the job that holds virtual rank 0 (None: inherit), else /dev/null.

    Three jobs cannot share one input; Hydra hands its own to its rank 0, as plain mpiexec.
    """
    if not launch.stdin:
        return subprocess.DEVNULL
    try:
        os.fstat(0)
        if os.isatty(0) and os.tcgetpgrp(0) != os.getpgrp():
            # Started in the background of a terminal: what is typed there is the shell's.
            return subprocess.DEVNULL
    except OSError:
        return subprocess.DEVNULL
    return None


def _start_readers(job: Job, output: Console) -> None:
    launch, proc = job.launch, job.proc
    for stream, pipe in (("stdout", proc.stdout), ("stderr", proc.stderr)):
        labeller = _readers.for_launch(launch)
        reader = threading.Thread(
            target=_pump,
            args=(pipe, stream, labeller, output, job),
            name=f"mmpi-run {launch.name} {stream}",
            daemon=True,  # a grandchild holding the pipe open must not keep us alive
        )
        reader.start()
        job.readers.append(reader)


def _pump(
    pipe: IO[bytes],
    stream: str,
    labeller: _readers.Reader,
    output: Console,
    job: Job,
) -> None:
    def emit(lines: list[_readers.Line]) -> None:
        for line in lines:
            job.evidence.feed(line.rank, line.text, stream)
            source = (job.launch.name, line.rank)
            output.line(source, stream, line.label, line.text, from_mpiexec=line.maybe_mpiexec)

    with pipe:
        for raw in iter(pipe.readline, b""):
            emit(labeller.feed(raw))
        emit(labeller.flush())


# A check looks at the whole job on every poll and returns the failure to stop it with, or
# None. This is the place for watchers beyond the jobs' exit statuses (a listener for ranks that
# leave, say): `run` makes the list; `_watch` calls each in turn while nothing has failed yet.
def _stop(jobs: list[Job], term_grace: float) -> None:
    """SIGTERM the groups still running, wait up to `term_grace` s, then SIGKILL every group."""
    live = [j for j in jobs if j.proc.poll() is None]
    for job in live:
        _signal_group(job, signal.SIGTERM)
    deadline = time.monotonic() + term_grace
    while any(j.proc.poll() is None for j in live) and time.monotonic() < deadline:
        time.sleep(0.02)
    # Also the groups whose leader already exited: mpiexec may have left ranks behind.
    for job in jobs:
        _signal_group(job, signal.SIGKILL)
    for job in jobs:
        job.proc.wait()


def _signal_group(job: Job, signum: int) -> None:
    # start_new_session made the leader's pid the group id.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(job.proc.pid, signum)


@contextlib.contextmanager
def _signals_raise() -> Iterator[None]:
    """Turn SIGTERM and SIGHUP into _Terminated while jobs run (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: object) -> None:
        raise _Terminated(signum)

    # A signal that was ignored when we started (nohup) stays ignored.
    saved = {
        s: signal.signal(s, handler)
        for s in (signal.SIGTERM, signal.SIGHUP)
        if signal.getsignal(s) is not signal.SIG_IGN
    }
    try:
        yield
    finally:
        for signum, previous in saved.items():
            signal.signal(signum, previous)


@contextlib.contextmanager
def _signals_ignored() -> Iterator[None]:
    """Keep a second Ctrl-C from cutting the clean-up short and leaving jobs behind."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    signals = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    saved = {s: signal.signal(s, signal.SIG_IGN) for s in signals}
    try:
        yield
    finally:
        for signum, previous in saved.items():
            signal.signal(signum, previous)


__all__ = ["LaunchError", "run"]
