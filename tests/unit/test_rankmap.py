"""Rank maps as mmpi-run will read them: each refusal names the rank, key or size at fault."""

import json

import pytest

from place import RankMapError, load_rank_map, rank_map_data, rank_map_owners, write_rank_map
from place.rankmap import format_ranks


def _map(tmp_path, data, name="map.json"):
    path = tmp_path / name
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return path


def test_a_good_map_gives_each_rank_its_cluster(tmp_path):
    path = _map(tmp_path, {"version": 1, "low": [4, 0, 1, 5], "high": [2, 3, 6, 7]})
    owners = ["low", "low", "high", "high", "low", "low", "high", "high"]
    assert load_rank_map(path, 4, 4) == owners
    assert load_rank_map(path) == owners  # sizes taken from the map


def test_write_then_load_round_trips(tmp_path):
    owners = ["high", "low", "high", "high"]
    write_rank_map(tmp_path / "m.json", owners)
    assert json.loads((tmp_path / "m.json").read_text()) == {
        "version": 1, "low": [1], "high": [0, 2, 3]}
    assert load_rank_map(tmp_path / "m.json", 1, 3) == owners
    assert rank_map_data(owners)["high"] == [0, 2, 3]


def test_a_map_from_yaml_is_checked_the_same_way():
    data = {"version": 1, "low": [1], "high": [0]}
    assert rank_map_owners(data, 1, 1, where="rank_map") == ["high", "low"]
    with pytest.raises(RankMapError, match=r"^rank_map: rank 1 is listed in both low and high$"):
        rank_map_owners({"version": 1, "low": [1], "high": [1, 0]}, where="rank_map")


@pytest.mark.parametrize("data, low, high, message", [
    ({"version": 1, "low": [0, 1, 5], "high": [2, 3, 4, 5]}, None, None,
     "rank 5 is listed in both low and high"),
    ({"version": 1, "low": [0, 1, 1], "high": [2, 3]}, None, None,
     "rank 1 is listed twice in low"),
    ({"version": 1, "low": [0, 1], "high": [3, 4]}, None, None,
     "rank 4 is out of range (the job has 4 ranks, 0..3) and rank 2 is missing (in neither "
     "low nor high)"),
    ({"version": 1, "low": [0, 1], "high": [2, 3]}, 2, 3,
     "high lists 2 ranks but the job has 3 in the high cluster"),
    ({"version": 1, "low": [0], "high": [1, 2, 3]}, 2, 2,
     "low lists 1 rank but the job has 2 in the low cluster"),
    ({"version": 1, "low": [0, 2], "high": [4, 5]}, 3, 3,
     "low lists 2 ranks but the job has 3 in the low cluster"),
    ({"version": 1, "low": [0, 1, 2], "high": [5, 6, 7]}, 3, 3,
     "rank 6 is out of range (the job has 6 ranks, 0..5) and ranks 3-4 are missing (in "
     "neither low nor high)"),
    ({"version": 1, "low": [0, 3], "high": [4, 5]}, 2, 4,
     "high lists 2 ranks but the job has 4 in the high cluster"),
    ({"version": 1, "low": [0, 5], "high": [1, 4]}, 2, 2,
     "rank 4 is out of range (the job has 4 ranks, 0..3) and ranks 2-3 are missing (in "
     "neither low nor high)"),
    ({"version": 1, "low": [], "high": [0, 1]}, None, None,
     "low lists no rank (each cluster needs at least one)"),
    ({"version": 1, "low": [0], "high": [1], "hosts": {}}, None, None,
     "unknown key 'hosts' (expected version, low, high)"),
    ({"low": [0], "high": [1]}, None, None, "missing key 'version'"),
    ({"version": 2, "low": [0], "high": [1]}, None, None,
     "version 2 is not supported (this mmpi reads version 1)"),
    ({"version": 1, "low": [0, True], "high": [2]}, None, None,
     r"low[1]: expected a rank (a whole number >= 0), got True"),
    ({"version": 1, "low": [0, -1], "high": [2]}, None, None,
     "low[1]: expected a rank (a whole number >= 0), got -1"),
    ({"version": 1, "low": "0-3", "high": [2]}, None, None,
     "low: expected a list of ranks, got str"),
    ([0, 1], None, None, "expected a mapping with keys version, low, high, got list"),
])
def test_bad_maps_are_refused_naming_the_problem(tmp_path, data, low, high, message):
    path = _map(tmp_path, data)
    with pytest.raises(RankMapError) as err:
        load_rank_map(path, low, high)
    assert str(err.value) == f"rank map {path}: {message}"


def test_missing_ranks_are_all_named(tmp_path):
    path = _map(tmp_path, {"version": 1, "low": [0, 1], "high": [2, 6, 7, 8]})
    with pytest.raises(RankMapError, match=r"ranks 3-5 are missing \(in neither low nor high\)"):
        load_rank_map(path, 2, 4)
    path = _map(tmp_path, {"version": 1, "low": [0], "high": [2]})
    with pytest.raises(RankMapError, match=r"out of range .* and rank 1 is missing"):
        load_rank_map(path, 1, 1)


def test_unreadable_maps_are_refused(tmp_path):
    with pytest.raises(RankMapError, match=r"nope.json: cannot read it"):
        load_rank_map(tmp_path / "nope.json")
    with pytest.raises(RankMapError, match=r"not valid JSON: .*line 1"):
        load_rank_map(_map(tmp_path, '{"version": 1, "low": [0,'))


def test_ranks_are_written_short():
    assert format_ranks([7, 0, 1, 2, 3, 5, 8, 9]) == "0-3, 5, 7-9"
    assert format_ranks([]) == ""
