"""launch.hygiene: the job's pid files, signalling only processes still of that job, and what a
run leaves behind (MPICH shm segments, the rendezvous directory, jobs of a killed runner)."""
# ruff: noqa: D103  (test names say what they check)

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from runner_jobs import (
    AFTER_SLEEPERS,
    SLEEPER,
    cluster,
    pids,
    py,
    sleeper,
    wait_dead,
)

from launch import hygiene
from launch.hygiene import NO_PIDS, Pids, in_job, kill_job, read_pids
from launch.plan import CLUSTER, FORWARDER, Launch, Plan
from launch.runner import run


def _sleeper(env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                            env={**os.environ, **env})


def test_read_pids(tmp_path):
    (tmp_path / "rank.high.1.pid").write_text("6719 3")
    (tmp_path / "rank.low.0.pid").write_text("6716 0")
    (tmp_path / "forwarder.0.pid").write_text("6700")
    (tmp_path / "rank.low.1.pid").write_text("")  # torn: skipped
    (tmp_path / "port.0.low").write_text("x")
    pids = read_pids(tmp_path)
    assert pids.ranks == {("high", 1): (6719, 3), ("low", 0): (6716, 0)}
    assert pids.forwarders == {0: 6700}
    assert pids.rank_of(6719) == ("high", 1, 3) and pids.rank_of(6719, "low") is None
    assert pids.forwarder_of(6700) == 0
    assert sorted(pids.all()) == [6700, 6716, 6719]
    assert read_pids(tmp_path / "gone") == NO_PIDS == Pids({}, {})


def test_kill_job_signals_only_processes_of_that_job(tmp_path):
    job, other = tmp_path / "mmpi-job", tmp_path / "mmpi-other"
    job.mkdir()
    ours = _sleeper({"MMPI_RENDEZVOUS": str(job)})
    stranger = _sleeper({"MMPI_RENDEZVOUS": str(other)})  # a reused pid, say
    try:
        (job / "rank.low.0.pid").write_text(f"{ours.pid} 0")
        (job / "forwarder.0.pid").write_text(f"{stranger.pid}")
        assert in_job(ours.pid, job) and not in_job(stranger.pid, job)
        assert kill_job(job, signal.SIGKILL) == [ours.pid]
        assert ours.wait(5) == -signal.SIGKILL
        assert stranger.poll() is None
    finally:
        for p in (ours, stranger):
            p.kill()
            p.wait()


@pytest.mark.timeout(20)
def test_shm_files_left_by_a_failure_are_removed(rendezvous, tmp_path, monkeypatch):
    shm = tmp_path / "shm"
    shm.mkdir()
    monkeypatch.setattr(hygiene, "SHM_GLOB", str(shm / "mpich_shm_*"))
    (shm / "mpich_shm_before").write_text("")
    left, busy = shm / "mpich_shm_left", shm / "mpich_shm_busy"
    # Another MPI job of ours whose segment appears during the run and stays open: leave it.
    other = subprocess.Popen(
        py(
            """
            import os, sys, time
            while not os.path.exists(sys.argv[1]):
                time.sleep(0.01)
            f = open(sys.argv[2], "w")
            time.sleep(30)
            """,
            str(left),
            str(busy),
        )
    )
    try:
        # The failing job leaves a segment behind, and fails once the other one exists.
        code = f"""
        import os, time
        open({str(left)!r}, "w").close()
        while not os.path.exists({str(busy)!r}):
            time.sleep(0.01)
        raise SystemExit(2)
        """
        assert run(Plan((cluster("low", code),)), rendezvous=rendezvous) == 2
        assert sorted(p.name for p in shm.iterdir()) == ["mpich_shm_before", "mpich_shm_busy"]
    finally:
        other.kill()
        other.wait()


@pytest.mark.timeout(20)
def test_shm_files_are_left_alone_on_success(rendezvous, tmp_path, monkeypatch):
    monkeypatch.setattr(hygiene, "SHM_GLOB", str(tmp_path / "mpich_shm_*"))
    code = f"open({str(tmp_path / 'mpich_shm_x')!r}, 'w').close()"
    assert run(Plan((cluster("low", code),)), rendezvous=rendezvous) == 0
    assert (tmp_path / "mpich_shm_x").exists()


