"""The measuring scripts in benchmarks/ still run against the library they measure.

`coll_phases.py`, `busy_slope.py`, `allreduce_parts.py`, `allreduce_entry.py`, `barrier_lean.py`
and `pingpong_lean.py` repeat the steps of mmpi's collectives and messages with the library's
internals, so a change to those internals can break them silently; `poll_loops.py` times user
polling loops; `floor/coll.c` is the C floor of the bridged collectives and `floor/coll.py` its
bare-mpi4py twin (either side may be C and the other Python), `floor/pairs.c` the floor of
concurrent pairs. Each runs briefly here and must print its figures; the figures themselves are
not judged (timing belongs to benchmarks/RESULTS.md, not to tests).
"""

import re
import shutil
import subprocess
import sys

import pytest
from conftest import ROOT

pytestmark = pytest.mark.mpi
BENCH = ROOT / "benchmarks"


@pytest.mark.timeout(120)
@pytest.mark.parametrize("what,size,steps", [
    ("barrier", None, ["native barrier", "crossing", "native barrier", "Barrier"]),
    ("allreduce", "8", ["reduce to leader", "crossing", "bcast", "Allreduce"]),
    ("allreduce", "1048576", ["reduce-scatter", "crossing in shares", "allgather", "Allreduce"]),
    ("alltoall", "16384", ["gather at leader", "crossing", "scatter", "Alltoall"]),
    ("alltoall", "65536", ["local blocks", "crossing straight to the ranks", "Alltoall"]),
])
def test_coll_phases_times_every_step_on_every_rank(bridged, what, size, steps):
    job = bridged(str(BENCH / "coll_phases.py"), what, *([size] if size else []), timeout=100)
    assert job.returncode == 0, job.output
    pattern = ", ".join(rf"{re.escape(s)} \d+ us" for s in steps)
    lines = re.findall(rf"rank \d {what} .*B: {pattern}$", job.stdout, re.M)
    assert len(lines) == 4, job.output


@pytest.mark.timeout(120)
@pytest.mark.parametrize("how", ["wait", "test", "iprobe", "work"])
def test_poll_loops_report_a_one_way_time(bridged, how):
    job = bridged(str(BENCH / "poll_loops.py"), how, "200", low=1, high=1, timeout=100)
    assert job.returncode == 0, job.output
    assert re.search(rf"{how}: \d+\.\d us one way", job.stdout), job.output


@pytest.mark.timeout(120)
def test_busy_slope_reports_four_variants_and_a_slope(bridged):
    job = bridged(str(BENCH / "busy_slope.py"), "4", low=2, high=2, timeout=100)
    assert job.returncode == 0, job.output
    assert re.search(r"call us: 0: \d+, 10: \d+, 20: \d+, 40: \d+; slope -?\d+\.\d$",
                     job.stdout, re.M), job.output
    assert len(re.findall(r"rank \d cpu us per call: 0: \d+, 10: \d+, 20: \d+, 40: \d+$",
                          job.stdout, re.M)) == 4, job.output


@pytest.mark.timeout(120)
def test_allreduce_parts_reports_the_four_ways(bridged):
    job = bridged(str(BENCH / "allreduce_parts.py"), "2", low=2, high=2, timeout=100)
    assert job.returncode == 0, job.output
    assert re.search(r"us per call: Barrier \d+, Allreduce \d+, bare body \d+, "
                     r"bare body with barriers \d+$", job.stdout, re.M), job.output


@pytest.mark.timeout(120)
@pytest.mark.parametrize("ways,pattern", [
    ("public,plain,checks,busy,internals",
     r"us per call, median of 2 rounds: public [\d.]+, plain [\d.]+, checks [\d.]+, busy "
     r"[\d.]+, internals [\d.]+$"),
    (None, r"public [\d.]+, plain [\d.]+; plain faster in [012] of 2 rounds$"),  # the default
])
def test_allreduce_entry_reports_its_ways(bridged, ways, pattern):
    args = ["2"] + ([ways] if ways else [])
    job = bridged(str(BENCH / "allreduce_entry.py"), *args, low=2, high=2, timeout=100)
    assert job.returncode == 0, job.output
    assert re.search(pattern, job.stdout, re.M), job.output


