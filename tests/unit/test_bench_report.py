"""Tests of bench.report: merging, ratios, OSU-style tables, JSON, plots, from fake figures."""
# ruff: noqa: D103  (test names say what they check)

from __future__ import annotations

import json
import sys

import pytest

from bench import report


def rec(bench, size, value, unit="us", **extra):
    """Make a worker result record, as parsed from an MMPI-BENCH line."""
    return {"type": "result", "bench": bench, "size": size, "unit": unit, "value": value,
            "samples": [value, value * 1.1, value * 0.9], "iters": 100, **extra}


NATIVE = [rec("latency", 8, 2.0), rec("latency", 65536, 12.5),
          rec("bw", 4 << 20, 12000.0, unit="MB/s"), rec("barrier", 0, 10.0),
          rec("pairs", 1 << 20, 8000.0, unit="MB/s", pairs=1),
          rec("pairs", 1 << 20, 12000.0, unit="MB/s", pairs=2),
          rec("n:1", 1024, 50.0, clients=2, **{"MB/s": 41.0})]
BRIDGED = [rec("latency", 65536, 25.0), rec("latency", 8, 6.0),
           rec("bw", 4 << 20, 3000.0, unit="MB/s"), rec("barrier", 0, 30.0),
           rec("pairs", 1 << 20, 2000.0, unit="MB/s", pairs=1),
           rec("pairs", 1 << 20, 3000.0, unit="MB/s", pairs=2)]


@pytest.fixture
def rows():
    return report.merge({"native": NATIVE, "bridged": BRIDGED})


def row(rows, bench, size, pairs=None):
    return next(r for r in rows if r["bench"] == bench and r["size"] == size
                and r.get("pairs") == pairs)


def test_merge_pairs_up_modes_and_computes_ratio(rows):
    lat8 = row(rows, "latency", 8)
    assert lat8["native"]["value"] == 2.0 and lat8["bridged"]["value"] == 6.0
    assert lat8["ratio"] == pytest.approx(3.0)
    assert lat8["native"]["samples"] == [2.0, 2.2, 2.0 * 0.9]
    assert "bench" not in lat8["native"] and "type" not in lat8["native"]
    assert row(rows, "bw", 4 << 20)["ratio"] == pytest.approx(0.25)
    assert row(rows, "pairs", 1 << 20, pairs=2)["ratio"] == pytest.approx(0.25)


def test_merge_orders_by_catalogue_then_pairs_then_size(rows):
    keys = [(r["bench"], r.get("pairs"), r["size"]) for r in rows]
    assert keys == [("latency", None, 8), ("latency", None, 65536), ("bw", None, 4 << 20),
                    ("barrier", None, 0), ("n:1", None, 1024), ("pairs", 1, 1 << 20),
                    ("pairs", 2, 1 << 20)]


def test_missing_side_gives_no_ratio(rows):
    r = row(rows, "n:1", 1024)
    assert r["bridged"] is None and r["ratio"] is None
    assert r["clients"] == 2 and r["native"]["MB/s"] == 41.0


@pytest.mark.parametrize("native,bridged,expected", [
    (2.0, 6.0, 3.0), (0.0, 6.0, None), (None, 6.0, None), (2.0, None, None)])
def test_ratio_is_bridged_over_native(native, bridged, expected):
    def side(v):
        return None if v is None else {"value": v}

    assert report.ratio({"native": side(native), "bridged": side(bridged)}) == expected


def test_tables_are_osu_style(rows):
    text = report.format_tables(rows, {"p2p": "native: 2 ranks", "world": "bridged: 2+2"})
    lines = text.splitlines()
    i = lines.index("# mmpi-bench latency: ping-pong latency, one way, vrank 0 <-> last vrank")
    assert lines[i + 1] == "# native: 2 ranks"
    assert "lower is better" in lines[i + 2]
    assert lines[i + 3].split() == ["#", "Size", "Native", "Bridged", "Bridged/Native"]
    assert lines[i + 4].split() == ["8", "2.00", "6.00", "3.00"]
    assert lines[i + 5].split() == ["65536", "12.50", "25.00", "2.00"]
    assert "higher is better" in text.split("# mmpi-bench bw:")[1].splitlines()[2]
    assert ["-", "10.00", "30.00", "3.00"] in [ln.split() for ln in lines]  # barrier: no size
    assert ["1024", "50.00", "-", "-"] in [ln.split() for ln in lines]  # missing bridged


def test_pairs_table_shows_scaling_against_one_pair(rows):
    text = report.format_tables(rows)
    block = text.split("# mmpi-bench pairs:")[1].splitlines()
    assert block[2].split() == ["#", "Pairs", "Size", "Native", "Bridged", "Bridged/Native",
                                "Native/1", "pair", "Bridged/1", "pair"]
    assert block[3].split() == ["1", "1048576", "8000.00", "2000.00", "0.25", "1.00", "1.00"]
    assert block[4].split() == ["2", "1048576", "12000.00", "3000.00", "0.25", "1.50", "1.50"]


