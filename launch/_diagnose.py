"""Find the process behind a failure: read what Hydra and the ranks printed, map pids to ranks.

When one rank dies, its whole bridged job comes down in a cascade: Hydra kills the rest of that
cluster, UCX in the forwarder trips over a peer that vanished mid-copy and aborts, ranks of the
other cluster lose the forwarder. The job that mmpi-run sees exit first is often a consequence.
So the runner collects every job that failed within a short grace period and this module ranks
them from their own words:

- Hydra's banner for a job (``=   PID 6718 RUNNING AT vm`` then ``=   EXIT CODE: 9`` or
  ``=   KILLED BY SIGNAL: 9 (Killed)``, and ``... EXIT STRING: Killed (signal 9)``) names the
  first process that ended badly by pid; the rendezvous pid files (``rank.<cluster>.<local>.pid``
  = ``"<pid> <vrank>"``, ``forwarder.<i>.pid`` = ``"<pid>"``) turn the pid into a rank.
- ``Abort(1) on node 1 (rank 1 in comm 0): ...`` names the local rank that called MPI_Abort
  (mmpi's except hook does, after printing the traceback we keep the last line of).
- ``process_vm_readv(pid=6719 ...) ... No such process`` in a forwarder means UCX lost that
  process: the forwarder's failure is a consequence. So is a rank saying it lost the forwarder.

Rule: a failure's *directness* decides the order (something done to or by the process itself,
then a crash, then a failure explained by the loss of another process); ties go to the job that
exited first, then to clusters before forwarders. The first one is reported as the cause.
No I/O here (the pid files are read by `hygiene.read_pids`), so it is unit-tested on text.
"""

from __future__ import annotations

import re
import signal
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

from .hygiene import NO_PIDS, Pids

CLUSTER = "cluster"
FORWARDER = "forwarder"

# Directness of a failure (lower is more likely the cause).
DIRECT = 0  # an exception, sys.exit, MPI_Abort, or a signal somebody sent (SIGKILL, SIGTERM)
CRASH = 1  # the process crashed (SIGSEGV, SIGABRT, ...) with no sign of why
CONSEQUENCE = 2  # it says it lost another process
UNKNOWN = 3  # the job failed and printed nothing we understand

# Signals that come from outside (a user, the OOM killer, a test), not from a crash.
_SENT_SIGNALS = {signal.SIGKILL, signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT}

_BANNER_PID = re.compile(r"=\s+PID (\d+) RUNNING AT (\S+)")
_BANNER_EXIT = re.compile(r"=\s+EXIT CODE: (-?\d+)")
_BANNER_KILLED = re.compile(r"=\s+KILLED BY SIGNAL: (\d+)")
_EXIT_STRING = re.compile(r"YOUR APPLICATION TERMINATED WITH THE EXIT STRING: .*\(signal (\d+)\)")
_ABORT = re.compile(r"Abort\((-?\d+)\) on node \d+ \(rank (\d+) in comm (\d+)\)")
_SYS_EXIT = re.compile(r"mmpi: rank \d+ \(\w+:(\d+)\) called (sys\.exit\(.*?\)) before")
_LOST_FORWARDER = "lost the forwarder"
_LOST_PID = re.compile(r"process_vm_(?:readv|writev)\(pid=(\d+)")
_TRACEBACK = "Traceback (most recent call last):"
# UCX log lines start "[1795263317.010223] [vm:3367 :0]": host, pid, thread of the process.
_UCX_PID = re.compile(r"\[\d+\.\d+\] \[[^\s:\]]+:(\d+)\s*:\d+\]")


