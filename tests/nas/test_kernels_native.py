"""Run each NPB port at class S under real ``mpiexec`` and require NPB's own verification."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from launch import launcher

MPIEXEC = shutil.which(launcher("mpiexec"))
REPO = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.mpi,
    pytest.mark.skipif(MPIEXEC is None, reason="mpiexec is not on PATH"),
]

# Rank counts per kernel: NPB's constraints (powers of two for CG/IS/MG, a proc grid for LU),
# kept small because this machine has two cores and oversubscribed ranks spin while waiting.
RUNS = [
    ("ep", 1),
    ("ep", 2),
    ("ep", 3),
    ("is", 1),
    ("is", 2),
    ("is", 4),
    ("cg", 1),
    ("cg", 2),
    ("cg", 4),
    ("mg", 1),
    ("mg", 2),
    ("mg", 4),
    ("lu", 1),
    ("lu", 2),
    ("lu", 4),
]


def run_kernel(
    kernel: str,
    ranks: int,
    klass: str = "S",
    timeout: float = 100,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Launch ``python -m nas_ports`` on `ranks` ranks and return the finished process."""
    assert MPIEXEC is not None
    full_env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", **(env or {})}
    cmd = [MPIEXEC, "-n", str(ranks), sys.executable, "-m", "nas_ports", kernel, "--class", klass]
    return subprocess.run(
        cmd, cwd=REPO, env=full_env, capture_output=True, text=True, timeout=timeout
    )


def assert_verified(proc: subprocess.CompletedProcess[str]) -> None:
    """Exit status 0 and NPB's verdict in the report, or show everything that was printed."""
    detail = f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    assert proc.returncode == 0, detail
    assert "VERIFICATION SUCCESSFUL" in proc.stdout, detail
    assert "VERIFICATION FAILED" not in proc.stdout, detail


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kernel, ranks", RUNS, ids=[f"{k}-np{n}" for k, n in RUNS])
def test_class_s_verifies(kernel: str, ranks: int) -> None:
    """Class S verifies against the NPB 3.4 reference values on 1, 2 and 4 ranks."""
    proc = run_kernel(kernel, ranks)
    assert_verified(proc)
    assert f"Total processes = {ranks:>24}" in proc.stdout
    assert "native MPI (not bridged)" in proc.stdout


@pytest.mark.timeout(60)
def test_report_comes_from_rank_zero_only() -> None:
    """Only rank 0 prints the report, so it appears once however many ranks run."""
    proc = run_kernel("ep", 2)
    assert_verified(proc)
    assert proc.stdout.count("EP Benchmark Completed.") == 1


@pytest.mark.timeout(60)
def test_power_of_two_kernel_refuses_three_ranks() -> None:
    """IS on 3 ranks stops before any work with a message naming the count and the rule."""
    proc = run_kernel("is", 3)
    assert proc.returncode != 0
    assert "cannot run on 3 MPI rank(s)" in proc.stderr
    assert "power-of-two" in proc.stderr
    assert "VERIFICATION" not in proc.stdout


@pytest.mark.timeout(60)
def test_lu_refuses_a_count_without_a_process_grid() -> None:
    """LU on 3 ranks has no NPB process grid; the message lists the counts that work."""
    proc = run_kernel("lu", 3)
    assert proc.returncode != 0
    assert "cannot run on 3 MPI rank(s)" in proc.stderr
    assert "1, 2, 4, 6, 8" in proc.stderr


@pytest.mark.timeout(60)
def test_mg_without_numba_uses_the_numpy_operators() -> None:
    """MG's whole-array numpy operators (the path without Numba) verify too."""
    proc = run_kernel("mg", 2, env={"NAS_PORTS_NO_JIT": "1"})
    assert_verified(proc)
    assert "plain Python/numpy" in proc.stdout


@pytest.mark.timeout(60)
def test_cg_without_scipy_names_the_extra(tmp_path) -> None:
    """A core install has no scipy: CG says which extra brings it, on every rank, and exits 1."""
    fake = tmp_path / "scipy"
    fake.mkdir()
    (fake / "__init__.py").write_text("raise ImportError('scipy hidden by the test')\n")
    path = os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")]))
    proc = run_kernel("cg", 2, env={"PYTHONPATH": path})
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.count('CG kernel needs scipy, which the nas extra brings: '
                             'pip install "mmpi[nas]"') == 2, proc.stderr
