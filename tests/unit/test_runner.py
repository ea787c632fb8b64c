"""Tests of launch.runner with real processes but no MPI: python one-liners stand in for jobs."""
# ruff: noqa: D103  (test names say what they check)

from __future__ import annotations

import os
import re
import signal
import subprocess
import time

import pytest
from hydra_text import BANNER_KILLED, FORWARDER_CRASH
from runner_jobs import (
    AFTER_SLEEPERS,
    M,
    cluster,
    fwd,
    pids,
    py,
    sleeper,
    wait_dead,
)

from launch.plan import CLUSTER, FORWARDER, Launch, Plan
from launch.runner import LaunchError, run

# -- real processes -----------------------------------------------------------------------------


@pytest.mark.timeout(20)
def test_all_succeed(capsys, rendezvous):
    hydra_like = f"""
    import sys
    sys.stdout.write("{M}[0] hel"); sys.stdout.flush()
    sys.stdout.write("{M}[1] from rank 1\\n{M}[0] lo\\n")
    print("not from a rank")
    print("{M}[1] oops", file=sys.stderr)
    """
    plan = Plan(
        (
            fwd("import time; print('forwarder up'); time.sleep(0.3); print('bye')"),
            cluster("low", hydra_like, 2, 0),
            cluster("high", hydra_like, 2, 2),
        )
    )
    assert run(plan, rendezvous=rendezvous) == 0
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert lines.index("[fwd0] forwarder up") < lines.index("[fwd0] bye")
    for name, first in (("low", 0), ("high", 2)):
        assert f"[{name}:0 v{first}] hello" in lines
        assert f"[{name}:1 v{first + 1}] from rank 1" in lines
        assert f"[{name}] not from a rank" in lines
        assert f"[{name}:1 v{first + 1}] oops" in err.splitlines()
    assert len(lines) == 8
    assert not rendezvous.exists()


@pytest.mark.timeout(20)
def test_env_is_merged_over_os_environ(capsys, rendezvous, monkeypatch):
    monkeypatch.setenv("FROM_PARENT", "yes")
    code = "import os; print(os.environ['FROM_PARENT'], os.environ['JOB'])"
    assert run(Plan((cluster("low", code),)), rendezvous=rendezvous) == 0
    assert capsys.readouterr().out == "[low] yes low\n"


@pytest.mark.timeout(20)
def test_one_failure_stops_the_others(capsys, rendezvous, tmp_path):
    files = [tmp_path / "fwd.pid", tmp_path / "low.pid"]
    failing = AFTER_SLEEPERS + "print('boom', file=sys.stderr); sys.exit(3)"
    plan = Plan(
        (
            sleeper("fwd0", FORWARDER, files[0]),
            sleeper("low", CLUSTER, files[1]),
            Launch("high", CLUSTER, py(failing, *map(str, files)), {}, 2, 1),
        )
    )
    start = time.monotonic()
    assert run(plan, rendezvous=rendezvous, term_grace=30) == 3
    assert time.monotonic() - start < 20  # SIGTERM was enough: no wait for SIGKILL
    assert wait_dead(pids(*files)) == []  # the jobs and their grandchildren
    err = capsys.readouterr().err
    message = "mmpi-run: cluster 'high' exited with status 3; stopping the other jobs\n"
    assert message in err
    assert err.index("[high] boom") < err.index(message)
    recap = (
        "mmpi-run: stopped forwarder 'fwd0', cluster 'low' (cluster 'high' exited with status 3)"
    )
    assert err.endswith(recap + "; exit status 3\n")
    assert not rendezvous.exists()


@pytest.mark.timeout(20)
def test_sigterm_is_followed_by_sigkill(capsys, rendezvous, tmp_path):
    pidfile = tmp_path / "stubborn.pid"
    stubborn = f"""
    import os, signal, time
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    open({str(pidfile)!r}, "w").write(str(os.getpid()))
    time.sleep(60)
    """
    failing = AFTER_SLEEPERS + "sys.exit(1)"
    plan = Plan(
        (
            Launch("low", CLUSTER, py(stubborn), {}, 1, 0),
            Launch("high", CLUSTER, py(failing, str(pidfile)), {}, 1, 1),
        )
    )
    start = time.monotonic()
    assert run(plan, rendezvous=rendezvous, term_grace=0.5) == 1
    assert 0.5 <= time.monotonic() - start < 15  # (generous: a busy machine)
    assert wait_dead(pids(pidfile)) == []
    assert "cluster 'high' exited with status 1" in capsys.readouterr().err


