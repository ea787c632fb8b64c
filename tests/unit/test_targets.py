"""mmpi-bench --targets: the performance targets' ratios out of `mmpi-bench --json` files."""

import json

import pytest

from bench import cli, targets

M = 1 << 20


def _row(bench, size, native, bridged, across=None, pairs=None):
    r = {"bench": bench, "size": size, "native": {"value": native},
         "bridged": {"value": bridged}}
    if across is not None:
        r["across"] = {"value": across}
    if pairs is not None:
        r["pairs"] = pairs
    return r


FULL = {"results": [
    _row("latency", 8, 2.0, 20.0, across=1.8),
    _row("latency", 4 * M, 200.0, 700.0, across=210.0),
    _row("bw", 4 * M, 18000.0, 5000.0, across=16000.0),
    _row("bibw", 4 * M, 30000.0, 7500.0, across=32000.0),
    _row("barrier", 0, 25.0, 50.0),
    _row("allreduce", 8, 25.0, 80.0),
    _row("allreduce", M, 500.0, 1000.0),
    _row("bcast", 8, 7.0, 50.0),
    _row("bcast", M, 300.0, 420.0),
    _row("alltoall", 64 << 10, 100.0, 400.0),
    _row("pairs", 4 * M, 20000.0, 4000.0, pairs=1),
    _row("pairs", 4 * M, 9000.0, 3000.0, pairs=4),
]}


def test_each_target_from_its_own_figures():
    got = targets.ratios(FULL)
    assert got == pytest.approx({
        "latency 8 B": 10.0,  # against native, not across jobs
        "bw 4 MiB / across": 5000 / 16000,  # against across jobs, not native
        "bibw / bw 4 MiB": 1.5,  # bridged against bridged
        "barrier": 2.0,
        "allreduce 8 B": 3.2,
        "allreduce 1 MiB": 2.0,
        "bcast 1 MiB": 1.4,
        "alltoall 64 KiB": 4.0,
        "4 pairs / 1 pair": 0.75,
    })


def test_a_partial_run_gives_only_what_it_measured():
    doc = {"results": [r for r in FULL["results"] if r["bench"] in ("barrier", "bcast")]}
    assert targets.ratios(doc) == pytest.approx({"barrier": 2.0, "bcast 1 MiB": 1.4})


def test_goals_count_the_line_itself_as_met():
    by = {t.name: t for t in targets.TARGETS}
    assert by["barrier"].met(3.0) and not by["barrier"].met(3.01)
    assert by["4 pairs / 1 pair"].met(0.8) and not by["4 pairs / 1 pair"].met(0.79)


def test_the_summary_counts_runs_meeting_each_target(tmp_path, capsys):
    slow = json.loads(json.dumps(FULL))
    for r in slow["results"]:
        if r["bench"] == "barrier":
            r["bridged"]["value"] = 100.0  # 4x: not met
    files = [tmp_path / "a.json", tmp_path / "b.json"]
    files[0].write_text(json.dumps(FULL))
    files[1].write_text(json.dumps(slow))
    assert cli.main(["--targets", *map(str, files)]) == 0
    lines = {ln.split("  ")[0]: ln for ln in capsys.readouterr().out.splitlines()}
    assert "1 of 2" in lines["barrier"]
    assert "2 of 2" in lines["bcast 1 MiB"]
    assert "0 of 2" in lines["allreduce 8 B"]


def test_a_file_that_is_not_mmpi_bench_output_is_named(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text('{"tool": "something else"}')
    assert cli.main(["--targets", str(bad)]) == 1
    assert "bad.json: not an mmpi-bench --json file" in capsys.readouterr().err
