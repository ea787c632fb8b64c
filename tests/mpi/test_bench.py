"""mmpi-bench end to end: real native and bridged jobs, results read back from its JSON."""
# ruff: noqa: D103  (test names say what they check)

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
from conftest import ROOT

pytestmark = pytest.mark.mpi


def bench_cmd() -> list[str]:
    """Return the console script when installed, else the module."""
    exe = shutil.which("mmpi-bench")
    return [exe] if exe else [sys.executable, "-m", "bench"]


def run_bench(*args: str, timeout: float) -> subprocess.CompletedProcess:
    # The driver stops its own jobs at --timeout; the outer timeout only guards the driver.
    return subprocess.run([*bench_cmd(), *args, "--timeout", str(timeout - 15)],
                          capture_output=True, text=True, timeout=timeout, cwd=ROOT)


@pytest.mark.timeout(150)
def test_latency_and_allreduce_native_and_bridged(tmp_path):
    out = tmp_path / "out.json"
    p = run_bench("latency", "allreduce", "--sizes", "8,64K", "--iters-scale", "0.02",
                  "--json", str(out), timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    doc = json.loads(out.read_text())
    got = {(r["bench"], r["size"]): r for r in doc["results"]}
    assert set(got) == {("latency", 8), ("latency", 65536), ("allreduce", 8),
                        ("allreduce", 65536)}
    for r in got.values():
        for mode in ("native", "bridged"):
            assert r[mode]["value"] > 0 and r[mode]["iters"] >= 1, r
        assert r["ratio"] == pytest.approx(r["bridged"]["value"] / r["native"]["value"])
    # point-to-point also has the plain-MPI baseline between two jobs
    for size in (8, 65536):
        r = got["latency", size]
        assert r["across"]["value"] > 0, r
        assert r["ratio_across"] == pytest.approx(r["bridged"]["value"] / r["across"]["value"])
    assert "across" not in got["allreduce", 8]
    runs = {(x["mode"], x["group"]): x for x in doc["runs"]}
    assert set(runs) == {("native", "p2p"), ("across", "p2p"), ("bridged", "p2p"),
                         ("native", "world"), ("bridged", "world")}
    assert runs["across", "p2p"]["worker"]["across_jobs"] is True
    assert runs["across", "p2p"]["worker"]["size"] == 2
    assert all(x["status"] == "ok" for x in runs.values())
    assert runs["bridged", "p2p"]["worker"]["bridged"] is True
    assert runs["native", "world"]["worker"]["bridged"] is False
    assert runs["native", "world"]["worker"]["size"] == 4
    env = doc["environment"]
    assert env["mpi_library"].startswith("MPICH") and env["cpu_count"] >= 1
    # the tables went to stdout
    assert "# mmpi-bench latency:" in p.stdout and "# mmpi-bench allreduce:" in p.stdout
    assert "Bridged/Across" in p.stdout


@pytest.mark.timeout(120)
def test_patterns_and_plots(tmp_path):
    pytest.importorskip("matplotlib")
    p = run_bench("barrier", "1:n", "pairs", "--sizes", "1K", "--iters-scale", "0.02",
                  "--pairs", "2", "--plot", str(tmp_path / "plots"), timeout=100)
    assert p.returncode == 0, p.stdout + p.stderr
    pairs = p.stdout.split("# mmpi-bench pairs:")[1].splitlines()
    assert [ln.split()[0] for ln in pairs[4:6]] == ["1", "2"]  # 1 and 2 pairs on 2+2
    assert "bridged: 2 low + 2 high ranks" in pairs[1], pairs[:3]
    assert sorted(x.name for x in (tmp_path / "plots").iterdir()) == [
        "1_to_n.png", "barrier.png", "pairs.png", "ratios.png"]


@pytest.mark.timeout(120)
def test_bind_runs_both_ways_bound(tmp_path):
    """--bind: the native job and the bridged one (paired, forwarder on the last core) run."""
    out = tmp_path / "out.json"
    p = run_bench("barrier", "--bind", "--iters-scale", "0.02", "--json", str(out),
                  timeout=100)
    assert p.returncode == 0, p.stdout + p.stderr
    doc = json.loads(out.read_text())
    (row,) = doc["results"]
    assert row["native"]["value"] > 0 and row["bridged"]["value"] > 0, row
    assert "(bound: native ranks to cores in turn;" in p.stdout
    assert "--bind" in doc["environment"]["command"]


@pytest.mark.timeout(150)
def test_overlap_native_async_and_bridged(tmp_path):
    """The overlap benchmarks run in all three modes and give percentages with their times."""
    out = tmp_path / "out.json"
    p = run_bench("iallreduce", "isendrecv", "--sizes", "64K", "--iters-scale", "0.02",
                  "--reps", "3", "--json", str(out), timeout=130)
    assert p.returncode == 0, p.stdout + p.stderr
    doc = json.loads(out.read_text())
    got = {r["bench"]: r for r in doc["results"]}
    assert set(got) == {"iallreduce", "isendrecv"}
    for r in got.values():
        assert r["unit"] == "%"
        for mode in ("native", "async", "bridged"):
            side = r[mode]
            assert 0.0 <= side["value"] <= 100.0, r
            assert side["pure_us"] > 0 and side["overall_us"] > 0 and side["compute_us"] > 0, r
    runs = {x["mode"]: x for x in doc["runs"]}
    assert runs["async"]["worker"]["async_progress"] == "1"
    assert runs["native"]["worker"]["async_progress"] == "0"
    assert "Native async %" in p.stdout


@pytest.mark.timeout(150)
def test_loggp_fits_every_path(tmp_path):
    """loggp measures native, across jobs and bridged, and writes each path's regions."""
    out = tmp_path / "out.json"
    p = run_bench("loggp", "--sizes", "8,64,512,4K,32K,256K", "--iters-scale", "0.02",
                  "--reps", "3", "--json", str(out), timeout=130)
    assert p.returncode == 0, p.stdout + p.stderr
    doc = json.loads(out.read_text())
    regions = doc["loggp"]
    assert {r["path"] for r in regions} == {"native", "across", "bridged"}
    for r in regions:
        assert set(r) == {"L", "o_s", "o_r", "g", "G", "from", "to", "path"}, r
        assert r["from"] <= r["to"] and r["g"] >= 0 and r["G"] >= 0, r
    for path in ("native", "across", "bridged"):
        mine = [r for r in regions if r["path"] == path]
        assert mine[0]["from"] == 8 and mine[-1]["to"] == 256 * 1024, mine
        assert [r["from"] for r in mine] == sorted(r["from"] for r in mine)
    assert "# LogGP parameters" in p.stdout and "the forwarder adds" in p.stdout
