"""The same mpi4py programs natively (mpiexec -n N) and bridged (mmpi-run, several layouts):
every line of results they print must be the same.

Each program prints `rank R: <check> <value>` lines; natively it imports mpi4py, bridged mmpi
(or, with the import hook, mpi4py again). Any difference is a conformance failure.
"""

import re
import sys
from pathlib import Path

import pytest
from conftest import MPIEXEC, _run, mmpi_run_cmd

pytestmark = pytest.mark.mpi
PROGS = Path(__file__).parent / "progs"
LAYOUTS = [(2, 2), (1, 3), (3, 2)]
LINE = re.compile(r"(rank \d+: .*)$")


def _results(text: str) -> list[str]:
    return sorted(m.group(1) for m in map(LINE.search, text.splitlines()) if m)


_NATIVE: dict = {}  # (program, ranks, args) -> its native job: the same whatever the bridge does


def _native(prog: str, n: int, *args: str):
    key = (prog, n, args)
    if key not in _NATIVE:
        _NATIVE[key] = _run([MPIEXEC, "-n", str(n), sys.executable, str(PROGS / prog), *args],
                            120)
    return _NATIVE[key]


def _bridged(prog: str, low: int, high: int, *args: str, progress: str = "off"):
    return _run([*mmpi_run_cmd(), "--low", str(low), "--high", str(high), "--progress",
                 progress, sys.executable, str(PROGS / prog), *args], 150)


def check_same(prog: str, low: int, high: int, *args: str, progress: str = "off") -> None:
    native = _native(prog, low + high, *args)
    assert native.returncode == 0, native.output[-3000:]
    bridged = _bridged(prog, low, high, "--mmpi", *args, progress=progress)
    assert bridged.returncode == 0, bridged.output[-4000:]
    want, got = _results(native.stdout), _results(bridged.stdout)
    assert want, native.output[-2000:]
    missing = [x for x in want if x not in got]
    extra = [x for x in got if x not in want]
    assert not missing and not extra, f"differ: native only {missing[:8]}, bridged only " \
        f"{extra[:8]}\n{bridged.output[-2000:]}"


@pytest.mark.timeout(300)
@pytest.mark.parametrize("low,high", LAYOUTS)
def test_communicators_groups_and_attributes(low, high):
    check_same("comms.py", low, high)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("low,high", LAYOUTS)
def test_send_modes_and_requests(low, high):
    check_same("sendmodes.py", low, high)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("low,high", LAYOUTS)
def test_nonblocking_collectives(low, high):
    check_same("nbc.py", low, high)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("low,high", LAYOUTS)
def test_cartesian_halo_exchange_and_graphs(low, high):
    check_same("cart.py", low, high)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("low,high", [(2, 2), (1, 2)])
def test_in_place_by_none_and_vector_counts(low, high):
    check_same("inplace.py", low, high)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("prog,progress", [
    ("comms.py", "leaders"), ("sendmodes.py", "leaders"), ("nbc.py", "leaders"),
    ("nbc.py", "all"), ("cart.py", "leaders"), ("inplace.py", "leaders"),
    ("fortran.py", "leaders"), ("persistent.py", "leaders"), ("intercomm.py", "leaders"),
    ("rma.py", "leaders"), ("file_io.py", "leaders")])
def test_every_program_with_progress_threads(prog, progress, tmp_path):
    """The same answers with a progress thread in the leaders (or every rank) as without."""
    args = (str(tmp_path),) if prog == "file_io.py" else ()  # where its files go
    check_same(prog, 2, 2, *args, progress=progress)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("low,high", [(2, 2), (1, 3)])
def test_fortran_ordered_arrays(low, high):
    check_same("fortran.py", low, high)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("low,high", [(2, 2), (1, 3)])
def test_persistent_collectives_and_partitioned_calls(low, high):
    check_same("persistent.py", low, high)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("low,high", LAYOUTS)
def test_intercommunicators(low, high):
    check_same("intercomm.py", low, high)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("low,high", [(2, 2), (1, 3)])
def test_mpi4py_futures_pool_and_comm_executors(low, high):
    # MPIPoolExecutor under `python -m mpi4py.futures` (manager and workers joined by an
    # intercommunicator), and MPICommExecutor inside a program
    prog = str(PROGS / "futures.py")
    for args in (["-m", "mpi4py.futures", prog], [prog, "--comm"]):
        native = _run([MPIEXEC, "-n", str(low + high), sys.executable, *args], 120)
        assert native.returncode == 0, native.output[-3000:]
        bridged = _run([*mmpi_run_cmd(), "--low", str(low), "--high", str(high),
                        sys.executable, *args], 150)
        assert bridged.returncode == 0, bridged.output[-4000:]
        want, got = _results(native.stdout), _results(bridged.stdout)
        assert want and want == got, f"native {want}\nbridged {got}\n{bridged.output[-2000:]}"


@pytest.mark.timeout(300)
@pytest.mark.parametrize("low,high", [(2, 2), (1, 3)])
def test_mpi_io_files_across_the_zipper(low, high, tmp_path):
    # both clusters in one file system here: one native file per cluster (mmpi/_io/file.py)
    check_same("file_io.py", low, high, str(tmp_path))


@pytest.mark.timeout(300)
@pytest.mark.parametrize("low,high", [(2, 2), (1, 3)])
def test_one_sided_windows_across_the_zipper(low, high):
    # operations as messages the target serves (mmpi/_rma/window.py): fences, locks, PSCW
    check_same("rma.py", low, high)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("low,high,progress", [(2, 2, "off"), (1, 3, "all")])
def test_mpi4py_util_sync_mutex_counter_condition(low, high, progress):
    # an MCS lock in a window, polled with Flush to itself (mmpi/_rma/window.py Rule 4); with
    # a progress thread serving the window alongside the program's calls
    check_same("mutex.py", low, high, progress=progress)