@dataclass
class Evidence:
    """What one job printed that tells how it ended; fed line by line by its reader threads."""

    banner_pid: int | None = None
    banner_host: str | None = None
    banner_exit: int | None = None
    banner_signal: int | None = None
    aborts: dict[int, int] = field(default_factory=dict)  # local rank -> MPI_Abort code
    exceptions: dict[int | None, str] = field(default_factory=dict)  # rank -> "Error: text"
    exits: dict[int, str] = field(default_factory=dict)  # local rank -> "sys.exit(3)"
    lost_forwarder: set[int | None] = field(default_factory=set)  # ranks that lost it
    lost_pids: list[int] = field(default_factory=list)  # pids UCX could no longer reach
    # pid -> local rank, from UCX log lines a rank printed (it may die before its pid file)
    rank_pids: dict[int, int] = field(default_factory=dict)
    # (stream, rank) inside a traceback: stdout lines of that rank may come in between.
    _in_traceback: set[tuple[str, int | None]] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def feed(self, rank: int | None, text: str, stream: str = "stderr") -> None:
        """Take one output line of the job; `rank` is the local rank that printed it, if known."""
        with self._lock:
            self._feed(rank, text, stream)

    def _feed(self, rank: int | None, text: str, stream: str) -> None:
        if rank is None and text.startswith("="):
            if m := _BANNER_PID.match(text):
                # Hydra prints one banner per job; keep the first (the first process to fail).
                if self.banner_pid is None:
                    self.banner_pid, self.banner_host = int(m[1]), m[2]
            elif m := _BANNER_EXIT.match(text):
                self.banner_exit = int(m[1]) if self.banner_exit is None else self.banner_exit
            elif m := _BANNER_KILLED.match(text):
                self.banner_signal = int(m[1]) if self.banner_signal is None else self.banner_signal
            return
        if rank is None and (m := _EXIT_STRING.match(text)):
            self.banner_signal = int(m[1]) if self.banner_signal is None else self.banner_signal
            return
        if m := _ABORT.search(text):
            # "rank k in comm 0" is the rank in MPI_COMM_WORLD; otherwise trust the label.
            local = int(m[2]) if m[3] == "0" else rank
            if local is not None:
                self.aborts.setdefault(local, int(m[1]))
            return
        if m := _SYS_EXIT.search(text):
            self.exits.setdefault(int(m[1]) if rank is None else rank, m[2])
            return
        if rank is not None and (m := _UCX_PID.match(text)):
            self.rank_pids.setdefault(int(m[1]), rank)
        if m := _LOST_PID.search(text):
            self.lost_pids.append(int(m[1]))
        if _LOST_FORWARDER in text:
            self.lost_forwarder.add(rank)
        if text == _TRACEBACK:
            self._in_traceback.add((stream, rank))
        elif (stream, rank) in self._in_traceback and text and not text.startswith(" "):
            # The first unindented line after the frames is "ExceptionType: message".
            self._in_traceback.discard((stream, rank))
            self.exceptions[rank] = text


@dataclass(frozen=True)
class JobEnd:
    """A job that failed by itself (not one mmpi-run stopped), with what it printed."""

    name: str  # "high", "fwd0"
    role: str  # CLUSTER or FORWARDER
    status: int  # our exit status for it (the job's, or 128 + N when killed by signal N)
    how: str  # "exited with status 9", "did not exit within 10 s after the clusters finished"
    evidence: Evidence | None = None
    first_vrank: int = 0
    order: int = 0  # when it was seen to end, among the failures

    @property
    def job(self) -> str:
        """The job as the user knows it: "cluster 'high'", "forwarder 'fwd0'"."""
        return f"{self.role} {self.name!r}"


@dataclass(frozen=True)
class Finding:
    """One failure, explained as well as the evidence allows."""

    end: JobEnd
    who: str  # "rank 2 (high:0, pid 6718)", "forwarder 'fwd0' (pid 6719)", "cluster 'high'"
    what: str  # "was killed by signal 9 (SIGKILL)"
    directness: int
    short: str  # for the recap: "rank 2 (high:0) was killed by signal 9"

    @property
    def sentence(self) -> str:
        """The whole report line, naming the process and, if different, its job."""
        text = f"{self.who} {self.what}"
        if self.who.startswith(self.end.job):  # the job is the process: nothing to add
            return text
        return f"{text}; {self.end.job} {self.end.how}"


@dataclass(frozen=True)
class Report:
    """The cause first, then the consequences; the exit status is the cause's."""

    cause: Finding
    consequences: tuple[Finding, ...]

    @property
    def lines(self) -> list[str]:
        """Lines for mmpi-run to print, in order."""
        return [self.cause.sentence, *(f"then {f.sentence}" for f in self.consequences)]

    @property
    def status(self) -> int:
        """mmpi-run's exit status."""
        return self.cause.end.status

    @property
    def headline(self) -> str:
        """The cause in a few words."""
        return self.cause.short


def diagnose(ends: Sequence[JobEnd], pids: Pids = NO_PIDS) -> Report:
    """Explain the failed jobs `ends` (at least one) and pick the cause."""
    if not ends:
        raise ValueError("diagnose: no failed job")
    findings = [_explain(end, pids) for end in ends]
    ranked = sorted(
        findings,
        key=lambda f: (f.directness, f.end.order, f.end.role != CLUSTER),
    )
    return Report(ranked[0], tuple(ranked[1:]))


