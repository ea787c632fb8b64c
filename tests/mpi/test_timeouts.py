"""A bridged job that hangs is stopped whole when its test times out: by pid, never by name."""

import os
import time

import pytest

pytestmark = pytest.mark.mpi


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is gone for our purposes (its parent, mpiexec, may not have reaped it yet).
    try:  # reaped between the two looks: gone
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (ProcessLookupError, FileNotFoundError):
        return False


@pytest.mark.timeout(90)
def test_a_timed_out_bridged_job_leaves_no_process(bridged, tmp_path):
    with pytest.raises(pytest.fail.Exception, match="timed out"):
        bridged("hang.py", str(tmp_path), low=1, high=1, timeout=6)
    pids = [int(p.read_text()) for p in sorted(tmp_path.glob("*.pid"))]
    assert len(pids) == 3, sorted(p.name for p in tmp_path.iterdir())  # 2 ranks, 1 forwarder
    deadline = time.monotonic() + 10
    while any(map(_alive, pids)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [p for p in pids if _alive(p)]
