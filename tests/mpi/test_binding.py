"""Where a bridged job's processes run: the launcher's binding.

`--placement paired --forwarder-cpus 1` puts a 2+2 job's leaders on CPU 0 and the other ranks
with the forwarder on CPU 1 (docs/performance.md, "Placement"). Each rank prints its own CPUs
and the forwarder's (tests/mpi/progs/affinity.py).
"""

import os
import re

import pytest

pytestmark = pytest.mark.mpi
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
def test_unbound_by_default(bridged):
    job = bridged("affinity.py", low=2, high=2, timeout=100)
    assert job.returncode == 0, job.output
    assert not _LINE.findall(job.stdout), job.output  # the forwarder may run anywhere
