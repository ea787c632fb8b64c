"""Dynamic broadcasts (mmpi/_engine/fanout.py): one buffer to many ranks of the other cluster.

The rules program checks order, matching, late receivers, persistent and object sends and
truncation on every rank, and the forwarder's byte count shows the bytes crossed once; the
burst fuzz mixes bursts, plain sends and wildcard receives on other layouts, two forwarders,
progress threads and the Python paths.
"""

import re

import pytest

from place.matrices import merge_rank_files
from place.report import summarize

pytestmark = pytest.mark.mpi
MiB = 1 << 20
CROSSED = re.compile(r"mmpi-forwarder\[0\]: done .* low->high \d+ msgs (\d+) B")
FUZZ_OK = re.compile(r"rank (\d+): burstfuzz ok rounds (\d+) messages (\d+)")


def _crossed(job) -> int:
    m = CROSSED.search(job.stdout)
    assert m, job.output[-3000:]
    return int(m.group(1))


@pytest.mark.timeout(120)
def test_a_burst_to_every_far_rank_crosses_once(bridged, tmp_path):
    job = bridged("fanout_rules.py", low=1, high=3, launcher_args=("--verbose",),
                  env={"FANOUT_LOW": "1", "MMPI_MONITOR": str(tmp_path)}, timeout=100)
    assert job.returncode == 0, job.output[-4000:]
    assert "fanout rules ok" in job.stdout, job.output[-3000:]
    # six rounds of 1 MiB to three ranks: the bytes once per round, not three times
    assert 6 * MiB <= _crossed(job) < 7 * MiB, job.output[-3000:]
    assert re.search(r"rank 0 combined 18 sends into 6 crossing\(s\)", job.output), \
        job.output[-3000:]
    # the monitor: every send as the program sent it, and separately what was combined
    matrices = merge_rank_files(tmp_path)
    fan = matrices.combined_totals()
    assert (fan["sends"], fan["crossings"]) == (18, 6), fan
    assert 12 * MiB <= fan["bytes_not_crossed"] < 13 * MiB, fan  # two copies of six rounds
    assert matrices.matrix("p2p_msgs")[0, 1:].tolist() == [6, 6, 7]
    assert "dynamic broadcasts: 18 of the sends above went as 6" in summarize(matrices)


@pytest.mark.timeout(120)
def test_without_dynamic_broadcasts_every_copy_crosses(bridged):
    job = bridged("fanout_rules.py", low=2, high=3, launcher_args=("--verbose",),
                  env={"FANOUT_LOW": "2", "MMPI_DYNAMIC_BCAST": "0"}, timeout=100)
    assert job.returncode == 0, job.output[-4000:]
    assert "fanout rules ok" in job.stdout, job.output[-3000:]
    assert _crossed(job) >= 18 * MiB, job.output[-3000:]
    assert "combined" not in job.output, job.output[-3000:]


@pytest.mark.timeout(60)
def test_the_burst_fuzz_holds_natively(native):
    job = native("burstfuzz.py", "3", "2", n=4, timeout=50)
    assert job.returncode == 0, job.output[-4000:]
    assert len(FUZZ_OK.findall(job.stdout)) == 4, job.output[-3000:]


# Fan-outs from 33000 bytes and two destinations on, so that more of the fuzz is combined.
CASES = [(3, 2, (), {"MMPI_RELAY": "python", "MMPI_RANK_PATH": "python"}),
         (2, 2, ("--forwarders", "2", "--progress", "all"), {})]


@pytest.mark.timeout(150)
@pytest.mark.parametrize("low,high,extra,env", CASES, ids=["3+2-python", "2+2-fwd2-progress"])
def test_the_burst_fuzz_holds_bridged(bridged, low, high, extra, env):
    job = bridged("burstfuzz.py", "11", "3", low=low, high=high,
                  launcher_args=("--verbose", *extra),
                  env={"MMPI_DYNAMIC_BCAST_MIN": "33000", "MMPI_DYNAMIC_BCAST_DESTS": "2",
                       **env}, timeout=130)
    assert job.returncode == 0, job.output[-4000:]
    found = FUZZ_OK.findall(job.stdout)
    assert sorted(int(f[0]) for f in found) == list(range(low + high)), job.output[-3000:]
    assert all(int(f[2]) > 0 for f in found), job.output[-3000:]
    combined = [int(n) for n in re.findall(r"combined (\d+) sends", job.output)]
    assert sum(combined) > 0, job.output[-3000:]
