"""Every way a rank can leave ends a job whose other ranks still wait for it, within seconds,
naming the rank and how it left (the rank watch, launch/_watch.py, and Hydra's own account)."""

import re
import subprocess
import sys
import time
import uuid

import pytest
from conftest import PROGS, mmpi_run_cmd

pytestmark = pytest.mark.mpi


def _vanish(tmp_path, mode: str, victim: int, wait: str, low: int = 2, high: int = 2):
    """Run vanish.py under mmpi-run; return (process, output, seconds from fault to exit)."""
    marker = f"vanish-{uuid.uuid4().hex[:10]}"
    cmd = [*mmpi_run_cmd(), "--low", str(low), "--high", str(high), sys.executable,
           str(PROGS / "vanish.py"), mode, str(victim), wait, marker]
    # (in tmp_path: a failed run keeps its log in the current directory)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=tmp_path)
    ended = time.time()
    out = p.stdout + p.stderr
    fault = re.search(r"FAULT (\d+\.\d+)", out)
    assert fault, out
    took = ended - float(fault[1])
    print(f"\n{mode} of rank {victim} ({low}+{high}, others in {wait}): fault -> exit "
          f"{took:.2f} s")
    return p, out, took


def _who(victim: int, low: int) -> str:
    cluster, local = ("low", victim) if victim < low else ("high", victim - low)
    return rf"rank {victim} \({cluster}:{local}, pid \d+\)"


@pytest.mark.timeout(90)
@pytest.mark.parametrize(("low", "high", "victim", "wait"), [
    (2, 2, 2, "recv"), (2, 2, 1, "barrier"), (3, 1, 3, "recv"), (3, 1, 1, "barrier"),
])
def test_os_exit_0_ends_the_job(tmp_path, low, high, victim, wait):
    """MPI reports nothing and Hydra waits (status 0): this job used to hang for ever."""
    p, out, took = _vanish(tmp_path, "os-exit", victim, wait, low, high)
    assert p.returncode != 0, out
    assert re.search(rf"mmpi-run: {_who(victim, low)} left without finalizing: os._exit or "
                     "a crash", out), out
    assert "got past" not in out, out
    assert took < 5, f"took {took:.1f} s:\n{out}"


@pytest.mark.timeout(90)
@pytest.mark.parametrize(("mode", "how", "limit"), [
    ("sigkill", r"was killed by signal 9 \(SIGKILL\)", 5),
    ("raise", "raised RuntimeError: rank 2 gives up", 5),
    # The rank finalizes: the others learn that it has gone, and a receive from it fails
    # once nothing matched for 3 s (mmpi.errors.RankGone).
    ("sys-exit", "", 10),
    ("return", "", 10),
])
def test_every_other_way_of_leaving_ends_the_job(tmp_path, mode, how, limit):
    p, out, took = _vanish(tmp_path, mode, 2, "recv")
    assert p.returncode != 0, out
    if how:
        assert re.search(rf"mmpi-run: {_who(2, 2)} {how}", out), out
    else:
        assert re.search(r"mmpi-run: rank \d \(\w+:\d, pid \d+\) raised mmpi.errors.RankGone: "
                         r"Recv on rank \d: rank 2 has already finalized", out), out
    assert "got past" not in out, out
    assert took < limit, f"took {took:.1f} s:\n{out}"
