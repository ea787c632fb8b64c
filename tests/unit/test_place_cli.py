"""mmpi-monitor plot and mmpi-place from the command line, on synthetic rank files."""

import builtins
import json
import struct

import pytest
from monitor_fake import pairs_messages, write_rank_files

from place import MonitorError, load_job, load_rank_map
from place.cli import monitor_main, place_main

BLOCKS = ["low"] * 4 + ["high"] * 4


@pytest.fixture
def pairs_dir(tmp_path):
    coll = [("main", "coll", 0, 4, 4096), ("main", "coll", 4, 0, 4096)]
    write_rank_files(tmp_path / "mon", BLOCKS, pairs_messages(8) + coll)
    return tmp_path / "mon"


def _png_size(path):
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", head[16:24])


def test_plot_draws_a_png(pairs_dir, tmp_path, capsys):
    pytest.importorskip("matplotlib", reason="the plot extra is not installed "
                        "(pip install '.[plot]')")
    out = tmp_path / "m.png"
    assert monitor_main(["plot", str(pairs_dir), "-o", str(out)]) == 0
    width, height = _png_size(out)
    assert width > 2 * height > 300
    assert monitor_main(["plot", str(pairs_dir), "-o", str(tmp_path / "n.png"),
                         "--messages", "--phase", "main"]) == 0


def test_plot_groups_a_scattered_layout_by_cluster(tmp_path):
    pytest.importorskip("matplotlib", reason="the plot extra is not installed")
    from place.plot import cluster_order, plot_job

    layout = ["low", "high", "low", "high", "low", "high"]
    write_rank_files(tmp_path / "mon", layout, [("main", "p2p", 0, 1, 10)])
    assert cluster_order(tuple(layout)) == [0, 2, 4, 1, 3, 5]
    plot_job(load_job(tmp_path / "mon"), tmp_path / "s.png")
    assert _png_size(tmp_path / "s.png")[0] > 0


def test_plot_of_a_job_with_no_traffic(tmp_path):
    pytest.importorskip("matplotlib", reason="the plot extra is not installed")
    write_rank_files(tmp_path / "mon", ["low", "high"], [])
    assert monitor_main(["plot", str(tmp_path / "mon"), "-o", str(tmp_path / "z.png")]) == 0


def test_plot_without_matplotlib_says_what_to_install(pairs_dir, tmp_path, monkeypatch):
    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name.startswith("matplotlib"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    from place.plot import plot_job

    with pytest.raises(MonitorError, match=r"needs matplotlib: pip install 'mmpi\[plot\]'"):
        plot_job(load_job(pairs_dir), tmp_path / "x.png")


def test_place_writes_a_map_with_nothing_forwarded(pairs_dir, tmp_path, capsys):
    out = tmp_path / "map.json"
    assert place_main([str(pairs_dir), "--low", "4", "--high", "4", "--output", str(out)]) == 0
    text = capsys.readouterr().out
    owners = load_rank_map(out, 4, 4)
    assert all(owners[i] == owners[i + 4] for i in range(4))
    assert set(json.loads(out.read_text())) == {"version", "low", "high"}
    lines = {line.split("(")[0].strip(): line for line in text.splitlines()}
    assert "24.0 MiB  100.0%" in lines["as run"]
    assert "0 B    0.0%" in lines["proposed"]
    assert "every split checked (70 of them): optimal" in text
    assert "collectives: 8.0 KiB crossed in the run" in text
    assert "vertex cut: none needed" in text


def test_place_reports_the_default_layout_and_a_vertex_cut(pairs_dir, capsys):
    assert place_main([str(pairs_dir), "--low", "1", "--high", "7"]) == 0
    text = capsys.readouterr().out
    assert "default (1+7)" in text and "6.0 MiB   25.0%" in text
    assert "vertex cut (thesis 2.2): 1 rank" in text
    assert "not predicted for other cluster sizes" in text


def test_place_keeps_a_layout_that_is_already_optimal(tmp_path, capsys):
    msgs = [("main", "p2p", i, i ^ 1, 1000) for i in range(8)]  # partners 0-1, 2-3, ...
    write_rank_files(tmp_path / "mon", BLOCKS, msgs)
    assert place_main([str(tmp_path / "mon"), "--low", "4", "--high", "4"]) == 0
    assert "the layout as run is already optimal: keep it" in capsys.readouterr().out


@pytest.mark.parametrize("args, message", [
    (["--low", "3", "--high", "4"], "--low 3 --high 4 place 7 ranks, but the job has 8"),
    (["--low", "4", "--high", "4", "--phase", "solve"], "no phase named 'solve'"),
    (["--low", "4", "--high", "4", "-o", "/nonexistent/dir/map.json"], "no such directory"),
])
def test_place_refuses_bad_input_naming_the_problem(pairs_dir, capsys, args, message):
    assert place_main([str(pairs_dir), *args]) == 1
    assert message in capsys.readouterr().err


def test_place_refuses_a_directory_without_rank_files(tmp_path, capsys):
    assert place_main([str(tmp_path), "--low", "1", "--high", "1"]) == 1
    assert "not a monitor directory" in capsys.readouterr().err


def test_place_refuses_a_cluster_of_no_ranks(pairs_dir, capsys):
    with pytest.raises(SystemExit) as exit_:
        place_main([str(pairs_dir), "--low", "0", "--high", "8"])
    assert exit_.value.code == 2
    assert "expected at least 1 rank, got 0" in capsys.readouterr().err


def test_the_console_scripts_run_end_to_end(pairs_dir, tmp_path):
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    here = Path(sys.executable).parent  # the environment running the tests, activated or not
    exes = {name: shutil.which(name, path=str(here)) or shutil.which(name)
            for name in ("mmpi-monitor", "mmpi-place")}
    if None in exes.values():
        pytest.fail(f"console scripts missing (pip install -e '.[test]'): {exes}")
    r = subprocess.run([exes["mmpi-monitor"], "merge", str(pairs_dir)], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0 and "heaviest pairs" in r.stdout, r.stderr
    out = tmp_path / "map.json"
    r = subprocess.run([exes["mmpi-place"], str(pairs_dir / "matrix.npz"), "--low", "2",
                        "--high", "6", "-o", str(out)], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert load_rank_map(out, 2, 6).count("low") == 2
    r = subprocess.run([exes["mmpi-place"], str(pairs_dir), "--low", "2", "--high", "2"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1
    assert r.stderr.strip() == "mmpi-place: --low 2 --high 2 place 4 ranks, but the job has 8"
