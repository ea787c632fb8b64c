"""Bridged point-to-point with MPI semantics, on uneven clusters, through real mmpi-run jobs."""

import re
import shutil

import pytest
from conftest import RANK_PATHS, ROOT, mmpi_run_cmd

pytestmark = pytest.mark.mpi


@pytest.mark.timeout(120)
def test_ring_example_runs_across_both_clusters():
    import subprocess
    import sys

    assert shutil.which("mmpi-run"), "the mmpi-run console script is not installed"
    p = subprocess.run([*mmpi_run_cmd(), sys.executable, str(ROOT / "examples" / "ring.py")],
                       capture_output=True, text=True, timeout=100)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "ring of 4 ranks OK" in p.stdout
    # both clusters printed, with their prefixes, and the forwarder summarised its work
    assert re.search(r"\[low:1 v1\] rank 1/4 \(low\)", p.stdout)
    assert re.search(r"\[high:1 v3\] rank 3/4 \(high\)", p.stdout)
    assert re.search(r"low->high 2 msgs .* high->low 2 msgs", p.stdout)


@pytest.mark.timeout(150)
@pytest.mark.parametrize("low,high", [(1, 2), (2, 3)])
def test_p2p_semantics_bridged(bridged, low, high):
    job = bridged("p2p_suite.py", low=low, high=high)
    assert job.returncode == 0, job.output
    assert job.stdout.count("P2P OK") == low + high, job.output


@pytest.mark.timeout(150)
def test_p2p_semantics_native(native):
    job = native("p2p_suite.py", n=4)
    assert job.returncode == 0, job.output
    assert job.stdout.count("P2P OK") == 4, job.output


@pytest.mark.timeout(150)
def test_64_mib_message_across_the_zipper(bridged):
    job = bridged("p2p_suite.py", str(64 * 2**20 + 1), low=1, high=1)
    assert job.returncode == 0, job.output
    m = re.search(r"low->high (\d+) msgs (\d+) B", job.stdout)
    assert m and int(m.group(2)) > 64 * 2**20, job.output


@pytest.mark.timeout(150)
def test_barrier_is_tight(bridged):
    job = bridged("barrier_tight.py", "8", low=2, high=3)
    assert job.returncode == 0, job.output
    assert "tight barrier OK over 8 rounds" in job.stdout, job.output


def test_messages_on_a_context_not_registered_yet_are_kept(bridged):
    # A peer sends on a new communicator before this rank registered its context: the
    # messages are kept and delivered in order once it does, not refused.
    job = bridged("early_context.py", "4", low=2, high=2, timeout=90)
    assert job.returncode == 0, job.output
    assert "early 12 ok True" in job.stdout, job.output


@pytest.mark.timeout(120)
def test_a_late_receive_takes_the_chunks_that_waited_for_it(bridged):
    job = bridged("late_landing.py", low=1, high=1, timeout=100,
                  env={"MMPI_LATE_US": "100000"})
    assert job.returncode == 0, job.output
    m = re.search(r"late landing: direct (\d+) spare (\d+) ok", job.stdout)
    assert m, job.output
    assert int(m.group(1)) == 0, job.output  # no spare taken: straight into the receive
    assert int(m.group(2)) >= 300_000, job.output  # waited too long in MPI: a spare


@pytest.mark.timeout(120)
@pytest.mark.parametrize("path", RANK_PATHS)
def test_windows_mixing_what_c_and_python_complete_keep_their_order(bridged, path):
    # A Waitall of receives from the other cluster waits in C (Engine.wait_plain) while the
    # drain completes posted receives there; large and pickled messages and wildcard sources
    # go through Python in between. Every receive must hold its own message.
    job = bridged("window_mix.py", "3", "60", low=1, high=1, timeout=100,
                  env={"MMPI_RANK_PATH": path})
    assert job.returncode == 0, job.output
    assert "rank 1: window mix ok, 1928 messages in 60 windows" in job.stdout, job.output