# Each bare way runs beside the library's in one job, so a way that takes another's message
# (a crossing or eager message taken twice or not at all, a call not counted) fails the job
# or hangs it. Two short rounds each.
_LEAN = {
    "barrier_lean.py": (("2", "20"), 2, (
        r"us per call, median of 2 rounds: Barrier [\d.]+, ctx body [\d.]+, lean [\d.]+, "
        r"engine body [\d.]+$", r"faster than .* in \d+ of 2 rounds$"), 6),
    "pingpong_lean.py": (("2", "50"), 1, (
        r"us one way, median of 2 rounds: Send/Recv [\d.]+, lean [\d.]+; "
        r"lean faster in \d of 2 rounds$", r"lean faster"), 1),
}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("script", sorted(_LEAN))
def test_lean_ways_run_in_step_with_the_library(bridged, script):
    args, per_cluster, (summary, pairs), npairs = _LEAN[script]
    job = bridged(str(BENCH / script), *args, low=per_cluster, high=per_cluster, timeout=100)
    assert job.returncode == 0, job.output
    assert re.search(summary, job.stdout, re.M), job.output
    assert len(re.findall(pairs, job.stdout, re.M)) == npairs, job.output


def _compile(tmp_path, name):
    cc = shutil.which("mpicc_abi")
    assert cc, "mpicc_abi (from the mpich wheel) is not on PATH"
    exe = tmp_path / name
    subprocess.run([cc, "-O2", "-o", str(exe), str(BENCH / "floor" / f"{name}.c")], check=True,
                   timeout=60)
    return exe


