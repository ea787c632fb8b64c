"""Rank maps and monitoring in mmpi-run: the YAML keys and flags, the plan, labels, diagnosis,
the layout file and the forwarder's layout (no MPI job)."""
# ruff: noqa: D103  (test names say what they check)

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from launch import _monitoring
from launch._diagnose import CLUSTER, Evidence, JobEnd, diagnose
from launch._hosts import Machine
from launch._overrides import with_overrides
from launch._readers import RankDemux
from launch.cli import main
from launch.config import ConfigError, load, loads, parse
from launch.hygiene import Pids
from launch.plan import make_plan
from mmpi.errors import BridgeError
from mmpi.wire import rendezvous as rv

PY = "/usr/bin/python3"
DIR = "/tmp/mmpi-test"
MACHINE = Machine(cpus=2, sockets=1, cores_per_socket=2)
M = "\x1f"


def write_map(path: Path, low, high, **extra) -> Path:
    path.write_text(json.dumps({"version": 1, "low": low, "high": high, **extra}))
    return path


def job(low=2, high=2, **top) -> dict:
    free = {"oversubscribe": True}  # MACHINE has 2 CPUs
    return {"clusters": {"low": {"ranks": low, **free}, "high": {"ranks": high, **free}}, **top}


def config_error(data: dict, base_dir: Path | None = None) -> str:
    with pytest.raises(ConfigError) as info:
        parse(data, base_dir=base_dir, environ={})
    return str(info.value)


# -- the job description ------------------------------------------------------------------------
def test_yaml_rank_map_inline_and_from_a_file(tmp_path):
    config = parse(job(rank_map={"low": [1, 3], "high": [0, 2]}), environ={})
    assert config.owners == ("high", "low", "high", "low") and config.rank_map == "rank_map"
    write_map(tmp_path / "map.json", [0], [1, 2, 3])
    text = "clusters: {low: {ranks: 1}, high: {ranks: 3}}\nrank_map: map.json\n"
    (tmp_path / "job.yaml").write_text(text)
    assert load(tmp_path / "job.yaml").owners == ("low", "high", "high", "high")
    assert load().owners is None  # the default job: the default layout


@pytest.mark.parametrize("rank_map,message", [
    ({"low": [0, 0], "high": [1, 2]}, "rank_map: rank 0 is listed twice in low"),
    ({"low": [0, 1], "high": [1, 3]}, "rank_map: rank 1 is listed in both low and high"),
    ({"low": [0, 1], "high": [3, 4]}, "rank_map: rank 4 is out of range (the job has 4 ranks, "
                                      "0..3) and rank 2 is missing"),
    ({"low": [0], "high": [1, 2, 3]}, "rank_map: low lists 1 rank but the job has 2 in the low"),
    ({"low": [0, 1], "high": [2, "3"]}, "rank_map: high[1]: expected a rank"),
    ({"low": [0, 1]}, "rank_map: missing key 'high'"),
    ({"low": [0, 1], "high": [2, 3], "mid": []}, "rank_map: unknown key 'mid'"),
    ([0, 1], "rank_map: expected a rank map file or a mapping"),
])
def test_yaml_rank_maps_that_are_bad_are_refused_naming_the_problem(rank_map, message):
    assert message in config_error(job(rank_map=rank_map))


def test_yaml_rank_map_file_errors_name_the_file(tmp_path):
    write_map(tmp_path / "map.json", [0, 2], [1, 2])
    msg = config_error(job(rank_map="map.json"), tmp_path)
    assert f"rank_map {tmp_path / 'map.json'}: rank 2 is listed in both low and high" in msg
    msg = config_error(job(rank_map="none.json"), tmp_path)
    assert "rank_map" in msg and "none.json: cannot read it" in msg
    (tmp_path / "bad.json").write_text("{low: [0]}")
    assert "not valid JSON" in config_error(job(rank_map="bad.json"), tmp_path)


def test_rank_map_flag_is_checked_against_the_sizes_after_low_and_high(tmp_path):
    path = write_map(tmp_path / "m.json", [2], [0, 1, 3])
    config = with_overrides(load(), low=1, high=3, rank_map=str(path))
    assert config.owners == ("high", "high", "low", "high") and config.rank_map == "--rank-map"
    with pytest.raises(ConfigError, match=r"--rank-map .*m.json: low lists 1 rank but the job "
                                          r"has 2 in the low cluster"):
        with_overrides(load(), rank_map=str(path))
    # A map in the file, sizes changed on the command line
    config = parse(job(rank_map={"low": [0, 3], "high": [1, 2]}), environ={})
    with pytest.raises(ConfigError, match=r"rank_map: low lists 2 ranks but the job has 3 in "
                                          r"the low cluster \(from --low\)"):
        with_overrides(config, low=3)


