"""Run a Plan: start the jobs in order, label their output, stop everything on the first failure.

Rules:
- Every job leads its own process group (``start_new_session``): stopping a job signals the
  whole group (mpiexec, its local proxies and ranks), and a Ctrl-C in the terminal reaches only
  mmpi-run, which then stops the jobs itself.
- Whatever happens, every group we started is sent SIGKILL before ``run`` returns, so no rank
  outlives mmpi-run on this machine (remote ranks are Hydra's to stop when mpiexec dies); if
  mmpi-run itself is SIGKILLed, the kernel sends each mpiexec SIGTERM (Linux PDEATHSIG).
- Output is written one whole line at a time under one lock; lines never interleave.
- The rendezvous directory is always removed; after a failure, MPICH shared-memory files that
  appeared during the run and are no longer in use are removed too.
- Success is: every cluster job exits 0, then every forwarder exits 0.
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
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO, NamedTuple

from mmpi.errors import MMPIError

from . import _diagnose, hygiene
from . import _watch as rank_watch
from ._diagnose import Evidence, JobEnd
from .plan import CHUNK_MARK, CLUSTER, FORWARDER, Launch, Plan

POLL_INTERVAL = 0.05  # seconds between checks of the jobs; 2 cores, so never spin
TERM_GRACE = 3.0  # seconds between SIGTERM and SIGKILL
EARLY_EXIT_GRACE = 5.0  # a forwarder exiting 0 at the very end races with mpiexec's own exit
SHUTDOWN_GRACE = 10.0  # seconds forwarders get to exit after the clusters finished
READER_GRACE = 2.0  # seconds to drain output after the jobs are gone
FAILURE_GRACE = 1.0  # seconds the other jobs get to fail by themselves after the first failure

_MARK = CHUNK_MARK.encode()
_CHUNK_HEAD = re.compile(rb"\[(\d+)\] ")


class LaunchError(MMPIError, RuntimeError):
    """A job could not be started."""


class _Terminated(BaseException):
    """mmpi-run itself received SIGTERM or SIGHUP (a BaseException, like KeyboardInterrupt)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


class _Output:
    """Our stdout/stderr, shared by the reader threads: whole lines only, one at a time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._broken: set[str] = set()

    def write(self, stream: str, text: str) -> None:
        with self._lock:
            if stream in self._broken:
                return
            # Looked up on every call so that redirections (pytest's capsys) are honoured.
            out = sys.stdout if stream == "stdout" else sys.stderr
            try:
                out.write(text)
                out.flush()
            except (OSError, ValueError):
                # `mmpi-run ... | head` closed the pipe: keep draining the jobs, print nothing.
                self._broken.add(stream)

    def message(self, text: str) -> None:
        self.write("stderr", f"mmpi-run: {text}\n")


class _Line(NamedTuple):
    """One whole line of a job's output, before it is written."""

    label: str  # "[fwd0] ", "[low:1 v1] ", "[low] "
    text: str  # without the newline
    maybe_mpiexec: bool  # not known to come from a rank: could be mpiexec's own message
    rank: int | None = None  # the local rank that printed it, when known

    def __str__(self) -> str:
        return f"{self.label}{self.text}\n"


class _Labeller:
    """Label each line of one process's output with its name (forwarders)."""

    def __init__(self, name: str) -> None:
        self._label = f"[{name}] "

    def feed(self, raw: bytes) -> list[_Line]:
        """Take one line of the raw stream (it ends in a newline except at EOF)."""
        return [_Line(self._label, raw.decode(errors="replace").removesuffix("\n"), True)]

    def flush(self) -> list[_Line]:
        """Return the unfinished lines, at EOF: none, feed() had whole lines."""
        return []


