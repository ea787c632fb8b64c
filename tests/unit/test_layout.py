"""Virtual-rank layout: low ranks first, then high; out-of-range ranks are named."""

import pytest

from mmpi.errors import RankError
from mmpi.wire.layout import Layout, other


def test_layout_maps_both_ways():
    lay = Layout(2, 3)
    assert lay.size == 5
    assert [lay.locate(v) for v in range(5)] == [
        ("low", 0), ("low", 1), ("high", 0), ("high", 1), ("high", 2)]
    for v in range(5):
        assert lay.vrank(*lay.locate(v)) == v
    assert lay.vranks("high") == (2, 3, 4) and lay.cluster_size("high") == 3
    assert lay.is_blocks


@pytest.mark.parametrize("bad", [-1, 5, 100])
def test_out_of_range_rank_is_named(bad):
    with pytest.raises(RankError, match=str(bad)):
        Layout(2, 3).locate(bad)


def test_local_rank_out_of_cluster():
    with pytest.raises(RankError, match="local rank 2 is not in cluster 'low'"):
        Layout(2, 3).vrank("low", 2)


def test_empty_cluster_refused():
    with pytest.raises(ValueError):
        Layout(0, 3)


def test_other():
    assert other("low") == "high" and other("high") == "low"


def test_rank_map_places_any_rank_in_either_cluster():
    lay = Layout.from_owners(["high", "low", "high", "low"])
    assert (lay.low_size, lay.high_size) == (2, 2)
    assert lay.vranks("low") == (1, 3) and lay.vranks("high") == (0, 2)
    assert [lay.locate(v) for v in range(4)] == [
        ("high", 0), ("low", 0), ("high", 1), ("low", 1)]
    assert not lay.is_blocks
    assert lay == Layout.from_owners(("high", "low", "high", "low"))


def test_rank_map_with_an_unknown_cluster_is_refused():
    with pytest.raises(ValueError, match="unknown cluster 'middle'"):
        Layout.from_owners(["low", "middle"])