def test_header_names_machine_library_and_load():
    env = {"hostname": "node7", "cpu_count": 2, "cpu_model": "AMD EPYC",
           "mpi_library": "MPICH Version:      5.0.2\nMPICH Release date: x", "mpi4py": "4.1.2"}
    head = report.format_header(env, (1.5, 2.0, 2.25))
    assert "node7 (2 cpus, AMD EPYC), MPICH Version: 5.0.2, mpi4py 4.1.2" in head
    assert "load average before the first job: 1.50 2.00 2.25" in head


def test_json_document_has_every_figure_and_the_environment(rows, tmp_path):
    env = report.environment({"mpi_library": "MPICH Version: 5.0.2", "mpi_version": "5.0"},
                             ["latency", "--json", "x.json"])
    for key in ("hostname", "cpu_count", "cpu_model", "mpi_library", "mpi4py", "numpy",
                "command", "date"):
        assert key in env, key
    assert env["command"] == "mmpi-bench latency --json x.json"
    assert env["mpi_library"] == "MPICH Version: 5.0.2"
    doc = report.document(rows, env, settings={"reps": 3}, layouts={"p2p": "x"},
                          runs=[{"mode": "native", "status": "ok"}])
    path = report.write_json(tmp_path / "sub" / "out.json", doc)
    back = json.loads(path.read_text())
    assert back["tool"] == "mmpi-bench" and back["settings"] == {"reps": 3}
    assert back["environment"]["command"] == env["command"]
    lat = [r for r in back["results"] if r["bench"] == "latency"]
    assert [(r["size"], r["native"]["value"], r["bridged"]["value"]) for r in lat] == [
        (8, 2.0, 6.0), (65536, 12.5, 25.0)]
    assert not list(tmp_path.glob("sub/*.tmp"))


def test_plot_names_are_file_names():
    assert report.plot_name("1:n") == "1_to_n.png"
    assert report.plot_name("n:1") == "n_to_1.png"
    assert report.plot_name("allreduce") == "allreduce.png"


@pytest.mark.parametrize("n,text", [(1, "1"), (512, "512"), (1024, "1K"), (65536, "64K"),
                                    (1 << 20, "1M"), (4 << 20, "4M"), (1536, "1536")])
def test_human_size(n, text):
    assert report.human_size(n) == text


def test_missing_matplotlib_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import now raises ImportError
    with pytest.raises(report.PlotUnavailable, match=r"pip install .*mmpi\[plot\]"):
        report.require_matplotlib()


def test_plots_are_written(rows, tmp_path):
    pytest.importorskip("matplotlib")
    written = report.write_plots(rows, tmp_path / "plots", {"p2p": "native: 2 ranks"})
    names = sorted(p.name for p in written)
    assert names == ["barrier.png", "bw.png", "latency.png", "n_to_1.png", "pairs.png",
                     "ratios.png"]
    for p in written:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_across_jobs_baseline_gets_its_own_column_and_ratio():
    rows = report.merge({"native": NATIVE, "bridged": BRIDGED,
                         "across": [rec("bw", 4 << 20, 6000.0, unit="MB/s")]})
    bw = row(rows, "bw", 4 << 20)
    assert bw["ratio_across"] == pytest.approx(0.5) and bw["ratio"] == pytest.approx(0.25)
    assert "across" not in row(rows, "latency", 8)
    text = report.format_tables(rows)
    bw_table = text[text.index("# mmpi-bench bw:"):].split("\n\n")[0]
    assert "Across jobs" in bw_table and "Bridged/Across" in bw_table
    assert bw_table.splitlines()[-1].split() == ["4194304", "12000.00", "6000.00", "3000.00",
                                                 "0.25", "0.50"]
    latency_table = text[text.index("# mmpi-bench latency:"):].split("\n\n")[0]
    assert "Across" not in latency_table


def test_overlap_table_shows_each_mode_with_its_pure_time():
    side = {"native": {"value": 10.0, "pure_us": 700.0}, "async": {"value": 95.5, "pure_us": 4e4},
            "bridged": {"value": 12.25, "pure_us": 3000.0}}
    rows = report.merge({m: [{"type": "result", "bench": "iallreduce", "size": 1 << 20,
                              "unit": "%", **v}] for m, v in side.items()})
    assert rows[0]["async"]["value"] == 95.5
    text = report.format_tables(rows)
    line = text.splitlines()[-1].split()
    assert line == ["1048576", "10.00", "700.00", "95.50", "40000.00", "12.25", "3000.00"]
    assert "Native async %" in text