def _relayed(exe, tmp_path, n, args, ranks=None):
    """Run a floor's relay job (program exe) and its two n-rank cluster jobs (program ranks,
    else exe as well); their outputs. A program is a path or a command list."""
    def cmd(prog):
        return [str(p) for p in (prog if isinstance(prog, list) else [prog])]

    jobs = [subprocess.Popen(["mpiexec", "-n", str(k), *cmd(prog), role, str(tmp_path), *args],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            for role, k, prog in (("relay", 1, exe), ("low", n, ranks or exe),
                                  ("high", n, ranks or exe))]
    try:
        outs = [j.communicate(timeout=60)[0] for j in jobs]
    finally:
        for j in jobs:
            j.kill()
    assert [j.returncode for j in jobs] == [0, 0, 0], outs
    return outs


@pytest.mark.timeout(120)
@pytest.mark.parametrize("op,size", [("allreduce", 8), ("allreduce", 1 << 20), ("bcast", 1 << 20),
                                     ("alltoall", 1 << 16)])
def test_coll_floor_runs_relayed_and_native(tmp_path, op, size):
    # benchmarks/floor/coll.c, the bridged algorithms in C: three jobs joined by Comm_connect
    # (a relay and two clusters) and MPICH's own collective; each checks its result.
    exe = _compile(tmp_path, "coll")
    args = [op, "20", str(size)]
    outs = _relayed(exe, tmp_path, 2, args)
    for cluster, out in zip(("low", "high"), outs[1:], strict=True):
        assert re.search(rf"C relayed {op} {size} B on 2\+2 ranks, {cluster} cluster: "
                         rf"\d+\.\d us$", out, re.M), outs
    native = subprocess.run(["mpiexec", "-n", "4", str(exe), "native", "-", *args],
                            capture_output=True, text=True, timeout=60)
    assert native.returncode == 0, native.stdout + native.stderr
    assert re.search(rf"C native {op} {size} B on 4 ranks: \d+\.\d us$", native.stdout,
                     re.M), native.stdout


PYCOLL = [sys.executable, str(BENCH / "floor" / "coll.py")]


@pytest.mark.timeout(150)
@pytest.mark.parametrize("op,size", [("allreduce", 8), ("bcast", 1 << 20), ("alltoall", 1 << 16)])
def test_python_coll_floor_runs_with_its_own_relay_and_with_the_c_one(tmp_path, op, size):
    # benchmarks/floor/coll.py, coll.c in bare mpi4py: Python relay and ranks, then Python
    # ranks through coll.c's relay (the same wire), and mpi4py's own collective; the ranks
    # check their result.
    args = [op, "20", str(size)]
    for relay in (PYCOLL, _compile(tmp_path, "coll")):
        d = tmp_path / ("py" if relay is PYCOLL else "c")
        d.mkdir()
        outs = _relayed(relay, d, 2, args, ranks=PYCOLL)
        for cluster, out in zip(("low", "high"), outs[1:], strict=True):
            assert re.search(rf"^python relayed {op} {size} B on 2\+2 ranks, {cluster} "
                             rf"cluster: \d+\.\d us$", out, re.M), outs
    native = subprocess.run(["mpiexec", "-n", "4", *PYCOLL, "native", "-", *args],
                            capture_output=True, text=True, timeout=60)
    assert native.returncode == 0, native.stdout + native.stderr
    assert re.search(rf"^python native {op} {size} B on 4 ranks: \d+\.\d us$", native.stdout,
                     re.M), native.stdout


@pytest.mark.timeout(120)
def test_python_coll_floor_separates_calls_as_mmpi_does_when_asked(tmp_path, monkeypatch):
    # SETTLE=polled (run.sh bcast): the calls are separated by Ibarriers and the leaders' swap
    # with yielding waits, as mmpi's Barrier separates them; the line says so. A misspelt
    # SETTLE is refused by name before any job starts.
    monkeypatch.setenv("SETTLE", "polled")
    outs = _relayed(PYCOLL, tmp_path, 2, ["bcast", "20", str(1 << 20)], ranks=PYCOLL)
    for cluster, out in zip(("low", "high"), outs[1:], strict=True):
        assert re.search(rf"^python relayed bcast {1 << 20} B on 2\+2 ranks, polled settle, "
                         rf"{cluster} cluster: \d+\.\d us$", out, re.M), outs
    monkeypatch.setenv("SETTLE", "poled")
    bad = subprocess.run(["mpiexec", "-n", "1", *PYCOLL, "low", str(tmp_path), "bcast", "1", "8"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "SETTLE='poled': expected blocking or polled" in bad.stderr, \
        bad.stdout + bad.stderr


@pytest.mark.timeout(120)
def test_python_coll_floor_times_mmpi_s_barrier_in_bare_python(tmp_path):
    # coll.py barrier (run.sh barrier): back-to-back barriers of mmpi's structure through its
    # relay, and mpi4py's own Barrier; the relay counts the crossings, so a barrier that
    # skipped its leaders' swap would leave it waiting (and the test would time out).
    outs = _relayed(PYCOLL, tmp_path, 2, ["barrier", "100", "0"], ranks=PYCOLL)
    for cluster, out in zip(("low", "high"), outs[1:], strict=True):
        assert re.search(rf"^python relayed barrier 0 B on 2\+2 ranks, {cluster} cluster: "
                         rf"\d+\.\d us$", out, re.M), outs
    native = subprocess.run(["mpiexec", "-n", "4", *PYCOLL, "native", "-", "barrier", "100", "0"],
                            capture_output=True, text=True, timeout=60)
    assert native.returncode == 0, native.stdout + native.stderr
    assert re.search(r"^python native barrier 0 B on 4 ranks: \d+\.\d us$", native.stdout,
                     re.M), native.stdout


@pytest.mark.timeout(120)
def test_pairs_floor_streams_through_the_relay(tmp_path):
    # benchmarks/floor/pairs.c: 2 concurrent pairs through a C relay, messages of two chunks
    # and a partial one; each high rank checks what its low rank sent.
    exe = _compile(tmp_path, "pairs")
    outs = _relayed(exe, tmp_path, 2, ["2", "1", str((2 << 20) + 5)])
    assert re.search(r"^C relayed 2 pair\(s\) of 2097157 B streams: \d+ MB/s$", outs[1],
                     re.M), outs


@pytest.mark.timeout(120)
def test_borderline_runs_write_json_and_a_summary_of_the_targets(tmp_path):
    # benchmarks/borderline.sh: real mmpi-bench runs of the targets at the line, summarized
    # by benchmarks/targets.py; two runs, no gap between them.
    out = subprocess.run(["bash", str(BENCH / "borderline.sh"), "2", str(tmp_path), "0"],
                         capture_output=True, text=True, timeout=110)
    assert out.returncode == 0, out.stdout + out.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run-1.json", "run-2.json"]
    for name in ("barrier", "allreduce 8 B", "allreduce 1 MiB", "bcast 1 MiB"):
        assert re.search(rf"^{name} +<= [\d.]+ +\d+\.\d+ .* \d of 2 *$", out.stdout,
                         re.M), out.stdout
