"""Programs run under a rank map: each virtual rank where the map says, answers unchanged."""

from __future__ import annotations

import json
import re
import sys

import pytest
from conftest import PROGS, _run, mmpi_run_cmd

pytestmark = pytest.mark.mpi


def _map(tmp_path, owners: str):
    path = tmp_path / "map.json"
    data = {"version": 1, "low": [v for v, c in enumerate(owners) if c == "l"],
            "high": [v for v, c in enumerate(owners) if c == "h"]}
    path.write_text(json.dumps(data))
    return str(path)


def _check_labels(stdout: str, owners: str) -> None:
    """Every rank said where it runs, under the label of its cluster, local and virtual rank."""
    seen = {}
    for m in re.finditer(r"^\[(low|high):(\d+) v(\d+)\] rank (\d+) of \d+ runs in (\w+)$",
                         stdout, re.M):
        cluster, local, vlabel, vrank, said = m.groups()
        vrank = int(vrank)
        assert int(vlabel) == vrank and said == cluster, m.group(0)
        mates = [v for v, c in enumerate(owners) if c == cluster[0]]
        assert mates[int(local)] == vrank, m.group(0)  # local i = i-th smallest vrank
        seen[vrank] = cluster
    assert seen == {v: {"l": "low", "h": "high"}[c] for v, c in enumerate(owners)}, stdout


@pytest.mark.timeout(200)
@pytest.mark.parametrize("owners,forwarders", [("lhlh", 1), ("hhlh", 2), ("hlhll", 1)])
def test_program_under_a_rank_map(bridged, tmp_path, owners, forwarders):
    low, high = owners.count("l"), owners.count("h")
    job = bridged("rankmap_suite.py", owners, low=low, high=high, timeout=180,
                  launcher_args=("--rank-map", _map(tmp_path, owners),
                                 "--forwarders", str(forwarders)))
    assert job.returncode == 0, job.output
    assert job.stdout.count("RANKMAP OK") == low + high, job.output
    _check_labels(job.stdout, owners)


@pytest.mark.timeout(200)
def test_rank_map_inline_in_the_job_file(tmp_path):
    (tmp_path / "job.yaml").write_text(
        "clusters:\n  low: {ranks: 2, oversubscribe: true}\n"
        "  high: {ranks: 2, oversubscribe: true}\n"
        "rank_map: {low: [1, 2], high: [0, 3]}\n")
    cmd = [*mmpi_run_cmd(), "-c", str(tmp_path / "job.yaml"), sys.executable,
           str(PROGS / "rankmap_suite.py"), "hllh"]
    job = _run(cmd, 180, bridged=True)
    assert job.returncode == 0, job.output
    _check_labels(job.stdout, "hllh")


@pytest.mark.timeout(250)
def test_collective_suite_under_a_rank_map(bridged, tmp_path):
    job = bridged("coll_suite.py", "--quick", low=2, high=3, timeout=230,
                  launcher_args=("--rank-map", _map(tmp_path, "hlhlh")))
    assert job.returncode == 0, job.output
    assert job.stdout.count("COLL OK") == 5, job.output


@pytest.mark.timeout(200)
def test_p2p_suite_under_a_rank_map(bridged, tmp_path):
    job = bridged("p2p_suite.py", low=1, high=3, timeout=180,
                  launcher_args=("--rank-map", _map(tmp_path, "hhlh")))
    assert job.returncode == 0, job.output
    assert job.stdout.count("P2P OK") == 4, job.output


@pytest.mark.timeout(60)
def test_a_bad_map_is_refused_before_anything_starts(bridged, tmp_path):
    path = tmp_path / "map.json"
    path.write_text('{"version": 1, "low": [0, 1], "high": [1, 2]}')
    job = bridged("rankmap_suite.py", low=2, high=2, launcher_args=("--rank-map", str(path)))
    assert job.returncode == 1
    assert f"mmpi-run: --rank-map {path}: rank 1 is listed in both low and high" in job.stderr
    assert "runs in" not in job.stdout