class _RankDemux:
    """Rebuild whole per-rank lines from Hydra's chunk-prefixed output of one cluster job.

    Hydra writes ``MARK[k] `` before every chunk a rank wrote and after every newline inside
    a chunk, and chunks of different ranks may follow each other in mid-line. So: split on
    MARK, give each piece to the rank its head names, and keep a partial line per rank.
    Text with no head at the start of a line is mpiexec's own (labelled ``[cluster] ``).
    """

    def __init__(self, cluster: str, first_vrank: int) -> None:
        self._cluster = cluster
        self._first_vrank = first_vrank
        self._partial: dict[int | None, bytes] = {}

    def feed(self, raw: bytes) -> list[_Line]:
        """Take one line of the raw stream (it ends in a newline except at EOF)."""
        out: list[_Line] = []
        pieces = raw.split(_MARK)
        rank: int | None = None
        self._add(rank, pieces[0], out)
        for piece in pieces[1:]:
            head = _CHUNK_HEAD.match(piece)
            if head:
                rank, piece = int(head[1]), piece[head.end() :]
            else:
                piece = _MARK + piece  # the program printed the mark byte itself
            self._add(rank, piece, out)
        return out

    def flush(self) -> list[_Line]:
        """Return the unfinished lines, at EOF."""
        out = [self._line(rank, data) for rank, data in self._partial.items()]
        self._partial.clear()
        return out

    def _add(self, rank: int | None, data: bytes, out: list[_Line]) -> None:
        if not data:
            return
        data = self._partial.pop(rank, b"") + data
        *lines, rest = data.split(b"\n")
        out.extend(self._line(rank, line) for line in lines)
        if rest:
            self._partial[rank] = rest

    def _line(self, rank: int | None, data: bytes) -> _Line:
        text = data.decode(errors="replace")
        if rank is None:
            return _Line(f"[{self._cluster}] ", text, True)
        return _Line(f"[{self._cluster}:{rank} v{self._first_vrank + rank}] ", text, False, rank)


# What Hydra prints about a job that mmpi-run itself is stopping: "BAD TERMINATION ... EXIT
# CODE: 15 ... Terminated (signal 15)" on every job, which would bury the real failure. These
# lines are dropped only from jobs we are stopping and only when no rank is known to own them.
_STOPPING_NOISE = re.compile(
    r"|=+|=   .*|YOUR APPLICATION TERMINATED WITH THE EXIT STRING: .*"
    r"|This typically refers to a problem with your application\."
    r"|Please see the FAQ page for debugging suggestions"
)