@pytest.mark.timeout(20)
def test_hydra_banners_go_to_the_log_only(capsys, rendezvous, tmp_path):
    pidfile = tmp_path / "low.pid"
    banner = [
        "",
        "=" * 83,
        "=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES",
        "=   EXIT CODE: 15",
        "=" * 83,
        "YOUR APPLICATION TERMINATED WITH THE EXIT STRING: Terminated (signal 15)",
        "This typically refers to a problem with your application.",
        "Please see the FAQ page for debugging suggestions",
    ]
    # Like mpiexec: on SIGTERM its ranks' last words, then its own banner, then exit.
    mpiexec_like = f"""
    import os, signal, sys, time
    def stop(*_):
        print("{M}[0] =   a rank's own line")
        print({chr(10).join(banner)!r})
        sys.exit(15)
    signal.signal(signal.SIGTERM, stop)
    open({str(pidfile)!r}, "w").write(str(os.getpid()))
    print(chr(10).join({banner!r}))  # before we stop it: a real message, kept
    time.sleep(60)
    """
    failing = AFTER_SLEEPERS + f"print(chr(10).join({banner!r})); sys.exit(1)"
    plan = Plan(
        (
            cluster("low", mpiexec_like),
            Launch("high", CLUSTER, py(failing, str(pidfile)), {}, 1, 2),
        )
    )
    log = tmp_path / "out.log"
    assert run(plan, rendezvous=rendezvous, log=log) == 1
    # The report says who failed and how: Hydra's banners, of the failed job and of the jobs
    # we stopped, would only bury it.
    assert capsys.readouterr().out.splitlines() == ["[low:0 v0] =   a rank's own line"]
    logged = log.read_text().splitlines()
    assert logged.count("[high] =   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES") == 1
    assert logged.count("[low] =   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES") == 2
    assert "[low:0 v0] =   a rank's own line" in logged


@pytest.mark.timeout(20)
def test_killed_by_signal(capsys, rendezvous):
    code = "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"
    assert run(Plan((cluster("low", code),)), rendezvous=rendezvous) == 128 + signal.SIGKILL
    assert "mmpi-run: cluster 'low' was killed by signal SIGKILL\n" in capsys.readouterr().err


@pytest.mark.timeout(20)
def test_forwarder_exiting_early_is_a_failure(capsys, rendezvous, tmp_path):
    pidfile = tmp_path / "low.pid"
    # It leaves once the cluster has written its pid file: on a busy machine the cluster
    # could otherwise be stopped before it has (the grace is short), and nothing would show
    # that its grandchild was stopped too.
    leaving = Launch("fwd0", FORWARDER, py(AFTER_SLEEPERS + "print('leaving')", str(pidfile)))
    plan = Plan((leaving, sleeper("low", CLUSTER, pidfile)))
    assert run(plan, rendezvous=rendezvous, early_exit_grace=0.3) == 69  # not bridged
    assert wait_dead(pids(pidfile)) == []
    err = capsys.readouterr().err
    assert (
        "mmpi-run: forwarder 'fwd0' exited with status 0 while cluster 'low' was still running;"
        " stopping the other jobs\n" in err
    )


@pytest.mark.timeout(20)
def test_forwarder_exiting_just_before_the_clusters_is_fine(rendezvous):
    plan = Plan((fwd("pass"), cluster("low", "import time; time.sleep(0.5)")))
    assert run(plan, rendezvous=rendezvous, early_exit_grace=3.0) == 0


@pytest.mark.timeout(20)
def test_forwarder_failure_is_reported_at_once(capsys, rendezvous, tmp_path):
    pidfile = tmp_path / "low.pid"
    plan = Plan(
        (
            Launch("fwd0", FORWARDER, py(AFTER_SLEEPERS + "sys.exit(7)", str(pidfile))),
            sleeper("low", CLUSTER, pidfile),
        )
    )
    start = time.monotonic()
    # The forwarder's own status (a relay failure exits 3) is no program's: "not bridged".
    assert run(plan, rendezvous=rendezvous, early_exit_grace=30) == 69
    assert time.monotonic() - start < 20  # not the grace of 30 s (generous: a busy machine)
    assert "mmpi-run: forwarder 'fwd0' exited with status 7" in capsys.readouterr().err


@pytest.mark.timeout(20)
def test_forwarder_that_never_exits(capsys, rendezvous, tmp_path):
    pidfile = tmp_path / "fwd.pid"
    # (the cluster ends once the forwarder has written its pid file, as above)
    done = Launch("low", CLUSTER, py(AFTER_SLEEPERS, str(pidfile)), {}, 2, 0)
    plan = Plan((sleeper("fwd0", FORWARDER, pidfile), done))
    assert run(plan, rendezvous=rendezvous, shutdown_grace=0.3) == 69
    assert wait_dead(pids(pidfile)) == []
    err = capsys.readouterr().err
    assert "forwarder 'fwd0' did not exit within 0.3 s after the clusters finished" in err


