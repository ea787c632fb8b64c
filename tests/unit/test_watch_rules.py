"""The rank watch (launch/_watch.py, mmpi/wire/watch.py) with real processes but no MPI."""
# ruff: noqa: D103  (test names say what they check)

from __future__ import annotations

import os
import signal
import socket
import stat
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from launch import _watch
from launch._diagnose import CONSEQUENCE, DIRECT, UNKNOWN, Finding, JobEnd, Report
from launch._watch import Departure, RankWatch, explain
from launch.plan import CLUSTER, Launch, Plan
from launch.runner import run
from mmpi.errors import BridgeError
from mmpi.wire import proof
from mmpi.wire import rendezvous as R
from mmpi.wire import watch as W

CLUSTERS = {"low": (0, 2), "high": (2, 2)}

# A rank: register as (cluster, argv[4] or 1), print "ready <pid>", then leave as argv[3] says.
RANK = """
import os, signal, subprocess, sys, time
from pathlib import Path
from mmpi.wire import watch
rdv, cluster, how = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
local = int(sys.argv[4]) if len(sys.argv) > 4 else 1
m = watch.register(rdv, cluster, local, os.getpid())
(rdv / f"rank.{cluster}.{local}.pid").write_text(f"{os.getpid()} 3")  # as a rank that joined
child = subprocess.Popen(["sleep", "30"]) if how == "child" else None
print("ready", os.getpid(), child.pid if child else 0, flush=True)
if how == "bye":
    m.leave()
    sys.exit(0)
if how == "os-exit":
    os._exit(0)
if how == "abort":  # what the except hook does before MPI_Abort
    m.aborting()
    os._exit(1)
if how == "abort-slowly":  # the except hook printing a long traceback
    m.aborting()
if how == "done":  # the program has finished; MPI_Finalize waits for the others
    m.finishing()
time.sleep(30)  # "kill", "child": SIGKILLed by the test
"""


def rank(rdv: Path, how: str, cluster: str = "high",
         local: int = 1) -> tuple[subprocess.Popen, list[int]]:
    p = subprocess.Popen([sys.executable, "-c", textwrap.dedent(RANK), str(rdv), cluster, how,
                          str(local)], stdout=subprocess.PIPE, text=True)
    line = p.stdout.readline().split()
    assert line[0] == "ready", line
    return p, [int(x) for x in line[1:]]


def departed(watch: RankWatch, n: int = 1, timeout: float = 10.0) -> list[Departure]:
    deadline = time.monotonic() + timeout
    while len(got := watch.departed()) < n and time.monotonic() < deadline:
        time.sleep(0.005)
    return got


@pytest.fixture
def watch(tmp_path):
    w = RankWatch(R.make_dir(str(tmp_path)), CLUSTERS)
    w.start()
    yield w
    w.close()


@pytest.mark.timeout(30)
@pytest.mark.parametrize("how", ["os-exit", "kill"])
def test_a_rank_that_ends_without_bye_is_seen_at_once(watch, how):
    p, (pid, _) = rank(watch.rendezvous, how)
    if how == "kill":
        os.kill(pid, signal.SIGKILL)
    p.wait()
    gone_at = time.monotonic()
    got = departed(watch)
    assert [(d.vrank, d.cluster, d.local, d.pid) for d in got] == [(3, "high", 1, pid)]
    assert got[0].at - gone_at < 5  # at once; generous for a busy machine
    assert got[0].sentence == (f"rank 3 (high:1, pid {pid}) left without finalizing: "
                               "os._exit or a crash")


@pytest.mark.timeout(30)
@pytest.mark.parametrize("how", ["kill", "bye", "abort"])
def test_a_forwarder_is_watched_as_a_rank_is(tmp_path, how):
    w = RankWatch(R.make_dir(str(tmp_path)), CLUSTERS, forwarders=2)
    w.start()
    try:
        p, (pid, _) = rank(w.rendezvous, how, W.FORWARDER)  # registers as forwarder 1
        if how == "kill":
            os.kill(pid, signal.SIGKILL)
        p.wait()
        got = departed(w, timeout=10.0 if how == "kill" else 0.3)
    finally:
        w.close()
    if how != "kill":  # served and said so, or its own words will say why it failed
        assert got == []
        return
    assert [(d.job, d.forwarder, d.pid) for d in got] == [("fwd1", True, pid)]
    assert got[0].sentence == (f"forwarder 'fwd1' (pid {pid}) ended while the job ran: "
                               "killed or a crash")
    # a forwarder the plan does not have cannot register
    (tmp_path / "b").mkdir()
    w = RankWatch(R.make_dir(str(tmp_path / "b")), CLUSTERS, forwarders=1)
    w.start()
    try:
        with pytest.raises(BridgeError, match="forwarder 1 could not reach"):
            W.register(w.rendezvous, W.FORWARDER, 1, os.getpid(), timeout=2.0)
    finally:
        w.close()


