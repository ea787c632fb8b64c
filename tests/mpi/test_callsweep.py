"""Every documented Intracomm method on a bridged communicator works as natively, or raises
NotBridged by name within a second; none hangs (progs/callsweep.py, against native MPICH)."""

import re

import pytest

pytestmark = pytest.mark.mpi

OUTCOME = re.compile(r"(rank \d+): (\S+) (.*) ([0-9.]+)$")
# what the bridge does not provide, each named in docs/bridged.md's table: fault tolerance (ULFM)
# and a native handle for a communicator across two jobs
NOT_BRIDGED = {"Ack_failed", "Agree", "Get_failed", "Iagree", "Is_revoked", "Ishrink",
               "Revoke", "Shrink", "py2f", "toint"}
# by design: a node never spans the zipper, so COMM_TYPE_SHARED splits by cluster
DIFFERENT = {"Split_type"}


def outcomes(text: str) -> dict:
    out = {}
    for line in text.splitlines():
        m = OUTCOME.search(line.strip())
        if m:
            out[m.group(1), m.group(2)] = (m.group(3), float(m.group(4)))
    return out


@pytest.mark.timeout(240)
@pytest.mark.parametrize("low,high", [(2, 2), (1, 3)])
def test_every_intracomm_method_works_or_says_not_bridged(bridged, native, low, high):
    ref = native("callsweep.py", n=low + high, timeout=90)
    assert ref.returncode == 0, ref.output[-3000:]
    job = bridged("callsweep.py", "--mmpi", low=low, high=high, timeout=150)
    assert "HANG" not in job.output, job.output[-3000:]
    assert job.returncode == 0, job.output[-3000:]
    want, got = outcomes(ref.stdout), outcomes(job.stdout)
    assert len(want) > 100 * (low + high) and set(got) == set(want), job.output[-3000:]
    wrong = []
    for key, (outcome, seconds) in got.items():
        name = key[1]
        if outcome == "NotBridged":
            assert name in NOT_BRIDGED, f"{key}: NotBridged, natively {want[key][0]}"
        elif outcome != want[key][0] and name not in DIFFERENT:
            wrong.append(f"{key}: {outcome}, natively {want[key][0]}")
        if outcome.startswith(("NotBridged", "raised")):
            assert seconds < 1.0, f"{key} took {seconds} s to raise"
    assert not wrong, "\n".join(wrong)
    assert {k[1] for k, v in got.items() if v[0] == "NotBridged"} == NOT_BRIDGED
