"""The measuring scripts in benchmarks/ still run against the library they measure.

`coll_phases.py`, `busy_slope.py` and `allreduce_parts.py` repeat the steps of mmpi's
collectives with the library's internals, so a change to those internals can break them
silently; `poll_loops.py` times user polling loops. Each runs briefly here and must print its
figures; the figures themselves are not judged (timing belongs to benchmarks/RESULTS.md, not
to tests).
"""

import re

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
