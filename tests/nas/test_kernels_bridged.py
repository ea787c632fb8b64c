"""Run each NPB port at class S across the zipper with ``mmpi-run`` (one rank per cluster)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

MMPI_RUN = shutil.which("mmpi-run")
REPO = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.mpi,
    pytest.mark.skipif(MMPI_RUN is None, reason="mmpi-run is not on PATH"),
]


def run_bridged(kernel: str, low: int, high: int) -> subprocess.CompletedProcess[str]:
    """Launch ``python -m nas_ports`` with `low` + `high` ranks on the two local clusters."""
    assert MMPI_RUN is not None
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    cmd = [MMPI_RUN, "--low", str(low), "--high", str(high), "--"]
    cmd += [sys.executable, "-m", "nas_ports", kernel, "--class", "S"]
    return subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=150)


@pytest.mark.timeout(160)
@pytest.mark.parametrize("kernel", ["ep", "is", "cg", "mg", "lu"])
def test_class_s_verifies_across_the_zipper(kernel: str) -> None:
    """Every kernel verifies with its ranks split 1 + 1 and reports that split."""
    proc = run_bridged(kernel, 1, 1)
    detail = f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    assert proc.returncode == 0, detail
    assert "VERIFICATION SUCCESSFUL" in proc.stdout, detail
    assert "bridged: 1 on the low cluster (rank 0), 1 on the high cluster (rank 1)" in proc.stdout