def _explain(end: JobEnd, pids: Pids) -> Finding:
    ev = end.evidence
    if ev is None:
        return Finding(end, end.job, end.how, UNKNOWN, f"{end.job} {end.how}")
    if end.role == CLUSTER:
        return _explain_cluster(end, ev, pids)
    return _explain_forwarder(end, ev, pids)


def _explain_cluster(end: JobEnd, ev: Evidence, pids: Pids) -> Finding:
    c = end.name

    def rank(local: int, pid: int | None = None) -> tuple[str, str]:
        known = pids.ranks.get((c, local))
        vrank = known[1] if known else end.first_vrank + local
        pid = pid if pid is not None else (known[0] if known else None)
        short = f"rank {vrank} ({c}:{local})"
        return (f"rank {vrank} ({c}:{local}, pid {pid})" if pid else short), short

    def finding(who: tuple[str, str], what: str, directness: int) -> Finding:
        return Finding(end, who[0], what, directness, f"{who[1]} {what}")

    # A rank that reported losing the forwarder is a consequence, whatever it did next.
    lost = ev.lost_forwarder
    # 1. Hydra's banner: the first process of the job that ended badly, by pid.
    if ev.banner_pid is not None:
        owner = pids.rank_of(ev.banner_pid, c)
        local: int | None = owner[1] if owner else ev.rank_pids.get(ev.banner_pid)
        if local is not None:
            who = rank(local, ev.banner_pid)
        else:
            who = (f"a rank of {end.job} (pid {ev.banner_pid} on {ev.banner_host})",) * 2
        if ev.banner_signal is not None:
            what = f"was killed by {_signal_name(ev.banner_signal)}"
            directness = DIRECT if ev.banner_signal in _SENT_SIGNALS else CRASH
        else:
            what = f"exited with status {ev.banner_exit}"
            directness = DIRECT
        if local in lost or (local is None and lost):
            directness = CONSEQUENCE
            what += " after losing the forwarder"
        return finding(who, what, directness)
    # 2. MPI_Abort, called by mmpi's except hook (uncaught exception) or exit hook.
    for local, code in sorted(ev.aborts.items()):
        if local in ev.exits:
            what = f"called {ev.exits[local]}"
        elif local in ev.exceptions:
            what = f"raised {ev.exceptions[local]}"
        else:
            what = f"called MPI_Abort (code {code})"
        directness = CONSEQUENCE if local in lost else DIRECT
        return finding(rank(local), what, directness)
    # 3. A traceback or an exit message without the abort line (Hydra may have lost it).
    for local, text in sorted(ev.exceptions.items(), key=lambda kv: (kv[0] is None, kv[0])):
        if local is not None:
            directness = CONSEQUENCE if local in lost else DIRECT
            return finding(rank(local), f"raised {text}", directness)
    for local, call in sorted(ev.exits.items()):
        return finding(rank(local), f"called {call}", DIRECT)
    directness = CONSEQUENCE if lost else UNKNOWN
    return Finding(end, end.job, end.how, directness, f"{end.job} {end.how}")


def _explain_forwarder(end: JobEnd, ev: Evidence, pids: Pids) -> Finding:
    who = end.job
    if ev.banner_pid is not None:
        who = f"{end.job} (pid {ev.banner_pid})"
    if ev.banner_signal == signal.SIGABRT:
        what = f"aborted (SIGABRT, exit status {end.status})"
        directness = CRASH
    elif ev.banner_signal is not None:
        what = f"was killed by {_signal_name(ev.banner_signal, end.status)}"
        directness = DIRECT if ev.banner_signal in _SENT_SIGNALS else CRASH
    else:
        what = end.how
        directness = UNKNOWN
    for pid in ev.lost_pids:
        owner = pids.rank_of(pid)
        if owner is not None:
            c, local, vrank = owner
            what += f" after losing rank {vrank} ({c}:{local}, pid {pid})"
        else:
            what += f" after losing contact with process {pid}"
        directness = CONSEQUENCE
        break
    return Finding(end, who, what, directness, f"{end.job} {what}")


def _signal_name(signum: int, status: int | None = None) -> str:
    """Name a signal: "signal 9 (SIGKILL)", with a status "signal 9 (SIGKILL, exit status 9)"."""
    try:
        notes = [signal.Signals(signum).name]
    except ValueError:
        notes = []
    if status is not None:
        notes.append(f"exit status {status}")
    return f"signal {signum}" + (f" ({', '.join(notes)})" if notes else "")


__all__ = ["Evidence", "JobEnd", "Report", "diagnose"]