@pytest.mark.timeout(30)
def test_a_rank_that_said_bye_may_exit(watch):
    p, _ = rank(watch.rendezvous, "bye")
    assert p.wait() == 0
    time.sleep(0.2)
    assert watch.departed() == []


@pytest.mark.timeout(30)
def test_a_rank_that_aborts_is_left_to_hydra(watch):
    p, _ = rank(watch.rendezvous, "abort")
    assert p.wait() == 1
    time.sleep(0.2)
    assert watch.departed() == []


@pytest.mark.timeout(30)
def test_ranks_that_leave_after_an_abort_notice_are_its_consequences(watch):
    aborting, (pid, _) = rank(watch.rendezvous, "abort-slowly", "low")
    try:
        mate, _ = rank(watch.rendezvous, "os-exit")  # say, killed by Hydra for that abort
        mate.wait()
        time.sleep(0.2)
        assert watch.departed() == []
    finally:
        os.kill(pid, signal.SIGKILL)
        aborting.wait()


@pytest.mark.timeout(30)
def test_the_order_in_which_ranks_say_they_fail_is_kept(watch):
    procs = []
    try:
        for cluster, local in [("high", 1), ("low", 0)]:
            procs.append(rank(watch.rendezvous, "abort-slowly", cluster, local))
            deadline = time.monotonic() + 10
            while len(watch.failing()) < len(procs) and time.monotonic() < deadline:
                time.sleep(0.005)
        assert watch.failing() == [("high", 1), ("low", 0)]
    finally:
        for p, (pid, _) in procs:
            os.kill(pid, signal.SIGKILL)
            p.wait()


@pytest.mark.timeout(30)
def test_a_cluster_is_finished_once_every_rank_said_done(tmp_path):
    # The runner stops waiting for a cluster to fail by itself once every rank of it has
    # finished its program; a rank still in it keeps its cluster from being finished.
    w = RankWatch(R.make_dir(str(tmp_path)), {"low": (0, 2), "high": (2, 2)}, forwarders=1)
    w.start()
    procs = []
    try:
        procs.append(rank(w.rendezvous, "done", "low", 0))
        procs.append(rank(w.rendezvous, "kill", "high", 0))
        procs.append(rank(w.rendezvous, "done", "high", 1))
        time.sleep(0.2)
        assert w.finished_clusters() == set()  # low:1 has not said it
        procs.append(rank(w.rendezvous, "done", "low", 1))
        deadline = time.monotonic() + 2
        while not w.finished_clusters() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert w.finished_clusters() == {"low"}
        forwarder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(RANK),
                                      str(w.rendezvous), W.FORWARDER, "os-exit", "0"],
                                     stdout=subprocess.PIPE, text=True)
        assert forwarder.stdout.readline().startswith("ready")
        forwarder.wait()
        assert departed(w)[0].forwarder
        assert w.finished_clusters() == set()  # a forwarder gone: the runner weighs that
    finally:
        for p, (pid, _) in procs:
            if p.poll() is None:
                os.kill(pid, signal.SIGKILL)
            p.wait()
        w.close()


@pytest.mark.timeout(30)
def test_a_child_does_not_keep_a_dead_rank_registered(watch):
    p, (pid, child) = rank(watch.rendezvous, "child")
    try:
        os.kill(pid, signal.SIGKILL)
        p.wait()
        assert [d.pid for d in departed(watch)] == [pid]
    finally:
        os.kill(child, signal.SIGKILL)


def _raw(watch: RankWatch) -> socket.socket:
    path = (watch.rendezvous / R.WATCH_FILE).read_text().split()[0].removeprefix("unix:")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(5)
    s.connect(path)
    return s


def _closed(s: socket.socket) -> bool:
    try:
        while data := s.recv(100):
            if b"ok" in data:
                return False
        return True
    except ConnectionResetError:
        return True


