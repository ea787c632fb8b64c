"""Where a bridged job's processes run: the launcher's binding, and benchmarks/pinned.

Both put a 2+2 job as benchmarks/RESULTS.md ("Placement") measured it fastest on 2 CPUs: the
clusters' leaders on CPU 0, the other ranks and the forwarder on CPU 1. Each rank prints its
own CPUs and the forwarder's (tests/mpi/progs/affinity.py).
"""

import os
import re

import pytest
from conftest import ROOT

pytestmark = pytest.mark.mpi
BENCH = ROOT / "benchmarks"
_LINE = re.compile(r"vrank (\d) cpus \[([\d, ]+)\] forwarder cpus \[1\]$", re.M)
_EXPECTED = {"0": "0", "1": "1", "2": "0", "3": "1"}


@pytest.fixture(autouse=True)
def _two_cpus():
    if len(os.sched_getaffinity(0)) < 2:
        pytest.fail("these tests need 2 CPUs, as the suite does")


@pytest.mark.timeout(120)
def test_launcher_binds_paired_ranks_and_the_forwarder(bridged):
    job = bridged("affinity.py", low=2, high=2, timeout=100,
                  launcher_args=("--placement", "paired", "--forwarder-cpus", "1"))
    assert job.returncode == 0, job.output
    assert dict(_LINE.findall(job.stdout)) == _EXPECTED, job.output


@pytest.mark.timeout(120)
def test_pinned_sitecustomize_pins_by_role(bridged):
    env = {"PYTHONPATH": f"{BENCH / 'pinned'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
           "MMPI_BENCH_PIN": "011"}
    job = bridged("affinity.py", low=2, high=2, env=env, timeout=100)
    assert job.returncode == 0, job.output
    assert dict(_LINE.findall(job.stdout)) == _EXPECTED, job.output


@pytest.mark.timeout(120)
def test_unbound_by_default(bridged):
    job = bridged("affinity.py", low=2, high=2, timeout=100)
    assert job.returncode == 0, job.output
    assert not _LINE.findall(job.stdout), job.output  # the forwarder may run anywhere
