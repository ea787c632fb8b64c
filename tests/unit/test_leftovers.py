"""What a killed mmpi-run leaves behind is cleaned up: stale rendezvous directories, their jobs."""
# ruff: noqa: D103  (test names say what they check)

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from launch import hygiene
from mmpi.wire import rendezvous as rv


def test_the_owner_file_is_part_of_the_contract():
    assert hygiene.OWNER_FILE == rv.OWNER_FILE
    assert hygiene.ENV_RENDEZVOUS == rv.ENV_RENDEZVOUS


def test_the_sweep_looks_where_make_dir_makes_them(tmp_path):
    assert rv.make_dir(str(tmp_path)).name.startswith(hygiene.RENDEZVOUS_PREFIX)


def stale_dir(parent, name, owner: str | None):
    path = parent / f"mmpi-{name}"
    path.mkdir()
    (path / "secret").write_text("x")
    if owner is not None:
        (path / rv.OWNER_FILE).write_text(owner)
    return path


@pytest.mark.timeout(20)
def test_sweep_removes_directories_of_dead_owners_and_their_jobs(tmp_path):
    gone = subprocess.Popen([sys.executable, "-S", "-c", "pass"])
    gone.wait()
    dead = stale_dir(tmp_path, "dead", f"{gone.pid} 12345")
    reused = stale_dir(tmp_path, "reused", f"{os.getpid()} 0")  # our pid, not our start time
    mine = stale_dir(tmp_path, "mine", None)
    hygiene.claim(mine)
    unclaimed = stale_dir(tmp_path, "unclaimed", None)
    other = tmp_path / "other-dir"
    other.mkdir()
    # A process of the dead owner's job, still running: the sweep must end it.
    orphan = subprocess.Popen(
        [sys.executable, "-S", "-c", "import time; time.sleep(30)"],
        env={**os.environ, "MMPI_RENDEZVOUS": str(dead)},
    )
    try:
        swept = hygiene.sweep_stale(tmp_path)
        assert sorted(swept) == sorted([dead, reused])
        assert not dead.exists() and not reused.exists()
        assert mine.exists() and unclaimed.exists() and other.exists()
        assert orphan.wait(timeout=5) == -9
    finally:
        orphan.kill()
        orphan.wait()


def test_owner_alive_and_process_state(tmp_path):
    path = stale_dir(tmp_path, "x", None)
    assert hygiene.owner_alive(path) is None
    hygiene.claim(path)
    assert hygiene.owner_alive(path) is True
    (path / rv.OWNER_FILE).write_text(f"{os.getpid()} 0")
    assert hygiene.owner_alive(path) is False
    assert hygiene.process_state(os.getpid()) in ("R", "S")
    assert hygiene.process_state(2**22 + 12345) is None


@pytest.mark.timeout(20)
def test_the_sweep_removes_the_shm_segments_a_dead_owners_job_left(tmp_path):
    # mmpi-run and its watchdog both SIGKILLed: the next run's sweep removes the job's MPICH
    # segments too, by the snapshot the dead run left in its directory; older ones stay.
    gone = subprocess.Popen([sys.executable, "-S", "-c", "pass"])
    gone.wait()
    dead = stale_dir(tmp_path, "dead", f"{gone.pid} 12345")
    older = f"/dev/shm/mpich_shm_mmpitest_old_{os.getpid()}"
    left = f"/dev/shm/mpich_shm_mmpitest_left_{os.getpid()}"
    try:
        open(older, "w").close()
        (dead / hygiene.BEFORE_FILE).write_text(f"{older}\n")
        open(left, "w").close()  # appeared after the snapshot: the dead job's
        assert hygiene.sweep_stale(tmp_path) == [dead]
        assert not os.path.exists(left) and os.path.exists(older)
    finally:
        for path in (older, left):
            if os.path.exists(path):
                os.unlink(path)


def test_the_watchdog_leaves_its_snapshot_in_the_directory(tmp_path):
    path = stale_dir(tmp_path, "w", None)
    dog = hygiene.start_watchdog(path, {"/dev/shm/mpich_shm_a", "/tmp/hydra_hwloc_xmlfile_b"})
    try:
        assert (path / hygiene.BEFORE_FILE).read_text().split() == [
            "/dev/shm/mpich_shm_a", "/tmp/hydra_hwloc_xmlfile_b"]
    finally:
        dog.release()