@pytest.mark.timeout(30)
@pytest.mark.parametrize("claim", [
    lambda secret, nonce: W.claim("0" * 32, nonce, "high", 1, 99),  # without the secret
    lambda secret, nonce: W.claim(secret, "f" * 32, "high", 1, 99),  # an old challenge
    lambda secret, nonce: W.claim(secret, nonce, "high", 2, 99),  # no such rank
    lambda secret, nonce: W.claim(secret, nonce, "mid", 0, 99),  # no such cluster
    lambda secret, nonce: b"x" * 2000,  # no line at all
    lambda secret, nonce: b"bye\n",
])
def test_a_stranger_can_fake_no_departure(watch, claim):
    s = _raw(watch)
    nonce = s.recv(100).decode().split()[-1]
    s.sendall(claim(R.read_secret(watch.rendezvous), nonce))
    assert _closed(s)
    s.close()
    time.sleep(0.1)
    assert watch.departed() == []


@pytest.mark.timeout(30)
def test_a_silent_connection_is_dropped(tmp_path, monkeypatch):
    monkeypatch.setattr(_watch, "PROOF_TIMEOUT", 0.2)
    w = RankWatch(R.make_dir(str(tmp_path)), CLUSTERS)
    w.start()
    try:
        s = _raw(w)
        t0 = time.monotonic()
        assert s.recv(100).startswith(W.GREETING.encode())
        assert _closed(s)
        assert time.monotonic() - t0 < 2
        s.close()
        assert w.departed() == []
    finally:
        w.close()


@pytest.mark.timeout(30)
def test_the_watch_is_private_and_leaves_nothing_open(tmp_path):
    fds = len(os.listdir("/proc/self/fd"))
    threads = threading.active_count()
    rdv = R.make_dir(str(tmp_path))
    w = RankWatch(rdv, CLUSTERS)
    w.start()
    assert stat.S_IMODE((rdv / R.WATCH_FILE).stat().st_mode) == 0o600
    assert stat.S_IMODE((rdv / _watch.SOCKET_NAME).stat().st_mode) == 0o600
    m = W.register(rdv, "low", 0, os.getpid())
    assert m is not None and m.address.startswith("unix:")
    w.close()
    m.leave()  # mmpi-run gone first: no error
    w.close()  # idempotent
    assert len(os.listdir("/proc/self/fd")) == fds
    assert threading.active_count() == threads


@pytest.mark.timeout(30)
def test_remote_jobs_are_watched_over_tcp_too(tmp_path):
    rdv = R.make_dir(str(tmp_path))
    w = RankWatch(rdv, CLUSTERS, remote=True)
    w.start()
    try:
        unix, tcp = (rdv / R.WATCH_FILE).read_text().split()
        host = socket.gethostname()
        assert unix.startswith("unix:") and tcp == f"tcp:{host}:{tcp.split(':')[-1]}"
        try:
            socket.getaddrinfo(host, None)
        except OSError:
            pytest.skip(f"this host's name {host!r} does not resolve")
        (rdv / R.WATCH_FILE).write_text(tcp)  # as a rank on another host sees it
        m = W.register(rdv, "high", 0, 1234)
        assert m is not None and m.address.startswith("tcp:")
        m.sock.close()  # gone without a word
        assert [(d.vrank, d.pid) for d in departed(w)] == [(2, 1234)]
    finally:
        w.close()


def test_register_without_a_watch_and_with_a_dead_one(tmp_path):
    rdv = R.make_dir(str(tmp_path))
    assert W.register(rdv, "low", 0, 1) is None  # jobs started by hand are not watched
    R.write_atomic(rdv / R.WATCH_FILE, f"unix:{rdv}/nothing.sock\n")
    with pytest.raises(BridgeError, match="could not reach mmpi-run's rank watch"):
        W.register(rdv, "low", 0, 1)


def test_the_proof_binds_the_rank_and_its_pid():
    secret, nonce = "ab" * 16, proof.nonce()
    cluster, local, pid, answer = W.parse_claim(W.claim(secret, nonce, "low", 1, 42).strip())
    assert (cluster, local, pid) == ("low", 1, 42)
    assert proof.check(secret, answer, proof.WATCH, nonce, "low", 1, 42)
    assert not proof.check(secret, answer, proof.WATCH, nonce, "low", 1, 43)


# -- the report ----------------------------------------------------------------------------

D2 = Departure(2, "high", 0, 1234, 1.0)
D3 = Departure(3, "high", 1, 1235, 1.1)
SHOWN = ("high", 7)


def report(who: str, what: str, directness: int, status: int = 137,
           how: str = "exited with status 9") -> Report:
    end = JobEnd("high", CLUSTER, status, how)
    return Report(Finding(end, who, what, directness, f"{who} {what}", status), ())


def test_hydra_and_the_ranks_say_more_than_the_watch():
    r = report("rank 2 (high:0, pid 1234)", "was killed by signal 9 (SIGKILL)", DIRECT)
    assert explain([D2, D3], r, SHOWN) == (r.lines, 137, r.headline, SHOWN)