def test_monitor_key_and_flag_are_absolute_directories(tmp_path, monkeypatch):
    text = "clusters: {low: {ranks: 1}, high: {ranks: 1}}\nmonitor: out\n"
    (tmp_path / "job.yaml").write_text(text)
    assert load(tmp_path / "job.yaml").monitor == str(tmp_path / "out")  # next to the file
    monkeypatch.chdir(tmp_path)
    assert with_overrides(load(), monitor="run1").monitor == str(tmp_path / "run1")
    assert "monitor: expected a directory, got 3" in str(
        pytest.raises(ConfigError, loads, "clusters: {low: {ranks: 1}, high: {ranks: 1}}\n"
                      "monitor: 3\n").value)


# -- the plan -----------------------------------------------------------------------------------
def plan_for(data: dict, **overrides):
    config = with_overrides(parse(data, environ={}), **overrides)
    return make_plan(config, ["python", "prog.py"], DIR, python=PY, machine=MACHINE, environ={})


def test_plan_places_each_virtual_rank_where_the_map_says():
    plan = plan_for(job(3, 2, rank_map={"low": [1, 2, 4], "high": [0, 3]}))
    low, high = plan.clusters
    assert (low.vranks, high.vranks) == ((1, 2, 4), (0, 3))
    assert (low.first_vrank, high.first_vrank) == (1, 0)
    assert [low.vrank(i) for i in range(3)] == [1, 2, 4]
    # stdin goes to the cluster whose local rank 0 is virtual rank 0
    assert (low.stdin, high.stdin) == (False, True)
    assert plan.owners == ("high", "low", "low", "high", "low")
    places = [(p.vrank, p.cluster, p.local) for x in plan.layouts for p in x.places]
    assert sorted(places) == [(0, "high", 0), (1, "low", 0), (2, "low", 1), (3, "high", 1),
                              (4, "low", 2)]
    text = plan.describe()
    assert "low (cluster, 3 ranks, virtual ranks 1-2, 4)" in text
    assert "high (cluster, 2 ranks, virtual ranks 0, 3, standard input)" in text
    assert "layout file: layout in the rendezvous directory" in text
    assert "high low low high low" in text
    table = text[text.index("vrank  cluster"):].splitlines()[1:6]
    assert [row.split()[:3] for row in table] == [
        ["0", "high", "0"], ["1", "low", "0"], ["2", "low", "1"], ["3", "high", "1"],
        ["4", "low", "2"]]


def test_paired_placement_under_a_map_pairs_local_ranks():
    plan = plan_for(job(2, 2, rank_map={"low": [1, 2], "high": [0, 3]}), placement="paired")
    cores = {(p.cluster, p.local): (p.vrank, p.core) for x in plan.layouts for p in x.places}
    assert cores == {("low", 0): (1, 0), ("low", 1): (2, 1), ("high", 0): (0, 0),
                     ("high", 1): (3, 1)}


def test_default_plan_is_unchanged_and_monitor_sets_the_variable():
    plan = plan_for(job())
    assert plan.owners is None and plan.monitor is None
    assert [x.vranks for x in plan.clusters] == [(0, 1), (2, 3)]
    assert "layout file" not in plan.describe() and "monitor:" not in plan.describe()
    assert all(rv.ENV_MONITOR not in x.env for x in plan.launches)
    plan = plan_for(job(monitor="/data/run"))
    assert [x.env.get(rv.ENV_MONITOR) for x in plan.launches] == [None, "/data/run", "/data/run"]
    assert "after a successful run mmpi-run merges them into /data/run/matrix.npz" in \
        plan.describe()


