"""The relay's rules, tested in seconds: the fake link runs forwarders and both clusters in one job.

No launcher and no DPM (tests/mpi/progs/fakelink.py): the real Forwarder relays and the real
engine sends and receives over intercommunicators made with Split + Create_intercomm.
"""

import re
import sys

import pytest
from conftest import MPIEXEC, PROGS, RELAYS, _run

pytestmark = pytest.mark.mpi


def _fake(n: int, *args: str, timeout: float = 90, relay: str = "auto"):
    # the installed packages, not the checkout's (whose compiled parts a plain install has not
    # built in place): only the programs' own folder goes first
    env = {"PYTHONPATH": str(PROGS), "MMPI_RELAY": relay}
    return _run([MPIEXEC, "-n", str(n), sys.executable, str(PROGS / "relay_rules.py"),
                 *args], timeout, env)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("forwarders,low,high,chunk,stripe", [
    (1, 1, 1, 4096, 1 << 30),       # many chunks per message, pipelined through a small pool
    (1, 2, 1, 1 << 20, 1 << 30),    # default chunk; order from two senders into one receiver
    (2, 1, 2, 8192, 65536),         # two forwarders: routes per pair, large messages striped
])
@pytest.mark.parametrize("relay", RELAYS)
def test_relay_keeps_order_and_every_byte(forwarders, low, high, chunk, stripe, relay):
    job = _fake(forwarders + low + high, str(forwarders), str(low), str(chunk), str(stripe),
                relay=relay)
    assert job.returncode == 0, job.output[-4000:]
    oks = re.findall(r"ok (\d+) \((?:low|high)\)", job.stdout)
    assert sorted(int(r) for r in oks) == list(range(low + high)), job.output[-3000:]
    # Shutdown: every forwarder saw both clusters say goodbye and reported what it relayed.
    # (two forwarders of one job: Hydra can join their lines, so no line anchor)
    done = re.findall(r"\[fwd(\d)\] done in .*?low->high (\d+) msgs", job.stdout)
    assert sorted(int(k) for k, _ in done) == list(range(forwarders)), job.output[-3000:]
    assert all(int(n) > 0 for _, n in done), done
