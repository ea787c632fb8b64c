"""The shipped examples run as the README and the job file's comments say: a short real job."""
# ruff: noqa: D103  (test names say what they check)

from __future__ import annotations

import sys

import pytest
from conftest import ROOT, _run, mmpi_run_cmd

pytestmark = pytest.mark.mpi


@pytest.mark.timeout(120)
def test_the_two_cluster_job_file_runs_the_ring_on_this_machine():
    job = _run([*mmpi_run_cmd(), "-c", str(ROOT / "examples" / "two-clusters.yaml"),
                sys.executable, str(ROOT / "examples" / "ring.py")], timeout=90, bridged=True)
    assert job.returncode == 0, job.output
    assert "[low:0 v0] ring of 4 ranks OK" in job.stdout, job.output
    assert "Traceback" not in job.stderr, job.output