def test_dry_run_shows_the_map_and_writes_nothing(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = write_map(tmp_path / "m.json", [0, 2], [1, 3])
    status = main(["--rank-map", str(path), "--monitor", "out", "--dry-run", "python", "x.py"])
    out = capsys.readouterr().out
    assert status == 0
    assert "virtual ranks 0, 2, standard input" in out and "low high low high" in out
    assert f"{tmp_path / 'out'}/rank-<vrank>.json" in out
    assert sorted(os.listdir(tmp_path)) == ["m.json"]  # no monitor directory: no side effects


@pytest.mark.parametrize("low,high,message", [
    ([0, 0], [1, 3], "rank 0 is listed twice in low"),
    ([0], [1, 2], "low lists 1 rank but the job has 2 in the low cluster"),
    ([0, 1], [2, 4], "rank 4 is out of range (the job has 4 ranks, 0..3) and rank 3 is missing"),
])
def test_cli_refuses_bad_maps(tmp_path, capsys, low, high, message):
    path = write_map(tmp_path / "m.json", low, high)
    assert main(["--rank-map", str(path), "--dry-run", "python", "x.py"]) == 1
    err = capsys.readouterr().err
    assert f"mmpi-run: --rank-map {path}: {message}" in err, err


# -- output labels and diagnosis by virtual rank --------------------------------------------------
def test_labels_name_the_virtual_rank_of_each_local_rank():
    demux = RankDemux("low", 1, (1, 2, 4))
    lines = [x for raw in (f"{M}[0] a\n", f"{M}[2] b\n") for x in demux.feed(raw.encode())]
    assert [x.label + x.text for x in lines] == ["[low:0 v1] a", "[low:2 v4] b"]


def test_diagnosis_names_the_virtual_rank_without_a_pid_file():
    ev = Evidence()
    ev.feed(1, "Traceback (most recent call last):")
    ev.feed(1, "ValueError: bad")
    end = JobEnd("low", CLUSTER, 1, "exited with status 1", ev, 1, vranks=(1, 3))
    (line,) = diagnose([end], Pids({}, {})).lines
    assert line.startswith("rank 3 (low:1) raised ValueError: bad"), line


# -- the layout file and the forwarder ------------------------------------------------------------
def test_layout_file_round_trip(tmp_path):
    assert rv.read_layout(tmp_path) is None
    assert rv.read_layout(Path(os.devnull)) is None  # the fake link's "directory"
    rv.write_layout(tmp_path, ["high", "low", "high"])
    assert (tmp_path / rv.LAYOUT_FILE).read_text() == "high low high\n"
    assert oct((tmp_path / rv.LAYOUT_FILE).stat().st_mode & 0o777) == "0o600"
    assert rv.read_layout(tmp_path) == ("high", "low", "high")
    (tmp_path / rv.LAYOUT_FILE).write_text("low mid\n")
    with pytest.raises(BridgeError, match="expected the cluster of each rank"):
        rv.read_layout(tmp_path)
    with pytest.raises(ValueError):
        rv.write_layout(tmp_path, ["low", "mid"])


class _Link:
    def __init__(self, size):
        self.size = size


def test_forwarder_layout_from_the_file_or_default(tmp_path):
    from forwarder.daemon import Forwarder

    fwd = Forwarder(tmp_path)
    fwd.links = {"low": _Link(2), "high": _Link(2)}
    assert fwd._layout().is_blocks
    rv.write_layout(tmp_path, ["high", "low", "low", "high"])
    fwd = Forwarder(tmp_path)
    fwd.links = {"low": _Link(2), "high": _Link(2)}
    assert fwd._layout().owners == ("high", "low", "low", "high")
    fwd = Forwarder(tmp_path)
    fwd.links = {"low": _Link(1), "high": _Link(3)}
    with pytest.raises(BridgeError, match=r"places 2 ranks in low and 2 in high, but 1\+3"):
        fwd._layout()
    fwd = Forwarder(os.devnull, owners=["low", "high", "high"])
    fwd.links = {"low": _Link(1), "high": _Link(2)}
    assert fwd._layout().vranks("high") == (1, 2)


# -- the monitor directory ----------------------------------------------------------------------
def test_monitor_directory_is_made_and_an_earlier_runs_files_go(tmp_path):
    d = tmp_path / "out"
    assert _monitoring.prepare(str(d)) == 0 and d.is_dir()
    for name in ("rank-0.json", "rank-12.json", "matrix.npz", "notes.txt", "rank-x.json"):
        (d / name).write_text("x")
    assert _monitoring.prepare(str(d)) == 3
    assert sorted(os.listdir(d)) == ["notes.txt", "rank-x.json"]
    (tmp_path / "file").write_text("")
    with pytest.raises(_monitoring.MonitorDirError, match="--monitor"):
        _monitoring.prepare(str(tmp_path / "file"))
    with pytest.raises(_monitoring.MonitorDirError, match="cannot merge the rank files"):
        _monitoring.merge(str(d))
