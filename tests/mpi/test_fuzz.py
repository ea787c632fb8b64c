"""The communicator fuzz (progs/commfuzz.py), natively and bridged in several layouts.

Short in CI. On demand, longer and over more seeds, e.g. `MMPI_FUZZ_SECONDS=300
MMPI_FUZZ_SEEDS=1,2,3 MMPI_INTERFUZZ_ROUNDS=40 pytest tests/mpi/test_fuzz.py`: each seed runs
in every layout. The native run checks the fuzz itself (its expectations are MPI's answers).
"""

import os
import re

import pytest

pytestmark = pytest.mark.mpi

SECONDS = float(os.environ.get("MMPI_FUZZ_SECONDS", "4"))
SEEDS = [int(s) for s in os.environ.get("MMPI_FUZZ_SEEDS", "").split(",") if s]
LAYOUTS = [(2, 2, ()), (1, 3, ()), (3, 2, ()), (2, 2, ("--forwarders", "2"))]
LIMIT = SECONDS * 4 + 120  # a hang fails; a slow machine does not
OK = re.compile(r"rank (\d+): fuzz ok seed \d+ phases (\d+) communicators (\d+) collectives "
                r"(\d+) batches (\d+) messages (\d+) bytes (\d+)")


def _cases():
    if SEEDS:
        return [(*layout, seed) for seed in SEEDS for layout in LAYOUTS]
    return [(*layout, 100 + i) for i, layout in enumerate(LAYOUTS)]


def _checked(job, ranks: int) -> list[tuple[int, ...]]:
    assert job.returncode == 0, job.output[-6000:]
    found = [tuple(map(int, m.groups())) for m in OK.finditer(job.stdout)]
    assert sorted(f[0] for f in found) == list(range(ranks)), job.output[-4000:]
    assert all(f[1] > 0 for f in found), job.output[-2000:]
    return found


@pytest.mark.timeout(LIMIT)
def test_the_fuzz_holds_natively(native):
    _checked(native("commfuzz.py", "7", str(min(SECONDS, 4)), n=5, timeout=LIMIT - 10), 5)


@pytest.mark.timeout(LIMIT)
@pytest.mark.parametrize("low,high,extra,seed", _cases(),
                         ids=lambda v: "-".join(v) if isinstance(v, tuple) else str(v))
def test_the_fuzz_holds_bridged(bridged, low, high, extra, seed):
    job = bridged("commfuzz.py", str(seed), str(SECONDS), low=low, high=high,
                  launcher_args=extra, timeout=LIMIT - 10)
    found = _checked(job, low + high)
    calls = sum(f[4] for f in found)
    messages = sum(f[6] for f in found)
    assert calls > 0 and messages > 0, job.output[-2000:]


# With progress threads (MMPI_PROGRESS): the same fuzz, the threads advancing its
# non-blocking collectives and messages between the program's calls.
PROGRESS_CASES = [(2, 2, ("--progress", "all"), 200), (1, 3, ("--progress", "leaders"), 201),
                  (2, 2, ("--forwarders", "2", "--progress", "all"), 202)]


@pytest.mark.timeout(LIMIT)
@pytest.mark.parametrize("low,high,extra,seed", PROGRESS_CASES,
                         ids=lambda v: "-".join(v) if isinstance(v, tuple) else str(v))
def test_the_fuzz_holds_with_progress_threads(bridged, low, high, extra, seed):
    job = bridged("commfuzz.py", str(seed), str(SECONDS), low=low, high=high,
                  launcher_args=extra, timeout=LIMIT - 10)
    found = _checked(job, low + high)
    assert sum(f[4] for f in found) > 0 and sum(f[6] for f in found) > 0, job.output[-2000:]


# The intercommunicator fuzz (progs/interfuzz.py): random groups, every buffer collective,
# blocking and not. Natively all blocking (MPICH 5.0.2 hangs on an intercommunicator after an
# Ibcast with MPI.PROC_NULL ranks), which checks the fuzz's own expectations.
INTER_ROUNDS = int(os.environ.get("MMPI_INTERFUZZ_ROUNDS", "4"))
INTER_OK = re.compile(r"rank (\d+): interfuzz ok seed \d+ rounds \d+ calls (\d+)")


def _inter_checked(job, ranks: int) -> None:
    assert job.returncode == 0, job.output[-6000:]
    found = [tuple(map(int, m.groups())) for m in INTER_OK.finditer(job.stdout)]
    assert sorted(f[0] for f in found) == list(range(ranks)) and all(f[1] > 0 for f in found), \
        job.output[-4000:]


@pytest.mark.timeout(LIMIT)
def test_the_intercommunicator_fuzz_holds_natively(native):
    _inter_checked(native("interfuzz.py", "7", str(INTER_ROUNDS), "--blocking", n=5,
                          timeout=LIMIT - 10), 5)


@pytest.mark.timeout(LIMIT)
@pytest.mark.parametrize("low,high,seed", [(2, 2, 7), (1, 3, 8)] if not SEEDS else
                         [(lo, hi, s) for s in SEEDS for lo, hi in ((2, 2), (1, 3), (3, 2))])
def test_the_intercommunicator_fuzz_holds_bridged(bridged, low, high, seed):
    _inter_checked(bridged("interfuzz.py", str(seed), str(INTER_ROUNDS), "--mmpi", low=low,
                           high=high, timeout=LIMIT - 10), low + high)
