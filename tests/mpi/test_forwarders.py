"""Several forwarders: each (sender, receiver) pair keeps one route, large messages are
striped across all forwarders and reassembled in order, and losing any one is fatal, loudly."""

import re
import subprocess
import sys

import pytest
from conftest import PROGS, ROOT, mmpi_run_cmd

pytestmark = pytest.mark.mpi


def _per_forwarder(stdout: str) -> dict[int, tuple[int, int]]:
    return {int(m.group(1)): (int(m.group(2)), int(m.group(3))) for m in re.finditer(
        r"mmpi-forwarder\[(\d+)\]: done .* low->high \d+ msgs (\d+) B, high->low \d+ msgs (\d+) B",
        stdout)}


@pytest.mark.timeout(150)
def test_p2p_semantics_over_two_forwarders(bridged):
    job = bridged("p2p_suite.py", low=2, high=3, launcher_args=("--forwarders", "2"))
    assert job.returncode == 0, job.output
    assert job.stdout.count("P2P OK") == 5, job.output
    both = _per_forwarder(job.stdout)
    assert set(both) == {0, 1} and all(sum(v) > 0 for v in both.values()), job.stdout


@pytest.mark.timeout(150)
def test_striping_spreads_bytes_evenly(bridged):
    # one 17 MiB message each way between ranks 0 and last: striped over 3 forwarders
    job = bridged("p2p_suite.py", low=1, high=1, launcher_args=("--forwarders", "3"))
    assert job.returncode == 0, job.output
    per = _per_forwarder(job.stdout)
    assert set(per) == {0, 1, 2}, job.stdout
    # every forwarder carried its third of the 17 MiB message (smaller messages take the
    # pair's single route, on top of that)
    third = (17 * 2**20 + 3) // 3
    low_high = [per[i][0] for i in range(3)]
    assert min(low_high) >= third, f"uneven striping: {low_high}"


@pytest.mark.timeout(150)
def test_collectives_over_two_forwarders(bridged):
    job = bridged("coll_suite.py", "--quick", low=2, high=2, launcher_args=("--forwarders", "2"))
    assert job.returncode == 0, job.output
    assert job.stdout.count("COLL OK") == 4, job.output


@pytest.mark.timeout(150)
def test_soak_with_aggressive_striping(bridged):
    job = bridged("soak.py", "8", "5", low=2, high=2, launcher_args=("--forwarders", "3"),
                  env={"MMPI_STRIPE_MIN": "100000"})
    assert job.returncode == 0, job.output
    assert "SOAK OK" in job.stdout, job.output


@pytest.mark.timeout(90)
def test_losing_one_of_two_forwarders_ends_the_job():
    p = subprocess.run([*mmpi_run_cmd(), "--low", "2", "--high", "2", "--forwarders", "2",
                        sys.executable, str(PROGS / "faults.py"), "kill-forwarder", "1"],
                       capture_output=True, text=True, timeout=60, cwd=ROOT,
                       env={**__import__("os").environ, "MMPI_TEST_FORWARDER": "1"})
    out = p.stdout + p.stderr
    assert p.returncode != 0, out
    assert "fwd1" in out, out
