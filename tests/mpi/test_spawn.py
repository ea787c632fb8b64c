"""Spawn under mmpi-run: children in the spawning rank's cluster, plain mpi4py there."""

import pytest

pytestmark = pytest.mark.mpi


@pytest.mark.timeout(120)
@pytest.mark.parametrize("low,high", [(2, 1)])  # rank 0 spawns in low, rank 2 in high
def test_a_rank_spawns_children_in_its_own_cluster(bridged, low, high):
    job = bridged("spawn.py", low=low, high=high, timeout=100)
    assert job.returncode == 0, job.output[-4000:]
    size = low + high
    for r in (0, size - 1):
        want = [((("hello", r), i, 2, True)) for i in range(2)]
        assert f"rank {r}: children {want}" in job.stdout, job.output[-3000:]
    assert "rank 0: pool [32, 9, 64]" in job.stdout, job.output[-3000:]
    assert all(f"rank {r}: after {size}" in job.stdout for r in range(size)), job.output