@pytest.mark.timeout(20)
@pytest.mark.parametrize(("signum", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_interrupt_stops_everything(capsys, rendezvous, tmp_path, signum, status):
    files = [tmp_path / "fwd.pid", tmp_path / "low.pid"]
    # The job itself signals mmpi-run (this test process), so the signal surely comes mid-run.
    interrupter = AFTER_SLEEPERS + f"os.kill({os.getpid()}, {int(signum)}); time.sleep(60)"
    plan = Plan(
        (
            sleeper("fwd0", FORWARDER, files[0]),
            sleeper("low", CLUSTER, files[1]),
            Launch("high", CLUSTER, py(interrupter, *map(str, files)), {}, 1, 1),
        )
    )
    previous = signal.getsignal(signal.SIGTERM)
    assert run(plan, rendezvous=rendezvous) == status
    assert signal.getsignal(signal.SIGTERM) is previous  # our handler was removed again
    assert wait_dead(pids(*files)) == []
    err = capsys.readouterr().err
    reason = "interrupted" if signum == signal.SIGINT else "received SIGTERM"
    assert f"mmpi-run: {reason}; stopping all jobs\n" in err
    assert not rendezvous.exists()


@pytest.mark.timeout(20)
def test_a_job_that_cannot_start(rendezvous, tmp_path):
    pidfile = tmp_path / "fwd.pid"
    plan = Plan(
        (
            sleeper("fwd0", FORWARDER, pidfile),
            Launch("low", CLUSTER, (str(tmp_path / "no-such-mpiexec"), "-n", "2"), {}, 2, 0),
        )
    )
    with pytest.raises(LaunchError, match="cannot start cluster 'low'"):
        run(plan, rendezvous=rendezvous)
    if pidfile.exists():  # the forwarder may have been stopped before it wrote its pid
        assert wait_dead(pids(pidfile)) == []
    assert not rendezvous.exists()


@pytest.mark.timeout(20)
def test_lines_never_interleave(capsys, rendezvous):
    # Two jobs, each with two "ranks" writing long lines in small pieces at the same time.
    code = f"""
    import os, sys
    out = os.fdopen(1, "wb", buffering=0)
    for i in range(300):
        for r in (0, 1):
            line = f"{{r}}-{{i}}-" + "x" * 300
            out.write(f"{M}[{{r}}] {{line[:150]}}".encode())
            out.write(f"{M}[{{r}}] {{line[150:]}}\\n".encode())
    """
    plan = Plan((cluster("low", code, 2, 0), cluster("high", code, 2, 2)))
    assert run(plan, rendezvous=rendezvous) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 * 2 * 300
    pattern = re.compile(r"\[(low|high):([01]) v(\d)\] ([01])-(\d+)-x{300}")
    for line in lines:
        m = pattern.fullmatch(line)
        assert m, line[:80]
        assert m[2] == m[4] and int(m[3]) == int(m[2]) + (2 if m[1] == "high" else 0)


@pytest.mark.timeout(20)
def test_cli_reports_a_launcher_that_cannot_start(capsys, tmp_path, monkeypatch):
    from launch.cli import main

    monkeypatch.setenv("TMPDIR", str(tmp_path))  # where the rendezvous directory goes
    job = tmp_path / "job.yaml"
    missing = tmp_path / "no-such-mpiexec"
    job.write_text(
        f"launcher: {{command: {missing}}}\nclusters: {{low: {{ranks: 1}}, high: {{ranks: 1}}}}\n"
    )
    assert main(["-c", str(job), "python", "-c", "pass"]) == 1  # a program that is there
    err = capsys.readouterr().err
    assert err.startswith("mmpi-run: cannot start forwarder 'fwd0': ")
    assert [p.name for p in tmp_path.iterdir()] == ["job.yaml"]  # rendezvous dir removed


@pytest.mark.timeout(20)
def test_a_failed_run_keeps_its_log_a_good_one_does_not(capsys, rendezvous, tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    code = f"""
    import sys
    print("{M}[0] working")
    print("{M}[1] Traceback (most recent call last):", file=sys.stderr)
    print("{M}[1] ValueError: bad", file=sys.stderr)
    sys.exit(1)
    """
    assert run(Plan((cluster("low", code),)), rendezvous=rendezvous, log_dir=logs) == 1
    (log,) = logs.iterdir()
    assert log.name.startswith("mmpi-run.") and log.suffix == ".log"
    logged = log.read_text().splitlines()  # stdout and stderr: each in order, not together
    assert sorted(logged[:3]) == [
        "[low:0 v0] working",
        "[low:1 v1] Traceback (most recent call last):",
        "[low:1 v1] ValueError: bad",
    ]
    assert logged[3:] == [
        "mmpi-run: rank 1 (low:1) raised ValueError: bad; cluster 'low' exited with status 1",
    ]
    err = capsys.readouterr().err
    assert err.endswith(f"mmpi-run: the output of every rank and forwarder is in {log}\n")
    # On screen: the cause, then its own traceback, whose last line it has just quoted.
    shown = err.splitlines()
    at = shown.index(logged[3])
    assert shown[at + 1] == "[low:1 v1] Traceback (most recent call last):"
    assert err.count("ValueError: bad") == 1
    rv2 = tmp_path / "rv2"
    rv2.mkdir()
    (rv2 / "rank.low.0.pid").write_text("0 0")
    assert run(Plan((cluster("low", "print('ok')"),)), rendezvous=rv2, log_dir=logs) == 0
    assert len(list(logs.iterdir())) == 1
    # A log the user asked for is written whatever happens.
    rv3 = tmp_path / "rv3"
    rv3.mkdir()
    (rv3 / "rank.low.0.pid").write_text("0 0")
    asked = tmp_path / "asked.log"
    assert run(Plan((cluster("low", "print('ok')"),)), rendezvous=rv3, log=asked) == 0
    assert asked.read_text() == "[low] ok\n"


@pytest.mark.timeout(20)
def test_stdin_goes_to_the_job_of_virtual_rank_0_only(tmp_path):
    rv = tmp_path / "rv"
    rv.mkdir()
    for c in ("low", "high"):
        (rv / f"rank.{c}.0.pid").write_text("0 0")
    reader = "import sys; print(repr(sys.stdin.read()))"
    script = f"""
    import sys
    from launch.plan import Launch, Plan
    from launch.runner import run
    py = (sys.executable, "-S", "-c", {reader!r})
    plan = Plan((Launch("low", "cluster", py, {{}}, 1, 0, stdin=True),
                 Launch("high", "cluster", py, {{}}, 1, 1)))
    sys.exit(run(plan, rendezvous={str(rv)!r}))
    """
    p = subprocess.run(py(script, site=True), input="hello\n", capture_output=True, text=True,
                       timeout=15)
    assert p.returncode == 0, p.stderr
    assert sorted(p.stdout.splitlines()) == ["[high] ''", "[low] 'hello\\n'"]


# -- a failure report from real processes --------------------------------------------------------


@pytest.mark.timeout(20)
def test_cascade_is_reported_cause_first(capsys, rendezvous):
    # Hydra-like jobs: the forwarder "crashes" first, the cluster reports its killed rank later;
    # each writes its pid file like the real ones do. The low cluster just waits to be stopped.
    fwd_code = f"""
    import os, sys, time
    open(sys.argv[1] + "/forwarder.0.pid", "w").write("6700")
    while not os.path.exists(sys.argv[1] + "/rank.high.1.pid"):  # the cluster is up
        time.sleep(0.01)
    print({chr(10).join(FORWARDER_CRASH)!r})
    sys.exit(6)
    """
    high_code = f"""
    import os, sys, time
    open(sys.argv[1] + "/rank.high.0.pid", "w").write("6718 2")
    open(sys.argv[1] + "/rank.high.1.pid", "w").write("6719 3")
    time.sleep(0.3)
    print({chr(10).join(BANNER_KILLED)!r})
    sys.exit(9)
    """
    plan = Plan(
        (
            Launch("fwd0", FORWARDER, py(fwd_code, str(rendezvous))),
            cluster("low", "import time; time.sleep(30)", 2, 0),
            Launch("high", CLUSTER, py(high_code, str(rendezvous)), {}, 2, 2),
        )
    )
    assert run(plan, rendezvous=rendezvous, failure_grace=2.0) == 137
    err = capsys.readouterr().err.splitlines()
    ours = [line for line in err if line.startswith("mmpi-run: ")]
    assert ours == [
        "mmpi-run: rank 2 (high:0, pid 6718) was killed by signal 9 (SIGKILL); "
        "cluster 'high' exited with status 9",
        "mmpi-run: then forwarder 'fwd0' (pid 6700) aborted (SIGABRT, exit status 6) "
        "after losing rank 3 (high:1, pid 6719); stopping the other jobs",
        "mmpi-run: stopped cluster 'low' (rank 2 (high:0) was killed by signal 9 (SIGKILL)); "
        "exit status 137",
    ]
