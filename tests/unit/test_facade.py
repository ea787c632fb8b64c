"""Without mmpi-run, `from mmpi import MPI` is plain mpi4py (so native runs are the baseline)."""

import os
import subprocess
import sys

import pytest

PROBE = """
import mpi4py.MPI as native
from mmpi import MPI
assert MPI.COMM_WORLD is native.COMM_WORLD
assert MPI.Request is native.Request and MPI.Status is native.Status
assert MPI.DOUBLE is native.DOUBLE and MPI.SUM is native.SUM and MPI.Wtime is native.Wtime
assert MPI.BRIDGED is False
assert "COMM_WORLD" in dir(MPI) and "Allreduce" in dir(native.Intracomm)
print("native facade ok")
"""


@pytest.mark.timeout(60)
def test_native_mode_is_plain_mpi4py():
    env = {k: v for k, v in os.environ.items() if not k.startswith("MMPI_")}
    p = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                       timeout=50, env=env)
    assert p.returncode == 0, p.stderr
    assert "native facade ok" in p.stdout


def test_importing_errors_does_not_start_mpi():
    p = subprocess.run([sys.executable, "-c",
                        "import sys, mmpi, mmpi.errors; assert 'mpi4py.MPI' not in sys.modules"],
                       capture_output=True, text=True, timeout=50)
    assert p.returncode == 0, p.stderr
