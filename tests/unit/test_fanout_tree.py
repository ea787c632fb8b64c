"""The binomial tree of a dynamic broadcast (mmpi._engine.fanout.subtrees): pure, no MPI."""

import math

import pytest

from mmpi._engine.fanout import subtrees


def _walk(root, below):
    """Every node reached from the root, and the rounds until the last has the bytes."""
    reached, rounds = [root], 0
    for i, (child, sub) in enumerate(subtrees(below), 1):  # one send after the other
        got, r = _walk(child, sub)
        reached += got
        rounds = max(rounds, i + r)
    return reached, rounds


@pytest.mark.parametrize("k", range(1, 40))
def test_every_destination_once_in_log_rounds(k):
    below = [100 + i for i in range(k - 1)]
    reached, rounds = _walk(99, below)
    assert sorted(reached) == sorted([99] + below)
    assert rounds == math.ceil(math.log2(k))


def test_the_larger_half_goes_first():
    assert subtrees([1, 2, 3]) == [(2, [3]), (1, [])]
    assert subtrees([]) == []
