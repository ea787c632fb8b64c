"""How a running plan is judged: its jobs, their failures, and the loop that watches them.

`wait_for_end` polls the jobs (never spinning: two cores) until every cluster and then every
forwarder has exited 0, or something failed: a job's non-zero exit, a check's verdict (a rank
that left unfinalized, a cluster that ran as a separate world), a forwarder that outlived the
clusters or left before them. runner.py starts and stops the jobs around it.
"""

from __future__ import annotations

import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from . import _status
from . import _watch as rank_watch
from ._diagnose import Evidence, JobEnd
from .plan import CLUSTER, FORWARDER, Launch

POLL_INTERVAL = 0.05  # seconds between checks of the jobs; 2 cores, so never spin


@dataclass
class Job:
    """One started job: its launch, its process, the threads reading its output."""

    launch: Launch
    proc: subprocess.Popen[bytes]
    readers: list[threading.Thread] = field(default_factory=list)
    evidence: Evidence = field(default_factory=Evidence)  # how it ended, from its output

    @property
    def what(self) -> str:
        return f"{self.launch.role} {self.launch.name!r}"

    def join_readers(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for reader in self.readers:
            reader.join(max(0.0, deadline - time.monotonic()))


@dataclass(frozen=True)
class Failure:
    """Why the run stops early: the job at fault (if any), what happened, our exit status."""

    what: str  # "exited with status 1" (of `job`), "interrupted" (without a job)
    status: int
    job: Job | None = None
    exited: bool = False  # the job ended by itself: its output tells how

    def end(self, order: int) -> JobEnd:
        """Describe this failure for the diagnosis (only failures with a job have one)."""
        assert self.job is not None
        launch = self.job.launch
        evidence = self.job.evidence if self.exited else None
        return JobEnd(
            launch.name, launch.role, self.status, self.what, evidence, launch.first_vrank, order,
            launch.vranks,
        )


Check = Callable[[], "Failure | None"]


def wait_for_end(
    jobs: list[Job],
    early_exit_grace: float,
    shutdown_grace: float,
    failure_grace: float,
    checks: Sequence[Check] = (),
    settled: Callable[[], bool] | None = None,
) -> list[Failure]:
    """Wait until the job succeeds ([]) or fails (every failure within the grace period).

    The grace period ends early once every job has ended, or once `settled()` says that no
    cluster can fail by itself any more.
    """
    clusters = [j for j in jobs if j.launch.role == CLUSTER]
    forwarders = [j for j in jobs if j.launch.role == FORWARDER]
    forwarder_gone_at: float | None = None
    clusters_done_at: float | None = None
    failures: list[Failure] = []
    first_failure_at = 0.0
    while True:
        now = time.monotonic()
        for job in jobs:  # plan order: failures seen in one sweep keep it
            code = job.proc.poll()
            if code and all(f.job is not job for f in failures):
                what = describe_status(code)
                failures.append(Failure(what, exit_status(code), job, exited=True))
                first_failure_at = first_failure_at or now
        if failures:
            # Give the others a moment to fail by themselves: the cause may be among them.
            if (now - first_failure_at >= failure_grace
                    or all(j.proc.returncode is not None for j in jobs)
                    or (settled is not None and settled())):
                return failures
            time.sleep(POLL_INTERVAL)
            continue
        for check in checks:
            if (failure := check()) is not None:
                return [failure]
        running = [j for j in clusters if j.proc.returncode is None]
        forwarders_left = [j for j in forwarders if j.proc.returncode is None]
        if not running:
            if not forwarders_left:
                return []
            clusters_done_at = clusters_done_at or now
            if now - clusters_done_at > shutdown_grace:
                job = forwarders_left[0]
                what = f"did not exit within {shutdown_grace:g} s after the clusters finished"
                return [Failure(what, _status.NOT_BRIDGED, job)]
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
                return [Failure(what, _status.NOT_BRIDGED, job)]
        time.sleep(POLL_INTERVAL)


def settled(jobs: list[Job], watch: rank_watch.RankWatch) -> Callable[[], bool]:
    """Whether no cluster can fail by itself any more.

    Each has exited, or each of its ranks has finished its program (the watch heard "done")
    and waits in MPI_Finalize.
    """
    clusters = [j for j in jobs if j.launch.role == CLUSTER]

    def check() -> bool:
        finished = watch.finished_clusters()
        return all(j.proc.returncode is not None or j.launch.name in finished for j in clusters)

    return check


def departures(jobs: list[Job], watch: rank_watch.RankWatch) -> Check:
    """Fail the run DEPARTURE_GRACE s after the rank watch saw a rank leave unfinalized.

    Meanwhile a job that fails by itself (Hydra reporting a signal or an abort) takes over, and
    its account is weighed against the departure in the report (`rank_watch.explain`).
    """
    by_name = {j.launch.name: j for j in jobs}

    def check() -> Failure | None:
        gone = watch.departed()
        if not gone or time.monotonic() - gone[0].at < rank_watch.DEPARTURE_GRACE:
            return None
        # Status 1: the rank's own status is unknown (os._exit(0) gives 0 to Hydra).
        return Failure(gone[0].sentence, 1, by_name[gone[0].job])

    return check


def separate_worlds(jobs: list[Job], rendezvous: Path) -> Check:
    """Fail a cluster that finished well without a rank joining the bridge: separate worlds.

    Every rank that joins writes its pid file (``rank.<cluster>.<local>.pid``) before it can
    finish, so a cluster gone with status 0 and no such file never joined; and since ranks
    join only once both clusters have, neither did any other rank. The forwarder would wait
    for them until its connect timeout.
    """
    clusters = [j for j in jobs if j.launch.role == CLUSTER]
    total = sum(j.launch.ranks for j in clusters)
    seen: set[str] = set()

    def check() -> Failure | None:
        for job in clusters:
            name = job.launch.name
            if job.proc.returncode != 0 or name in seen:
                continue
            seen.add(name)
            try:
                joined = any(p.name.startswith(f"rank.{name}.") for p in rendezvous.iterdir())
            except OSError:
                joined = True  # cannot tell: let the other checks decide
            if not joined:
                what = (
                    "finished (status 0) but no rank joined the bridge: the job ran as separate "
                    f"worlds, one per cluster, not as one of {total} ranks (take MPI from mmpi, "
                    "or from mpi4py without --no-mpi4py-hook; a program that is not Python "
                    "cannot be bridged)"
                )
                return Failure(what, _status.NOT_BRIDGED, job)
        return None

    return check


def describe_status(code: int) -> str:
    if code < 0:
        try:
            return f"was killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with status {code}"


def exit_status(code: int) -> int:
    """Map a returncode to an exit status the way shells do: killed by signal N gives 128 + N."""
    return 128 - code if code < 0 else code


__all__ = ["POLL_INTERVAL", "Check", "Failure", "Job", "departures", "describe_status",
           "exit_status", "separate_worlds", "wait_for_end"]
