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

- A rank that raised ``RankGone`` or says it lost the forwarder failed because another process
  did. When the forwarder it lost has not failed by itself, the forwarder's state (from /proc,
  read by the runner) says why: stopped (SIGSTOP), gone, or running but silent (wedged).
- An MPICH message that ends in ``error stack:`` is summed up from the stack that follows: the
  call that failed (pointers left out) and the innermost entry, which names the error.

Rule: a failure's *directness* decides the order (something done to or by the process itself,
then a crash, then a failure explained by the loss of another process); ties go to the rank that
said first that it fails (the rank watch hears each rank's "abort" before its MPI_Abort), then
to the job that exited first, then to clusters before forwarders. Within one job too: a rank
that raised RankGone because another left is never the cause while that other's own words are
there. A rank of a job still running when mmpi-run stopped it (its cluster's mpiexec slower to
report than the others) counts by its words like any other. The first one is reported as the
cause, the other failed jobs after it, and every other rank that failed in one line; a message
is given in full once (the others' same words, and the recap, name only the exception).
A process killed by signal N gives mmpi-run's status 128 + N, as in the shell (Hydra's own
exit status is N); a forwarder that failed otherwise gives ``_status.NOT_BRIDGED``.
No I/O here (the pid files are read by `hygiene.read_pids`), so it is unit-tested on text.
"""

from __future__ import annotations

import re
import signal
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from . import _status
from ._console import BARE_FRAME
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
_ABORT = re.compile(r"Abort\((-?\d+)\) on node \d+ \(rank (\d+) in comm (\d+)\):? ?(.*)")
_SYS_EXIT = re.compile(r"mmpi: rank \d+ \(\w+:(\d+)\) called (sys\.exit\(.*?\)) before")
# "lost the forwarder: ..." (one forwarder) or "lost forwarder 1: ..." (several)
_LOST_FORWARDER = re.compile(r"\blost (?:the forwarder|forwarder (\d+))\b")
# Exceptions that say another process failed first.
_CONSEQUENCE_ERRORS = re.compile(r"(?:\w+\.)*(?:RankGone|ForwarderLost)\b")
_ERROR_STACK = ", error stack:"
_STACK_ENTRY = re.compile(r"(\w+)\(\d+\)\.*: ?(.*)")  # "MPIR_Wait(745)......: message"
_CALL = re.compile(r"(\w+)\((.*)\) failed")  # "MPI_Test(request=0x7f.., status=0x1) failed"
_POINTER_ARG = re.compile(r"\w+=(?:0x[0-9a-fA-F]+|\(nil\))")
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
    abort_texts: dict[int, str] = field(default_factory=dict)  # "Fatal error in ..."
    exceptions: dict[int | None, str] = field(default_factory=dict)  # rank -> "Error: text"
    exits: dict[int, str] = field(default_factory=dict)  # local rank -> "sys.exit(3)"
    # rank -> index of the forwarder it lost
    lost_forwarder: dict[int | None, int] = field(default_factory=dict)
    # MPICH "error stack" entries after a rank's exception ("raised", rank) or abort line
    # ("abort", rank): (function, message)
    stacks: dict[tuple[str, int | None], list[tuple[str, str]]] = field(default_factory=dict)
    lost_pids: list[int] = field(default_factory=list)  # pids UCX could no longer reach
    # pid -> local rank, from UCX log lines a rank printed (it may die before its pid file)
    rank_pids: dict[int, int] = field(default_factory=dict)
    # (stream, rank) inside a traceback: stdout lines of that rank may come in between.
    _in_traceback: set[tuple[str, int | None]] = field(default_factory=set)
    # (stream, rank) after "..., error stack:" -> the key in `stacks` its entries go to
    _in_stack: dict[tuple[str, int | None], tuple[str, int | None]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def feed(self, rank: int | None, text: str, stream: str = "stderr") -> None:
        """Take one output line of the job; `rank` is the local rank that printed it, if known."""
        with self._lock:
            self._feed(rank, text, stream)

    def exception(self, rank: int | None) -> str | None:
        """What `rank` raised ("Error: text"), an MPICH error stack summed up in one line."""
        text = self.exceptions.get(rank)
        return None if text is None else _with_stack(text, self.stacks.get(("raised", rank), ()))

    def abort_text(self, rank: int) -> str | None:
        """The message of `rank`'s abort line, if it has one beyond MPI_Abort's own."""
        text = self.abort_texts.get(rank)
        return None if text is None else _with_stack(text, self.stacks.get(("abort", rank), ()))

    def _feed(self, rank: int | None, text: str, stream: str) -> None:
        if (stream, rank) in self._in_stack:
            if m := _STACK_ENTRY.fullmatch(text):
                owner = self._in_stack[(stream, rank)]
                self.stacks.setdefault(owner, []).append((m[1], m[2].strip()))
                return
            del self._in_stack[(stream, rank)]
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
            if local is not None and local not in self.aborts:
                self.aborts[local] = int(m[1])
                if m[4] and not m[4].startswith("application called MPI_Abort"):
                    self.abort_texts[local] = m[4]
                    self._expect_stack(stream, rank, ("abort", local), m[4])
            return
        if m := _SYS_EXIT.search(text):
            self.exits.setdefault(int(m[1]) if rank is None else rank, m[2])
            return
        if rank is not None and (m := _UCX_PID.match(text)):
            self.rank_pids.setdefault(int(m[1]), rank)
        if m := _LOST_PID.search(text):
            self.lost_pids.append(int(m[1]))
        if m := _LOST_FORWARDER.search(text):
            self.lost_forwarder.setdefault(rank, int(m[1] or 0))
        if text == _TRACEBACK or (BARE_FRAME.fullmatch(text)
                                  and (stream, rank) not in self._in_traceback):
            self._in_traceback.add((stream, rank))
        elif (stream, rank) in self._in_traceback and text and not text.startswith(" "):
            # The first unindented line after the frames is "ExceptionType: message".
            self._in_traceback.discard((stream, rank))
            self.exceptions[rank] = text
            self._expect_stack(stream, rank, ("raised", rank), text)

    def _expect_stack(
        self, stream: str, label: int | None, key: tuple[str, int | None], text: str
    ) -> None:
        """After `text`, lines labelled `label` may be an MPICH error stack, kept as `key`."""
        self.stacks.pop(key, None)
        if text.endswith(_ERROR_STACK):
            self._in_stack[(stream, label)] = key


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
    vranks: tuple[int, ...] = ()  # of each local rank, under a rank map (else from first_vrank)
    running: bool = False  # still running when mmpi-run stopped it (its ranks may have failed)

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
    status: int = 1  # mmpi-run's exit status if this is the cause
    rank: tuple[str, int] | None = None  # (cluster, local rank) when a rank is named
    said: str | None = None  # the exception line the rank printed, when `what` quotes it

    @property
    def sentence(self) -> str:
        """The whole report line, naming the process and, if different, its job."""
        text = f"{self.who} {self.what}"
        # the job is the process, or it was still running (mmpi-run stopped it): nothing to add
        if self.who.startswith(self.end.job) or self.end.running:
            return text
        return f"{text}; {self.end.job} {self.end.how}"


@dataclass(frozen=True)
class RankEnd:
    """A rank that failed besides the cause, in its own words."""

    vrank: int
    cluster: str
    local: int
    what: str  # "raised mmpi.errors.RankGone: Barrier on rank 0: ..."
    consequence: bool  # it says another process failed first

    @property
    def who(self) -> str:
        """The rank as the report names it: "rank 2 (high:0)"."""
        return f"rank {self.vrank} ({self.cluster}:{self.local})"

    @property
    def gist(self) -> str:
        """`what` without the message: "raised RankGone"."""
        return _gist(self.what)


@dataclass(frozen=True)
class Report:
    """The cause first, then the other failed jobs, then the other ranks that failed."""

    cause: Finding
    consequences: tuple[Finding, ...]
    others: tuple[RankEnd, ...] = ()

    @property
    def lines(self) -> list[str]:
        """Lines for mmpi-run to print, in order."""
        lines = [self.cause.sentence]
        lines += [f"then {f.sentence}" for f in self.consequences if f.rank is None]
        if self.others:
            lines.append(self.others_line)
        return lines

    @property
    def others_line(self) -> str:
        """One line for every other rank that failed: the first in full, the rest in short."""
        n = len(self.others)
        why = "as a consequence" if all(r.consequence for r in self.others) else "too"
        other = " other" if self.cause.rank is not None else ""
        line = f"{n}{other} rank{'s' if n > 1 else ''} failed {why}: "
        # The first in full, unless it said what the cause said (given once is enough).
        first = self.others[0]
        full = first.what != self.cause.what
        gists: dict[str, list[str]] = {}
        for r in self.others[1:] if full else self.others:
            gists.setdefault(r.gist, []).append(r.who)
        parts = [f"{first.who} {first.what}"] if full else []
        parts += [f"{', '.join(who)} {gist}" for gist, who in gists.items()]
        return line + "; ".join(parts)

    @property
    def status(self) -> int:
        """mmpi-run's exit status."""
        return self.cause.status

    @property
    def headline(self) -> str:
        """The cause in a few words."""
        return self.cause.short

    @property
    def cause_rank(self) -> tuple[str, int] | None:
        """(cluster, local rank) of the cause, when it is a rank."""
        return self.cause.rank


def diagnose(
    ends: Sequence[JobEnd],
    pids: Pids = NO_PIDS,
    *,
    stopped: Sequence[JobEnd] = (),
    forwarder_states: Mapping[int, str | None] | None = None,
    failing: Sequence[tuple[str, int]] = (),
) -> Report:
    """Explain the failed jobs `ends` (at least one) and pick the cause.

    `stopped` are the jobs still running when the failure was seen (their ranks may have
    failed too). `forwarder_states` maps a forwarder's index to its process state letter
    (None: gone), for the forwarders the ranks say they lost. `failing` are (cluster, local
    rank) of the ranks in the order they said they fail (the rank watch's "abort").
    """
    if not ends:
        raise ValueError("diagnose: no failed job")
    said_first: dict[tuple[str, int], int] = {}
    for rank in failing:
        said_first.setdefault(rank, len(said_first))

    def first(rank: tuple[str, int] | None) -> int:
        return said_first.get(rank, len(said_first)) if rank is not None else len(said_first)

    findings = [_explain(end, pids, first) for end in ends]
    # A job still running may hold the cause: its mpiexec reports later than the others'.
    for end in stopped:
        if end.role == CLUSTER and end.evidence is not None:
            end = replace(end, order=len(ends))  # after those that ended, should all else tie
            if (said := _said(end, end.evidence, pids, first)) is not None:
                findings.append(said)
    findings += _lost_forwarders(ends, stopped, pids, forwarder_states or {})
    ranked = sorted(
        findings,
        key=lambda f: (f.directness, first(f.rank), f.end.order, f.end.role != CLUSTER),
    )
    cause = ranked[0]
    return Report(cause, tuple(ranked[1:]), _other_ranks([*ends, *stopped], ranked, pids))


First = Callable[["tuple[str, int] | None"], int]  # a rank's place in the order of failing


def _explain(end: JobEnd, pids: Pids, first: First) -> Finding:
    ev = end.evidence
    if ev is None:
        return Finding(end, end.job, end.how, UNKNOWN, f"{end.job} {end.how}", end.status)
    if end.role == CLUSTER:
        return _explain_cluster(end, ev, pids, first)
    return _explain_forwarder(end, ev, pids)


def _vrank(end: JobEnd, local: int, pids: Pids) -> int:
    known = pids.ranks.get((end.name, local))
    if known:
        return known[1]
    return end.vranks[local] if local < len(end.vranks) else end.first_vrank + local


def _rank_names(end: JobEnd, pids: Pids, local: int, pid: int | None = None) -> tuple[str, str]:
    """A rank of `end` as a report names it: with its pid (when known), and without."""
    known = pids.ranks.get((end.name, local))
    short = f"rank {_vrank(end, local, pids)} ({end.name}:{local})"
    pid = pid if pid is not None else (known[0] if known else None)
    return (f"{short[:-1]}, pid {pid})" if pid else short), short


def _explain_cluster(end: JobEnd, ev: Evidence, pids: Pids, first: First) -> Finding:
    c = end.name

    def finding(local: int | None, what: str, directness: int, status: int = end.status,
                pid: int | None = None, who: str | None = None) -> Finding:
        if local is None:
            assert who is not None
            return Finding(end, who, what, directness, f"{who} {what}", status)
        full, short = _rank_names(end, pids, local, pid)
        return Finding(end, full, what, directness, f"{short} {_gist(what)}", status, (c, local))

    # A rank that reported losing the forwarder is a consequence, whatever it did next.
    lost = ev.lost_forwarder
    # 1. Hydra's banner: the first process of the job that ended badly, by pid - unless the
    # ranks' own words say more (an exception, sys.exit: the banner says only "exit code 1").
    if ev.banner_pid is not None:
        owner = pids.rank_of(ev.banner_pid, c)
        local: int | None = owner[1] if owner else ev.rank_pids.get(ev.banner_pid)
        if ev.banner_signal is None and (said := _said(end, ev, pids, first)) is not None:
            # Its own words (a rank that failed before joining the bridge has no pid file),
            # or a cluster-mate's when its own say that another failed first.
            if (local is None or said.rank == (c, local)
                    or (local in _rank_words(ev) and _directness(ev, local) == CONSEQUENCE)):
                return said
        status = end.status
        if ev.banner_signal is not None:
            what = f"was killed by {_signal_name(ev.banner_signal)}"
            directness = DIRECT if ev.banner_signal in _SENT_SIGNALS else CRASH
            status = _status.killed(ev.banner_signal)
        else:
            what = f"exited with status {ev.banner_exit}"
            directness = DIRECT
        if local in lost or (local is None and lost):
            directness = CONSEQUENCE
            what += " after losing the forwarder"
        if local is not None:
            return finding(local, what, directness, status, ev.banner_pid)
        who = f"a rank of {end.job} (pid {ev.banner_pid} on {ev.banner_host})"
        return finding(None, what, directness, status, who=who)
    # 2.-3. MPI_Abort (mmpi's except or exit hook), a traceback, an exit message.
    if (said := _said(end, ev, pids, first)) is not None:
        return said
    directness = CONSEQUENCE if lost else UNKNOWN
    return Finding(end, end.job, end.how, directness, f"{end.job} {end.how}", end.status)


def _said(end: JobEnd, ev: Evidence, pids: Pids, first: First) -> Finding | None:
    """The rank of `end` whose own words name the cause, if any rank said why it failed.

    The most direct (not one that says another process failed first), then the first to say
    it fails (`first`), then the lowest local rank.
    """
    said = _rank_words(ev)
    if not said:
        return None
    local = min(said, key=lambda r: (_directness(ev, r), first((end.name, r)), r))
    what = said[local]
    full, short = _rank_names(end, pids, local)
    status = end.status if not end.running else _words_status(ev, local)
    text = ev.exceptions.get(local) if what.startswith("raised ") else None
    return Finding(end, full, what, _directness(ev, local), f"{short} {_gist(what)}", status,
                   (end.name, local), text)


def _words_status(ev: Evidence, local: int) -> int:
    """The status a rank's own words give its job (its job was stopped before it could)."""
    if local in ev.exits:
        code = ev.exits[local].removeprefix("sys.exit(").removesuffix(")")
        return (int(code) % 256 or 1) if code.lstrip("-").isdigit() else 1
    return ev.aborts.get(local, 1) % 256 or 1


def _rank_words(ev: Evidence) -> dict[int, str]:
    """What each rank of the job said about its end: "raised ...", "called sys.exit(3)"."""
    said: dict[int, str] = {}
    for local in sorted({*ev.aborts, *ev.exits, *(r for r in ev.exceptions if r is not None)}):
        if local in ev.exits:
            said[local] = f"called {ev.exits[local]}"
        elif (text := ev.exception(local)) is not None:
            said[local] = f"raised {text}"
        elif (text := ev.abort_text(local)) is not None:
            said[local] = f"aborted: {text}"
        else:
            said[local] = f"called MPI_Abort (code {ev.aborts[local]})"
    return said


def _directness(ev: Evidence, local: int) -> int:
    if local in ev.lost_forwarder:
        return CONSEQUENCE
    text = ev.exceptions.get(local, "")
    return CONSEQUENCE if _CONSEQUENCE_ERRORS.match(text) else DIRECT


def _explain_forwarder(end: JobEnd, ev: Evidence, pids: Pids) -> Finding:
    who = end.job
    if ev.banner_pid is not None:
        who = f"{end.job} (pid {ev.banner_pid})"
    status = _status.NOT_BRIDGED
    if ev.banner_signal == signal.SIGABRT:
        what = f"aborted (SIGABRT, exit status {end.status})"
        directness = CRASH
        status = _status.killed(ev.banner_signal)
    elif ev.banner_signal is not None:
        what = f"was killed by {_signal_name(ev.banner_signal, end.status)}"
        directness = DIRECT if ev.banner_signal in _SENT_SIGNALS else CRASH
        status = _status.killed(ev.banner_signal)
    else:
        what = end.how
        directness = UNKNOWN
        if end.status >= 128:  # mpiexec itself was killed: the runner made it 128 + N
            status = end.status
    for pid in ev.lost_pids:
        owner = pids.rank_of(pid)
        if owner is not None:
            c, local, vrank = owner
            what += f" after losing rank {vrank} ({c}:{local}, pid {pid})"
        else:
            what += f" after losing contact with process {pid}"
        directness = CONSEQUENCE
        break
    return Finding(end, who, what, directness, f"{end.job} {what}", status)


def _lost_forwarders(
    ends: Sequence[JobEnd],
    stopped: Sequence[JobEnd],
    pids: Pids,
    states: Mapping[int, str | None],
) -> list[Finding]:
    """The forwarders ranks say they lost that did not fail by themselves: why they are silent."""
    failed = {end.name for end in ends if end.role == FORWARDER}
    lost: dict[int, int] = {}  # forwarder index -> order of the first job that lost it
    for end in ends:
        if end.evidence is not None:
            for index in end.evidence.lost_forwarder.values():
                lost.setdefault(index, end.order)
    for end in stopped:
        if end.evidence is not None:
            for index in end.evidence.lost_forwarder.values():
                lost.setdefault(index, len(ends))
    findings = []
    for index, order in sorted(lost.items()):
        name = f"fwd{index}"
        pid = pids.forwarders.get(index)
        if name in failed or pid is None or index not in states:
            continue
        state = states[index]
        if state in ("T", "t"):
            what, directness = "is stopped (SIGSTOP): it stopped answering", DIRECT
        elif state is None:
            what, directness = "is gone: it stopped answering", CRASH
        else:
            what = "is still running but stopped answering (wedged)"
            directness = CRASH
        end = JobEnd(name, FORWARDER, _status.NOT_BRIDGED, what, None, 0, order)
        who = f"{end.job} (pid {pid})"
        findings.append(Finding(end, who, what, directness, f"{end.job} {what}", end.status))
    return findings


def _other_ranks(ends: Sequence[JobEnd], ranked: list[Finding], pids: Pids) -> tuple[RankEnd, ...]:
    """Every rank besides the cause that failed, by what it said or what its job's banner did."""
    cause = ranked[0].rank
    found: dict[tuple[str, int], RankEnd] = {}
    for f in ranked[1:]:  # a rank named by a consequence's banner (killed, exited)
        if f.rank is not None and f.rank != cause:
            vrank = _vrank(f.end, f.rank[1], pids)
            found[f.rank] = RankEnd(vrank, *f.rank, f.what, f.directness == CONSEQUENCE)
    for end in ends:
        if end.role != CLUSTER or end.evidence is None:
            continue
        for local, what in _rank_words(end.evidence).items():
            key = (end.name, local)
            if key != cause and key not in found:
                consequence = _directness(end.evidence, local) == CONSEQUENCE
                vrank = _vrank(end, local, pids)
                found[key] = RankEnd(vrank, end.name, local, what, consequence)
    return tuple(sorted(found.values(), key=lambda r: r.vrank))


def _with_stack(text: str, stack: Sequence[tuple[str, str]]) -> str:
    """`text` ("...: Other MPI error, error stack:") with the gist of its MPICH error stack.

    The stack's first entry names the call that failed, its last non-empty one the error.
    """
    if not text.endswith(_ERROR_STACK):
        return text
    text = text.removesuffix(_ERROR_STACK)
    messages = [message for _, message in stack if message]
    call = next((m for m in messages if _CALL.fullmatch(m)), None)
    parts = [text]
    if call is not None:
        name, args = _CALL.fullmatch(call).groups()  # type: ignore[union-attr]
        # Addresses say nothing to the user; counts, datatypes and ops do.
        kept = [a for a in args.split(", ") if not _POINTER_ARG.fullmatch(a)]
        parts.append(f"{name}({', '.join(kept)}) failed")
    if messages and messages[-1] != call:
        parts.append(messages[-1])
    return ": ".join(parts)


def _gist(what: str) -> str:
    """What a process did, without the message: "raised RankGone" (the rest as it is)."""
    if what.startswith("raised "):
        kind = what[len("raised ") :].split(":", 1)[0]
        return f"raised {kind.rsplit('.', 1)[-1]}"
    return what


def _signal_name(signum: int, status: int | None = None) -> str:
    """Name a signal: "signal 9 (SIGKILL)", with a status "signal 9 (SIGKILL, exit status 9)"."""
    try:
        notes = [signal.Signals(signum).name]
    except ValueError:
        notes = []
    if status is not None:
        notes.append(f"exit status {status}")
    return f"signal {signum}" + (f" ({', '.join(notes)})" if notes else "")


__all__ = ["Evidence", "JobEnd", "RankEnd", "Report", "diagnose"]
