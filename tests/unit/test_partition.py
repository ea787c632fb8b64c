"""mmpi-place's bisection: exact cluster sizes, known optimal cuts, the vertex cut."""

import itertools
import time

import numpy as np
import pytest

from place import PlacementError, bisect, cut_bytes, separator
from place.partition import EXHAUSTIVE_MAX

pytest.importorskip("networkx", reason="the place extra is not installed (pip install '.[place]')")

MiB = 1 << 20


def pairs(n, nbytes=MiB):
    m = np.zeros((n, n), dtype=np.int64)
    for i in range(n // 2):
        m[i, i + n // 2] = m[i + n // 2, i] = nbytes
    return m


def ring(n, nbytes=1000):
    m = np.zeros((n, n), dtype=np.int64)
    for i in range(n):
        m[i, (i + 1) % n] = nbytes
    return m


def planted(n, low, seed):
    """Two groups of the clusters' sizes, ranks shuffled, heavy inside and nothing across."""
    rng = np.random.default_rng(seed)
    group = np.zeros(n, dtype=bool)
    group[rng.permutation(n)[:low]] = True
    m = rng.integers(1, 10_000, (n, n)) * (rng.random((n, n)) < 0.5)
    return np.where(group[:, None] == group[None, :], m, 0), group


def brute_force(m, low):
    w = m + m.T
    n = len(m)
    return min(w[list(c)][:, [j for j in range(n) if j not in c]].sum()
               for c in itertools.combinations(range(n), low))


def sizes(owners):
    return owners.count("low"), owners.count("high")


@pytest.mark.parametrize("n", [4, 8, 16, 32, 64])
def test_scattered_pairs_come_out_with_nothing_forwarded(n):
    m = pairs(n)
    block = ["low"] * (n // 2) + ["high"] * (n // 2)
    assert cut_bytes(m, block) == n * MiB  # the default layout forwards everything
    s = bisect(m, n // 2, n // 2, current=block)
    assert s.cut_bytes == cut_bytes(m, s.owners) == 0
    assert sizes(s.owners) == (n // 2, n // 2)
    for i in range(n // 2):
        assert s.owners[i] == s.owners[i + n // 2]


@pytest.mark.parametrize("n, low", [(8, 2), (16, 4), (32, 10), (64, 6), (64, 22)])
def test_unequal_sizes_are_exact(n, low):
    s = bisect(pairs(n), low, n - low)
    assert sizes(s.owners) == (low, n - low) and s.cut_bytes == 0


@pytest.mark.parametrize("n, low", [(32, 16), (48, 12), (64, 32), (64, 20)])
def test_large_jobs_recover_a_planted_zero_cut_with_exact_sizes(n, low):
    assert pytest.importorskip("pymetis", reason="the place extra is not installed")
    m, group = planted(n, low, seed=n + low)
    s = bisect(m, low, n - low)
    assert "METIS" in s.method and not s.optimal
    assert sizes(s.owners) == (low, n - low)
    assert s.cut_bytes == 0
    assert [o == "low" for o in s.owners] == list(group)


def test_a_ring_is_cut_twice():
    pytest.importorskip("pymetis", reason="the place extra is not installed")
    s = bisect(ring(64), 24, 40, current=["high"] * 40 + ["low"] * 24)
    assert s.cut_bytes == 2000 and sizes(s.owners) == (24, 40)


@pytest.mark.parametrize("seed", range(6))
def test_small_jobs_get_the_optimal_split(seed):
    rng = np.random.default_rng(seed)
    n, low = 9, 1 + seed % 4
    m = (rng.lognormal(8, 2, (n, n)) * (rng.random((n, n)) < 0.4)).astype(np.int64)
    s = bisect(m, low, n - low)
    assert s.optimal and s.cut_bytes == brute_force(m, low)


def test_exhaustive_search_stays_quick_at_its_limit():
    m = np.random.default_rng(0).integers(0, 1000, (20, 20))
    assert 184_756 <= EXHAUSTIVE_MAX
    t0 = time.perf_counter()
    s = bisect(m, 10, 10)
    assert s.optimal and time.perf_counter() - t0 < 10


def test_an_optimal_current_layout_is_kept():
    m = np.full((8, 8), 5000)  # all to all: every 4+4 split forwards as much
    current = ["low", "high"] * 4
    assert bisect(m, 4, 4, current=current).owners == tuple(current)
    big = np.full((40, 40), 5000)
    current = ["high", "low"] * 20
    assert bisect(big, 20, 20, current=current).owners == tuple(current)


def test_no_traffic_keeps_the_current_layout():
    current = ["high"] * 30 + ["low"] * 30
    assert bisect(np.zeros((60, 60), dtype=np.int64), 30, 30, current=current).owners == \
        tuple(current)


def test_of_equal_cuts_the_fewest_moved_wins():
    m = pairs(8)
    s = bisect(m, 4, 4, current=["low"] * 4 + ["high"] * 4)
    assert sum(a != b for a, b in zip(s.owners, ["low"] * 4 + ["high"] * 4, strict=True)) == 4


def test_sizes_that_do_not_add_up_are_refused():
    with pytest.raises(PlacementError, match="--low 3 --high 4 place 7 ranks, but the job has 8"):
        bisect(pairs(8), 3, 4)
    with pytest.raises(PlacementError, match="--low: expected a number of ranks >= 1, got 0"):
        bisect(pairs(8), 0, 8)
    with pytest.raises(PlacementError, match="must be square"):
        bisect(np.zeros((3, 4)), 1, 2)


def test_the_vertex_cut_separates_what_crosses():
    m = pairs(8)
    owners = ["low"] * 4 + ["high"] * 4
    s = separator(m, owners)
    assert len(s) == 4 and all((i in s) != (i + 4 in s) for i in range(4))
    # a star whose centre talks across: the centre alone separates
    star = np.zeros((6, 6), dtype=np.int64)
    star[0, 1:] = 10
    assert separator(star, ["low", "low", "low", "high", "high", "high"]) == [0]
    assert separator(star, ["low"] * 3 + ["high"] * 3) == [0]
    assert separator(np.zeros((4, 4)), ["low", "low", "high", "high"]) == []


def test_the_vertex_cut_is_the_smallest():
    rng = np.random.default_rng(3)
    m = (rng.random((10, 10)) < 0.3).astype(np.int64)
    owners = ["low"] * 5 + ["high"] * 5
    s = separator(m, owners)
    w = (m + m.T) > 0
    crossing = [(i, j) for i in range(5) for j in range(5, 10) if w[i, j]]
    assert all(i in s or j in s for i, j in crossing)
    smaller = [c for k in range(len(s)) for c in itertools.combinations(range(10), k)
               if all(i in c or j in c for i, j in crossing)]
    assert not smaller