@dataclass
class _Job:
    launch: Launch
    proc: subprocess.Popen[bytes]
    readers: list[threading.Thread] = field(default_factory=list)
    stopping: threading.Event = field(default_factory=threading.Event)  # we are stopping it
    evidence: Evidence = field(default_factory=Evidence)  # how it ended, from its output

    @property
    def what(self) -> str:
        return f"{self.launch.role} {self.launch.name!r}"

    def join_readers(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for reader in self.readers:
            reader.join(max(0.0, deadline - time.monotonic()))


@dataclass(frozen=True)
class _Failure:
    """Why the run stops early: the job at fault (if any), what happened, our exit status."""

    what: str  # "exited with status 1" (of `job`), "interrupted" (without a job)
    status: int
    job: _Job | None = None
    exited: bool = False  # the job ended by itself: its output tells how
    departed: bool = False  # a rank left without finalizing (the rank watch saw it)

    def end(self, order: int) -> JobEnd:
        """Describe this failure for the diagnosis (only failures with a job have one)."""
        assert self.job is not None
        launch = self.job.launch
        evidence = self.job.evidence if self.exited else None
        return JobEnd(
            launch.name, launch.role, self.status, self.what, evidence, launch.first_vrank, order
        )


def run(
    plan: Plan,
    *,
    rendezvous: str | os.PathLike[str],
    early_exit_grace: float = EARLY_EXIT_GRACE,
    shutdown_grace: float = SHUTDOWN_GRACE,
    term_grace: float = TERM_GRACE,
    failure_grace: float = FAILURE_GRACE,
) -> int:
    """Run `plan` to completion; return 0, the failure's cause's status, 130 on Ctrl-C."""
    output = _Output()
    shm_before = hygiene.shm_files()
    hwloc_before = hygiene.hwloc_files()
    jobs: list[_Job] = []
    failures: list[_Failure] = []
    status = 1  # what a LaunchError or a bug leaves behind
    watch: rank_watch.RankWatch | None = None
    try:
        watch = _start_watch(plan, rendezvous)
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
                failures = _watch(jobs, early_exit_grace, shutdown_grace, failure_grace, watch)
            status = 0
        except KeyboardInterrupt:
            failures = [_Failure("interrupted", 130)]
            status = 0
        except _Terminated as exc:
            failures = [_Failure(f"received {signal.Signals(exc.signum).name}", 128 + exc.signum)]
            status = 0
        finally:
            with _signals_ignored():
                # The pid files go with the rendezvous directory: read them first.
                pids = hygiene.read_pids(rendezvous) if failures else hygiene.NO_PIDS
                failed = _shut_down(jobs, failures, output, term_grace, pids, watch)
                status = failed if failed is not None else status
                if status != 0:
                    hygiene.remove_new_shm(shm_before)
                    hygiene.remove_new_hwloc(hwloc_before)
    finally:
        if watch is not None:
            watch.close()
        shutil.rmtree(rendezvous, ignore_errors=True)
    return status


def _start_watch(plan: Plan, rendezvous: str | os.PathLike[str]) -> rank_watch.RankWatch | None:
    """Start the rank watch of the job (none without a rendezvous directory to publish it)."""
    if not os.path.isdir(rendezvous):
        return None
    clusters = {c.name: (c.first_vrank, c.ranks) for c in plan.clusters}
    remote = any(p.host != "localhost" for layout in plan.layouts for p in layout.places)
    watch = rank_watch.RankWatch(rendezvous, clusters, remote=remote)
    try:
        watch.start()
    except OSError as exc:
        watch.close()
        raise LaunchError(f"cannot start the rank watch: {exc}") from exc
    return watch


def _shut_down(
    jobs: list[_Job],
    failures: list[_Failure],
    output: _Output,
    term_grace: float,
    pids: hygiene.Pids,
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
            if failures[0].job is None and not failures[0].departed:  # interrupted
                lines, status, headline = [failures[0].what], failures[0].status, failures[0].what
                others = "all jobs"
            else:
                ends = [f.end(i) for i, f in enumerate(failures) if f.job is not None]
                report = _diagnose.diagnose(ends, pids) if ends else None
                departed = watch.departed() if watch is not None else []
                lines, status, headline = rank_watch.explain(departed, report)
                others = "the other jobs"
            for line in lines[:-1]:
                output.message(line)
            output.message(lines[-1] + (f"; stopping {others}" if running else ""))
    finally:
        _stop(jobs, term_grace)
    for job in jobs:
        job.join_readers(READER_GRACE)
    if failures and running:
        # Hydra reports the jobs we stopped as BAD TERMINATION; say once more who failed first.
        stopped = ", ".join(j.what for j in running)
        output.message(f"stopped {stopped} ({headline}); exit status {status}")
    return status


def _spawn(launch: Launch) -> _Job:
    try:
        proc = subprocess.Popen(
            launch.argv,
            env={**os.environ, **launch.env},
            # Three jobs cannot share one terminal's input; Hydra would also hand it to rank 0.
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            preexec_fn=hygiene.die_with_parent(),
        )
    except OSError as exc:
        raise LaunchError(f"cannot start {launch.role} {launch.name!r}: {exc}") from exc
    return _Job(launch, proc)


def _start_readers(job: _Job, output: _Output) -> None:
    launch, proc = job.launch, job.proc
    for stream, pipe in (("stdout", proc.stdout), ("stderr", proc.stderr)):
        if launch.role == CLUSTER:
            labeller: _Labeller | _RankDemux = _RankDemux(launch.name, launch.first_vrank)
        else:
            labeller = _Labeller(launch.name)
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
    labeller: _Labeller | _RankDemux,
    output: _Output,
    job: _Job,
) -> None:
    def emit(lines: list[_Line]) -> None:
        for line in lines:
            job.evidence.feed(line.rank, line.text, stream)
            if (
                line.maybe_mpiexec
                and job.stopping.is_set()
                and _STOPPING_NOISE.fullmatch(line.text)
            ):
                continue
            output.write(stream, str(line))

    with pipe:
        for raw in iter(pipe.readline, b""):
            emit(labeller.feed(raw))
        emit(labeller.flush())


def _watch(
    jobs: list[_Job],
    early_exit_grace: float,
    shutdown_grace: float,
    failure_grace: float,
    watch: rank_watch.RankWatch | None = None,
) -> list[_Failure]:
    """Wait until the job succeeds ([]) or fails (every failure within the grace period).

    A rank that the rank watch saw leave without finalizing is a failure too; then the jobs
    get DEPARTURE_GRACE seconds to fail by themselves and say how it ended.
    """
    clusters = [j for j in jobs if j.launch.role == CLUSTER]
    forwarders = [j for j in jobs if j.launch.role == FORWARDER]
    forwarder_gone_at: float | None = None
    clusters_done_at: float | None = None
    failures: list[_Failure] = []
    first_failure_at = 0.0
    departed_at = 0.0
    while True:
        now = time.monotonic()
        for job in jobs:  # plan order: failures seen in one sweep keep it
            code = job.proc.poll()
            if code and all(f.job is not job for f in failures):
                what = _describe_status(code)
                failures.append(_Failure(what, _exit_status(code), job, exited=True))
                first_failure_at = first_failure_at or now
        if watch is not None and not departed_at and (gone := watch.departed()):
            failures.append(_Failure(gone[0].sentence, 1, departed=True))
            departed_at = now
        if failures:
            # Give the others a moment to fail by themselves: the cause may be among them.
            over = (now - first_failure_at >= failure_grace if first_failure_at
                    else now - departed_at >= max(failure_grace, rank_watch.DEPARTURE_GRACE))
            if over or all(j.proc.returncode is not None for j in jobs):
                return failures
            time.sleep(POLL_INTERVAL)
            continue
        running = [j for j in clusters if j.proc.returncode is None]
        forwarders_left = [j for j in forwarders if j.proc.returncode is None]
        if not running:
            if not forwarders_left:
                return []
            clusters_done_at = clusters_done_at or now
            if now - clusters_done_at > shutdown_grace:
                job = forwarders_left[0]
                what = f"did not exit within {shutdown_grace:g} s after the clusters finished"
                return [_Failure(what, 1, job)]
        elif len(forwarders_left) < len(forwarders):
            # A forwarder that exits 0 right after the clusters disconnected races with their
            # mpiexec's exit; only a cluster still running after the grace period is a failure.
            forwarder_gone_at = forwarder_gone_at or now
            if now - forwarder_gone_at > early_exit_grace:
                job = next(j for j in forwarders if j.proc.returncode is not None)
                what = (
                    f"exited with status {job.proc.returncode} while cluster "
                    f"{running[0].launch.name!r} was still running"
                )
                return [_Failure(what, 1, job)]
        time.sleep(POLL_INTERVAL)


def _describe_status(code: int) -> str:
    if code < 0:
        try:
            return f"was killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with status {code}"


def _exit_status(code: int) -> int:
    """Map a returncode to an exit status the way shells do: killed by signal N gives 128 + N."""
    return 128 - code if code < 0 else code


def _stop(jobs: list[_Job], term_grace: float) -> None:
    """SIGTERM the groups still running, wait up to `term_grace` s, then SIGKILL every group."""
    live = [j for j in jobs if j.proc.poll() is None]
    for job in live:
        job.stopping.set()
        _signal_group(job, signal.SIGTERM)
    deadline = time.monotonic() + term_grace
    while any(j.proc.poll() is None for j in live) and time.monotonic() < deadline:
        time.sleep(0.02)
    # Also the groups whose leader already exited: mpiexec may have left ranks behind.
    for job in jobs:
        _signal_group(job, signal.SIGKILL)
    for job in jobs:
        job.proc.wait()


def _signal_group(job: _Job, signum: int) -> None:
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
