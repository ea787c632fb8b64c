"""Communication monitoring: counters exact on a known pattern, read online, free when off."""

import json
import os
import re

import pytest

pytestmark = pytest.mark.mpi


def _rows(stdout: str) -> dict:
    rows = {}
    for line in stdout.splitlines():
        m = re.search(r"(\{.*\})$", line)
        if m:
            data = json.loads(m.group(1))
            rows[data.get("rank", "job")] = data
    return rows


@pytest.mark.timeout(120)
def test_counters_account_for_every_byte(bridged, tmp_path):
    job = bridged("monitored.py", "on", env={"MMPI_MONITOR": str(tmp_path)})
    assert job.returncode == 0, job.output
    rows = _rows(job.stdout)
    assert rows[0]["p2p_bytes"] == [0, 10, 300, 0] and rows[0]["p2p_msgs"] == [0, 1, 3, 0]
    for r in (1, 2, 3):
        assert rows[r]["p2p_bytes"] == [0, 0, 0, 0], rows[r]
    assert rows[0]["layout"] == ["low", "low", "high", "high"]
    # One 8-byte Allreduce: each leader's partial crosses once (8 bytes each way); inside a
    # cluster, the non-leader's 8 bytes go to its leader and the result comes back.
    assert rows[0]["coll_bytes"] == [0, 8, 8, 0] and rows[2]["coll_bytes"] == [8, 0, 0, 8]
    assert rows[1]["coll_bytes"] == [8, 0, 0, 0] and rows[3]["coll_bytes"] == [0, 0, 8, 0]
    assert all(rows[r]["coll_p2p"] == [0, 0, 0, 0] for r in range(4))
    assert rows["job"]["coll_forwarded"] == 16
    # mmpi-run's --monitor contract: one file per rank, every phase in it.
    files = sorted(os.listdir(tmp_path))
    assert files == [f"rank-{r}.json" for r in range(4)], files
    data = json.loads((tmp_path / "rank-0.json").read_text())
    assert data["version"] == 1 and data["size"] == 4
    assert [p["name"] for p in data["phases"]] == ["main", "p2p", "coll"]
    p2p = next(p for p in data["phases"] if p["name"] == "p2p")
    assert p2p["p2p_bytes"] == [0, 10, 300, 0]
    assert p2p["hist_p2p"][2][7] == 3  # 100 bytes: 64 < s <= 128


@pytest.mark.timeout(120)
def test_nothing_counts_when_monitoring_is_off(bridged):
    job = bridged("monitored.py", "off")
    assert job.returncode == 0, job.output
    assert len(re.findall(r"rank \d: off ok", job.stdout)) == 4, job.output
