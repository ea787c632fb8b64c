"""placement: paired really binds each rank to the core the dry-run map shows (this machine)."""
# ruff: noqa: D103  (test names say what they check)

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, mmpi_run_cmd

pytestmark = pytest.mark.mpi
WHERE = Path(__file__).parent / "progs" / "where.py"


def _cores() -> dict[tuple[int, int], set[int]]:
    """(socket, core) in hwloc's logical order -> OS CPU numbers, from /sys."""
    cores: dict[tuple[str, str], set[int]] = {}
    for cpu in Path("/sys/devices/system/cpu").glob("cpu[0-9]*"):
        topo = cpu / "topology"
        if topo.is_dir():
            key = ((topo / "physical_package_id").read_text(), (topo / "core_id").read_text())
            cores.setdefault(key, set()).add(int(cpu.name[3:]))
    packages = sorted({p for p, _ in cores}, key=lambda p: min(
        min(c) for (q, _), c in cores.items() if q == p))  # fmt: skip
    logical: dict[tuple[int, int], set[int]] = {}
    for s, package in enumerate(packages):
        mine = sorted((c for (p, _), c in cores.items() if p == package), key=min)
        for k, cpus in enumerate(mine):
            logical[(s, k)] = cpus
    return logical


@pytest.mark.timeout(90)
def test_paired_binding_matches_the_dry_run_map(tmp_path):
    cores = _cores()
    if not cores:
        pytest.skip("no CPU topology in /sys")
    job = tmp_path / "job.yaml"
    job.write_text(
        "clusters:\n"
        "  low: {ranks: 2, placement: paired, oversubscribe: true}\n"
        "  high: {ranks: 2, placement: paired, oversubscribe: true}\n"
    )
    cmd = [*mmpi_run_cmd(), "-c", str(job)]
    prog = [sys.executable, str(WHERE)]
    dry = subprocess.run([*cmd, "--dry-run", *prog], capture_output=True, text=True, cwd=ROOT)
    assert dry.returncode == 0, dry.stderr
    rows = dry.stdout[dry.stdout.index("rank map") :].splitlines()[2:]
    expected = {}
    for row in rows:
        vrank, _, _, host, socket, core = row.split()
        assert host == "localhost"
        expected[int(vrank)] = cores[(int(socket), int(core))]
    assert len(expected) == 4
    p = subprocess.run([*cmd, *prog], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert p.returncode == 0, p.stdout + p.stderr
    seen = {
        int(m[1]): {int(c) for c in m[2].split(",")}
        for m in re.finditer(r"WHERE (\d+) ([\d,]+)", p.stdout)
    }
    assert seen == expected, p.stdout
