"""mmpi-run names the rank (virtual and cluster-local) behind a failure, cause first."""
# ruff: noqa: D103  (test names say what they check)

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import time
import uuid

import pytest
from conftest import PROGS, mmpi_run_cmd

pytestmark = pytest.mark.mpi


def _run_fault(mode: str, victim: int) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """Run faults.py on 2+2 ranks; return the process and mmpi-run's own report lines."""
    marker = f"report-{uuid.uuid4().hex[:10]}"
    cmd = [*mmpi_run_cmd(), "--low", "2", "--high", "2", sys.executable,
           str(PROGS / "faults.py"), mode, str(victim), marker]  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="mmpi-test-") as cwd:  # where the log is kept
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=cwd)
        ours = [line for line in p.stderr.splitlines() if line.startswith("mmpi-run: ")]
        # Last, where the whole story is: every line of every rank.
        assert ours[-1].startswith(f"mmpi-run: the output of every rank and forwarder is in {cwd}")
        ours = ours[:-1]
    _no_orphans(marker)
    return p, ours


def _no_orphans(marker: str) -> None:
    deadline = time.monotonic() + 5
    while True:
        left = subprocess.run(["pgrep", "-af", marker], capture_output=True, text=True).stdout
        if not left.strip() or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert not left.strip(), f"processes left behind:\n{left}"


@pytest.mark.timeout(90)
def test_killed_rank_is_named_first():
    p, ours = _run_fault("kill", 2)
    out = p.stdout + p.stderr
    assert p.returncode == 137, out  # 128 + SIGKILL, as in the shell
    # The cause, whichever job mmpi-run saw exit first (the forwarder often aborts before
    # Hydra reports the killed rank: UCX was copying from the rank's cluster peer).
    assert re.fullmatch(
        r"mmpi-run: rank 2 \(high:0, pid \d+\) was killed by signal 9 \(SIGKILL\); "
        r"cluster 'high' exited with status 9(; stopping the other jobs)?",
        ours[0],
    ), out
    # A recap closes the report when mmpi-run had jobs left to stop (the report's last line
    # then says so); when every job had already ended on its own, there is nothing to recap.
    stopping = any(line.endswith("; stopping the other jobs") for line in ours)
    if stopping:
        assert ours[-1].startswith("mmpi-run: stopped "), out
        assert ours[-1].endswith(
            "(rank 2 (high:0) was killed by signal 9 (SIGKILL)); exit status 137"), out
    consequences = ours[1:-1] if stopping else ours[1:]
    # Every consequence after the cause, naming what the forwarder lost when UCX said so;
    # the other ranks that failed in one line.
    for line in consequences:
        assert re.match(r"mmpi-run: (then |\d+ other ranks? failed )", line), out
        assert "rank 2" not in line or "after losing" in line, out


@pytest.mark.timeout(90)
def test_rank_that_raised_is_named():
    p, ours = _run_fault("raise", 3)
    out = p.stdout + p.stderr
    assert p.returncode == 1, out
    assert re.match(
        r"mmpi-run: rank 3 \(high:1, pid \d+\) raised RuntimeError: injected failure on rank 3; "
        r"cluster 'high' exited with status 1",
        ours[0],
    ), out


@pytest.mark.timeout(90)
def test_rank_that_exited_is_named():
    p, ours = _run_fault("exit", 1)
    out = p.stdout + p.stderr
    assert p.returncode == 3, out
    assert re.match(
        r"mmpi-run: rank 1 \(low:1, pid \d+\) called sys\.exit\(3\); cluster 'low' exited with "
        r"status 3",
        ours[0],
    ), out


@pytest.mark.timeout(90)
def test_killed_forwarder_is_named_not_the_ranks_that_lost_it():
    p, ours = _run_fault("kill-forwarder", 1)
    out = p.stdout + p.stderr
    assert p.returncode == 137, out
    assert re.match(
        r"mmpi-run: forwarder 'fwd0' \(pid \d+\) was killed by signal 9 \(SIGKILL, exit status 9\)",
        ours[0],
    ), out


# -- the cause, named once ------------------------------------------------------------------------

def _run_case(case: str) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """Run first_failure.py CASE on 2+2 ranks; return the process and mmpi-run's lines."""
    cmd = [*mmpi_run_cmd(), "--low", "2", "--high", "2", sys.executable,
           str(PROGS / "first_failure.py"), case]
    with tempfile.TemporaryDirectory(prefix="mmpi-test-") as cwd:  # where the log is kept
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=cwd)
    return p, [line for line in p.stderr.splitlines() if line.startswith("mmpi-run: ")]


@pytest.mark.timeout(90)
def test_a_truncated_receive_is_the_cause_not_the_ranks_it_left_waiting():
    p, ours = _run_case("truncate")
    out = p.stdout + p.stderr
    assert p.returncode == 1, out
    error = ("TruncationError: Recv on rank 3: message from rank 0 with tag 7 has 100 bytes but "
             "the receive buffer holds only 10 (MPI_ERR_TRUNCATE)")
    assert p.stderr.splitlines()[0] == ours[0], out  # the first line says what was wrong
    cause = (r"mmpi-run: rank 3 \(high:1, pid \d+\) raised mmpi\.errors\." + re.escape(error)
             + r"; cluster 'high' exited with status 1(; stopping the other jobs)?")
    assert re.fullmatch(cause, ours[0]), out
    assert p.stderr.count(error) == 1, out  # given once: not again in its traceback, nor recap
    # its traceback shows where in the program, not the frames inside mmpi
    assert '[high:1 v3]   File "' in p.stderr and "mmpi/_" not in p.stderr, out
    assert "RankGone" not in ours[0], out


@pytest.mark.timeout(90)
def test_sys_exit_of_one_rank_is_the_cause_not_a_collective_it_left():
    p, ours = _run_case("exit")
    out = p.stdout + p.stderr
    assert p.returncode == 3, out
    assert re.fullmatch(r"mmpi-run: rank 3 \(high:1, pid \d+\) called sys\.exit\(3\); cluster "
                        r"'high' exited with status 3(; stopping the other jobs)?", ours[0]), out
    assert "Traceback" not in p.stderr, out  # a consequence's traceback is in the log only


@pytest.mark.timeout(90)
def test_an_error_every_rank_raised_is_said_once():
    p, ours = _run_case("not-bridged")
    out = p.stdout + p.stderr
    assert p.returncode == 1, out
    assert re.match(r"mmpi-run: rank \d \(\w+:\d, pid \d+\) raised mmpi\.errors\.NotBridged: "
                    r"Win\.Allocate_shared on a communicator across the zipper is not bridged: "
                    r"two clusters share no memory", ours[0]), out
    assert p.stderr.count("two clusters share no memory") == 1, out
    assert any(re.fullmatch(r"mmpi-run: 3 other ranks failed too: rank \d \(\w+:\d\), rank \d "
                            r"\(\w+:\d\), rank \d \(\w+:\d\) raised NotBridged(; .*)?", line)
               for line in ours), out
