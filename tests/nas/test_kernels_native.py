"""Run each NPB port at class S under real ``mpiexec`` and require NPB's own verification."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

MPIEXEC = shutil.which("mpiexec")
REPO = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.mpi,
    pytest.mark.skipif(MPIEXEC is None, reason="mpiexec is not on PATH"),
]


def run_kernel(
    kernel: str,
    ranks: int,
    klass: str = "S",
    timeout: float = 60,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Launch ``python -m nas_ports`` on `ranks` ranks and return the finished process."""
    assert MPIEXEC is not None
    env = {**os.environ, **(env or {})}
    # Two cores: keep BLAS and friends from oversubscribing them behind MPI's back.
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    cmd = [MPIEXEC, "-n", str(ranks), sys.executable, "-m", "nas_ports", kernel, "--class", klass]
    return subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)


def assert_verified(proc: subprocess.CompletedProcess[str]) -> None:
    detail = f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    assert proc.returncode == 0, detail
    assert "VERIFICATION SUCCESSFUL" in proc.stdout, detail
    assert "VERIFICATION FAILED" not in proc.stdout, detail


@pytest.mark.timeout(60)
@pytest.mark.parametrize("ranks", [1, 2, 4])
def test_ep_class_s(ranks: int) -> None:
    assert_verified(run_kernel("ep", ranks))


@pytest.mark.timeout(60)
@pytest.mark.parametrize("ranks", [1, 2, 4])
def test_is_class_s(ranks: int) -> None:
    assert_verified(run_kernel("is", ranks))


@pytest.mark.timeout(60)
def test_unsupported_rank_count_is_refused() -> None:
    proc = run_kernel("is", 3)
    assert proc.returncode != 0
    assert "cannot run on 3 MPI rank(s)" in proc.stderr
    assert "power-of-two" in proc.stderr
    assert "VERIFICATION" not in proc.stdout


@pytest.mark.timeout(90)
@pytest.mark.parametrize("ranks", [1, 2, 4])
def test_cg_class_s(ranks: int) -> None:
    assert_verified(run_kernel("cg", ranks))


@pytest.mark.timeout(90)
@pytest.mark.parametrize("ranks", [1, 2, 4])
def test_mg_class_s(ranks: int) -> None:
    assert_verified(run_kernel("mg", ranks))


@pytest.mark.timeout(60)
def test_mg_class_s_without_numba() -> None:
    # The whole-array numpy operators are MG's fallback when Numba is missing.
    proc = run_kernel("mg", 2, env={"NAS_PORTS_NO_JIT": "1"})
    assert_verified(proc)
    assert "plain Python/numpy" in proc.stdout


@pytest.mark.timeout(120)
@pytest.mark.parametrize("ranks", [1, 2, 4])
def test_lu_class_s(ranks: int) -> None:
    assert_verified(run_kernel("lu", ranks, timeout=110))


@pytest.mark.timeout(60)
def test_lu_refuses_a_count_without_a_process_grid() -> None:
    proc = run_kernel("lu", 3)
    assert proc.returncode != 0
    assert "cannot run on 3 MPI rank(s)" in proc.stderr
    assert "1, 2, 4, 6, 8" in proc.stderr
