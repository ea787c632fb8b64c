"""launch.hygiene: the job's pid files, and signalling only processes still of that job."""

import os
import signal
import subprocess
import sys

from launch.hygiene import NO_PIDS, Pids, in_job, kill_job, read_pids


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
