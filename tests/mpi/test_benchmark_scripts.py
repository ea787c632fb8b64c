"""The C floor relays in benchmarks/floor/ still build and run, and check what they move.

`floor.c` times single paths through a bare relay, `coll.c` the bridged collectives' algorithms
end to end, `pairs.c` concurrent streams (docs/performance.md, "Floors"). Each runs briefly here
and must print its figure; the figures themselves are not judged.
"""

import os
import re
import shutil
import signal
import subprocess

import pytest
from conftest import MPIEXEC, ROOT

pytestmark = pytest.mark.mpi
FLOOR = ROOT / "benchmarks" / "floor"


@pytest.fixture
def compiled(tmp_path):
    """compiled(name) -> path of benchmarks/floor/NAME.c built with the wheel's mpicc_abi."""
    cc = shutil.which("mpicc_abi")
    if not cc:
        pytest.skip("mpicc_abi (from the mpich wheel) is not on PATH")
    if not (shutil.which("cc") or shutil.which("gcc")):
        pytest.skip("no C compiler")

    def build(name):
        exe = tmp_path / name
        subprocess.run([cc, "-O2", "-o", str(exe), str(FLOOR / f"{name}.c")], check=True,
                       timeout=60)
        return exe

    return build


def _mpiexec(*args):
    """Start an mpiexec job in its own process group (so it can be stopped whole)."""
    return subprocess.Popen([MPIEXEC, *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)


def _stop(jobs):
    for j in jobs:
        if j.poll() is None:
            try:
                os.killpg(j.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        j.wait()


def _relayed(exe, tmp_path, n, args):
    """Run a floor's relay job and its two n-rank cluster jobs; their outputs."""
    jobs = [_mpiexec("-n", k, exe, role, tmp_path, *args)
            for role, k in (("relay", 1), ("low", n), ("high", n))]
    try:
        outs = [j.communicate(timeout=60)[0] for j in jobs]
    finally:
        _stop(jobs)
    assert [j.returncode for j in jobs] == [0, 0, 0], outs
    return outs


def _native(*args):
    job = _mpiexec(*args)
    try:
        out = job.communicate(timeout=60)[0]
    finally:
        _stop([job])
    assert job.returncode == 0, out
    return out


@pytest.mark.timeout(120)
@pytest.mark.parametrize("op,size", [("allreduce", 8), ("allreduce", 1 << 20), ("bcast", 1 << 20),
                                     ("alltoall", 1 << 16)])
def test_coll_floor_runs_relayed_and_native(compiled, tmp_path, op, size):
    # coll.c, the bridged algorithms in C: three jobs joined by Comm_connect (a relay and two
    # clusters) and MPICH's own collective; each checks its result.
    exe = compiled("coll")
    args = [op, "20", str(size)]
    outs = _relayed(exe, tmp_path, 2, args)
    for cluster, out in zip(("low", "high"), outs[1:], strict=True):
        assert re.search(rf"C relayed {op} {size} B on 2\+2 ranks, {cluster} cluster: "
                         rf"\d+\.\d us$", out, re.M), outs
    native = _native("-n", "4", exe, "native", "-", *args)
    assert re.search(rf"C native {op} {size} B on 4 ranks: \d+\.\d us$", native, re.M), native


@pytest.mark.timeout(120)
@pytest.mark.parametrize("mode,n,args,line", [
    ("pingpong", 3, ["200"], r"us$"),
    ("barrier", 5, ["200"], r"us$"),
    ("xpipe", None, ["2", str(2 << 20), str(1 << 20), "2"], r"MB/s$"),
])
def test_path_floor_runs(compiled, tmp_path, mode, n, args, line):
    # floor.c: a path through a bare relay within one job, or across three one-process jobs
    # joined by Comm_connect (the x modes), as run.sh runs them.
    exe = compiled("floor")
    if n is not None:
        out = _native("-n", n, exe, mode, *args)
        assert re.search(line, out, re.M), out
        return
    port = tmp_path / "port"
    jobs = []
    try:
        for role in ("relay", "low", "high"):
            jobs.append(_mpiexec("-n", 1, exe, mode, role, port, *args))
        outs = [j.communicate(timeout=60)[0] for j in jobs]
    finally:
        _stop(jobs)
    assert [j.returncode for j in jobs] == [0, 0, 0], outs
    assert re.search(line, outs[1], re.M), outs


@pytest.mark.timeout(120)
def test_pairs_floor_streams_through_the_relay(compiled, tmp_path):
    # pairs.c: 2 concurrent pairs through a C relay, messages of two chunks
    # and a partial one; each high rank checks what its low rank sent.
    exe = compiled("pairs")
    outs = _relayed(exe, tmp_path, 2, ["2", "1", str((2 << 20) + 5)])
    assert re.search(r"^C relayed 2 pair\(s\) of 2097157 B streams: \d+ MB/s, \d+ msg/s$",
                     outs[1], re.M), outs