@pytest.mark.timeout(20)
def test_jobs_die_with_a_killed_runner(tmp_path):
    # SIGKILL leaves mmpi-run no chance to clean up; the kernel must SIGTERM its jobs.
    pidfile = tmp_path / "low.pid"
    script = f"""
    import sys
    from launch.plan import Launch, Plan
    from launch.runner import run
    sleeper = Launch("low", "cluster", (sys.executable, "-S", "-c", {SLEEPER!r}, {str(pidfile)!r}))
    run(Plan((sleeper,)), rendezvous={str(tmp_path / "rv")!r})
    """
    runner_proc = subprocess.Popen(py(script, site=True))
    try:
        deadline = time.monotonic() + 10
        while not pidfile.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        job_pid = pids(pidfile)[0]  # the job itself; its child is mpiexec's to stop
        runner_proc.kill()
        runner_proc.wait()
        assert wait_dead([job_pid], timeout=5) == []
    finally:
        runner_proc.kill()
        runner_proc.wait()


@pytest.mark.timeout(20)
def test_a_killed_runner_leaves_no_rendezvous_and_no_shm(tmp_path):
    # The watchdog: SIGKILL gives mmpi-run no chance; its helper must clean up after it.
    rv = tmp_path / "mmpi-rv"
    rv.mkdir()
    (rv / "secret").write_text("x")
    pidfile = tmp_path / "low.pid"
    shm = Path(f"/dev/shm/mpich_shm_mmpitest_{os.getpid()}_{time.monotonic_ns()}")
    job = SLEEPER.replace("time.sleep(60)", f"open({str(shm)!r}, 'w').close(); time.sleep(60)")
    script = f"""
    import sys
    from launch.plan import Launch, Plan
    from launch.runner import run
    job = Launch("low", "cluster", (sys.executable, "-S", "-c", {job!r}, {str(pidfile)!r}),
                 {{"MMPI_RENDEZVOUS": {str(rv)!r}}})
    run(Plan((job,)), rendezvous={str(rv)!r})
    """
    runner_proc = subprocess.Popen(py(script, site=True))
    try:
        deadline = time.monotonic() + 10
        while not (pidfile.exists() and shm.exists()) and time.monotonic() < deadline:
            time.sleep(0.02)
        job_pid = pids(pidfile)[0]
        runner_proc.kill()
        runner_proc.wait()
        killed_at = time.monotonic()
        while (rv.exists() or shm.exists()) and time.monotonic() < killed_at + 5:
            time.sleep(0.02)
        assert not rv.exists(), "the rendezvous directory (with the secret) was left behind"
        assert not shm.exists(), "a shm segment of the job was left behind"
        assert wait_dead([job_pid], timeout=1) == []
    finally:
        runner_proc.kill()
        runner_proc.wait()
        shm.unlink(missing_ok=True)


@pytest.mark.timeout(20)
def test_clusters_whose_ranks_never_join_are_separate_worlds(capsys, tmp_path):
    rv = tmp_path / "rv"
    rv.mkdir()
    (rv / "port.0.low").write_text("port")  # the forwarder was ready; nobody came
    pidfile = tmp_path / "fwd.pid"
    plan = Plan(
        (
            sleeper("fwd0", FORWARDER, pidfile),
            Launch("low", CLUSTER, py(AFTER_SLEEPERS + "print('alone')", str(pidfile)), {}, 2),
            cluster("high", "import time; time.sleep(0.2); print('alone too')", 2, 2),
        )
    )
    start = time.monotonic()
    assert run(plan, rendezvous=rv) == 69
    assert time.monotonic() - start < 5  # not the forwarder's shutdown grace of 10 s
    assert wait_dead(pids(pidfile)) == []
    err = capsys.readouterr().err
    assert "mmpi-run: cluster 'low' finished (status 0) but no rank joined the bridge: the job " \
           "ran as separate worlds, one per cluster, not as one of 4 ranks" in err
