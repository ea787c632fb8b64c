"""What mpi4py's own tests and demos found unlike mpi4py, bridged: now as natively, or loudly not.

progs/mpi4py_edges.py natively (4 ranks) and bridged (2+2) must print the same lines, except
where the bridge cannot do what MPI does and says so: COMM_WORLD spans both clusters, so it
has no native handle (`handle`, `_handleof`, `_addressof`, `py2f`, mpi4py's C API raise
NotBridged instead of handing C code MPI_COMM_NULL). progs/init_later.py runs mpi4py's
init-fini demos' cases (mpi4py.rc.initialize = False, no Init at all, mpi4py.rc deleted).
"""

import re

import pytest

pytestmark = pytest.mark.mpi
LINE = re.compile(r"(rank \d+: .*)$")
# natively the world's native handle; bridged, none exists (docs/bridged.md, "Not bridged")
NO_WORLD_HANDLE = ("world handle", "world _handleof", "world _addressof", "world py2f",
                   "world C API")


def _lines(text: str) -> list[str]:
    return sorted(m.group(1) for m in map(LINE.search, text.splitlines()) if m)


@pytest.mark.timeout(240)
def test_classes_frees_pickles_errors_docs_and_handles_as_natively(native, bridged):
    want = native("mpi4py_edges.py", n=4, timeout=90)
    assert want.returncode == 0, want.output[-3000:]
    got = bridged("mpi4py_edges.py", low=2, high=2, timeout=150)
    assert got.returncode == 0, got.output[-3000:]
    expected = []
    for line in _lines(want.stdout):
        rank, rest = line.split(": ", 1)
        check = next((c for c in NO_WORLD_HANDLE if rest.startswith(c + " ")), None)
        if check is not None:
            assert rest == f"{check} True", line  # natively the handle works
            line = f"{rank}: {check} NotBridged"
        expected.append(line)
    assert len(expected) == 4 * 28, want.output[-3000:]
    lines = _lines(got.stdout)
    missing = [x for x in expected if x not in lines]
    extra = [x for x in lines if x not in expected]
    assert not missing and not extra, f"native only {missing[:10]}\nbridged only " \
        f"{extra[:10]}\n{got.output[-3000:]}"


@pytest.mark.timeout(240)
@pytest.mark.parametrize("mode", ["init", "init_thread", "never", "no_rc"])
def test_mpi_starts_when_mpi4py_rc_says(native, bridged, mode):
    want = native("init_later.py", mode, n=2, timeout=60)
    assert want.returncode == 0, want.output[-3000:]
    got = bridged("init_later.py", mode, low=1, high=1, timeout=120)
    assert got.returncode == 0, got.output[-3000:]
    if mode == "never":  # no rank, no MPI: one line per process
        for job in (want, got):
            assert job.stdout.count("never: initialized at import False") == 2, job.output
        return
    expected = _lines(want.stdout)
    assert f"rank 1: {mode} sum 1 of 2" in expected, want.output[-3000:]
    assert f"rank 0: {mode} initialized at import {mode == 'no_rc'}" in expected
    assert _lines(got.stdout) == expected, got.output[-3000:]