def test_the_first_departure_beats_a_cluster_mate_that_hydra_killed_after_it():
    r = report("rank 3 (high:1, pid 1235)", "was killed by signal 9 (SIGKILL)", DIRECT)
    lines, status, headline, shown = explain([D2, D3], r, SHOWN)
    assert lines == [D2.sentence, "then rank 3 (high:1) left too", f"then {r.lines[0]}"]
    assert (status, headline, shown) == (1, "rank 2 (high:0) left without finalizing",
                                         ("high", 0))


def test_an_exception_beats_the_order_of_departures():
    # ranks that raise abort in any order; what they said is the report
    r = report("rank 3 (high:1, pid 1235)", "raised RuntimeError: ...", DIRECT, 1)
    assert explain([D2, D3], r, SHOWN) == (r.lines, 1, r.headline, SHOWN)


def test_a_killed_forwarder_beats_the_ranks_that_went_down_with_it():
    fwd = Departure(-1, W.FORWARDER, 0, 77, 1.0)
    r = report("rank 2 (high:0, pid 1234)", "left without finalizing", UNKNOWN, 1)
    lines, status, headline, shown = explain([fwd, D2], r, SHOWN)
    assert lines[:2] == [fwd.sentence, "then rank 2 (high:0) left too"]
    assert (status, headline, shown) == (1, "forwarder 'fwd0' ended while the job ran",
                                         ("fwd0", None))


def test_a_departure_beats_a_consequence_or_nothing():
    r = report("forwarder 'fwd0' (pid 99)", "aborted after losing rank 2", CONSEQUENCE)
    assert explain([D2], r, SHOWN)[0] == [D2.sentence, f"then {r.lines[0]}"]
    # the runner's own failure for the departure is not repeated
    r = report("cluster 'high'", D2.sentence, UNKNOWN, 1, how=D2.sentence)
    assert explain([D2], r, SHOWN) == ([D2.sentence], 1, D2.short, ("high", 0))


def test_a_departure_the_report_explains_is_no_cause():
    # rank 2 SIGKILLed; the forwarder, copying from its cluster-mate, aborted: on a busy
    # machine the forwarder's socket may close before the killed rank's
    fwd = Departure(-1, W.FORWARDER, 0, 77, 1.0)
    end = JobEnd("high", CLUSTER, 137, "exited with status 9")
    cause = Finding(end, "rank 2 (high:0, pid 1234)", "was killed by signal 9 (SIGKILL)",
                    DIRECT, "rank 2 (high:0) was killed by signal 9 (SIGKILL)", 137)
    aborted = Finding(JobEnd("fwd0", "forwarder", 134, "exited with status 6"),
                      "forwarder 'fwd0' (pid 77)", "aborted (SIGABRT, exit status 6) after "
                      "losing rank 3 (high:1, pid 1235)", CONSEQUENCE, "...", 134)
    r = Report(cause, (aborted,))
    assert explain([fwd, D2, D3], r, SHOWN) == (r.lines, 137, r.headline, SHOWN)


# -- in the runner -------------------------------------------------------------------------

@pytest.mark.timeout(30)
def test_the_runner_ends_a_job_whose_rank_left(tmp_path, capsys):
    rdv = R.make_dir(str(tmp_path))
    code = textwrap.dedent(RANK)
    plan = Plan((
        Launch("low", CLUSTER, (sys.executable, "-c", "import time; time.sleep(30)"), {}, 2, 0),
        Launch("high", CLUSTER, (sys.executable, "-c", code, str(rdv), "high", "os-exit"),
               {}, 2, 2),
    ))
    t0 = time.monotonic()
    assert run(plan, rendezvous=rdv) == 1
    assert time.monotonic() - t0 < 10
    err = capsys.readouterr().err
    assert "mmpi-run: rank 3 (high:1, pid " in err
    assert "left without finalizing: os._exit or a crash; stopping the other jobs" in err
    assert not rdv.exists()


def test_a_forwarder_killed_by_a_signal_is_no_consequence_of_a_rank_that_crashed_with_it():
    # UCX aborts a rank whose peer vanished mid-copy: it may be seen leaving first
    fwd = Departure(-1, W.FORWARDER, 0, 77, 1.1)
    r = report("forwarder 'fwd0' (pid 77)", "was killed by signal 9 (SIGKILL)", DIRECT)
    assert explain([D2, fwd], r, SHOWN) == (r.lines, 137, r.headline, SHOWN)
