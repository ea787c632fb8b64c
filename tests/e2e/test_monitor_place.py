"""A monitored run of the scattered-pairs example, merged and placed by the tools."""

from __future__ import annotations

import json

import pytest
from conftest import ROOT

from place import bisect, cut_bytes, merge_rank_files
from place.cli import monitor_main

pytestmark = pytest.mark.mpi
PAIRS = str(ROOT / "examples" / "pairs.py")


@pytest.mark.timeout(150)
def test_pairs_forward_everything_as_run_and_nothing_as_placed(bridged, tmp_path, capsys):
    nbytes, rounds = 65536, 2
    job = bridged(PAIRS, str(nbytes), str(rounds), env={"MMPI_MONITOR": str(tmp_path)})
    assert job.returncode == 0, job.output
    m = merge_rank_files(tmp_path)
    p2p = m.matrix("p2p_bytes")
    # every rank sent its partner `rounds` blocks, all across the zipper, and nothing else
    assert p2p.sum() == 4 * rounds * nbytes
    assert cut_bytes(p2p, m.layout) == p2p.sum()
    assert m.matrix("p2p_msgs")[0, 2] == m.matrix("p2p_msgs")[1, 3] == rounds
    split = bisect(p2p, 2, 2, current=m.layout)
    assert split.cut_bytes == 0 and split.owners[0] == split.owners[2]
    assert monitor_main(["merge", str(tmp_path)]) == 0
    assert "100.0%" in capsys.readouterr().out


@pytest.mark.timeout(200)
def test_monitor_place_and_run_placed_forwards_what_was_predicted(bridged, tmp_path, capsys):
    """mmpi-run --monitor, mmpi-place, mmpi-run --rank-map: the measured cut is the predicted."""
    from place import load_job
    from place.advice import advise
    from place.cli import place_main

    nbytes, rounds = 40000, 3
    run1, run2, path = tmp_path / "run1", tmp_path / "run2", tmp_path / "map.json"
    (run1 / "rank-9.json").parent.mkdir()
    (run1 / "rank-9.json").write_text("{}")  # an earlier, larger run's file: removed first
    job = bridged(PAIRS, str(nbytes), str(rounds), launcher_args=("--monitor", str(run1)))
    assert job.returncode == 0, job.output
    assert "traffic of the job (--monitor" in job.stderr and "100.0%" in job.stderr, job.stderr
    first = load_job(run1)  # run1/matrix.npz, merged by mmpi-run
    assert (run1 / "matrix.npz").is_file() and not (run1 / "rank-9.json").exists()
    assert cut_bytes(first.matrix("p2p_bytes"), first.layout) == 4 * rounds * nbytes
    assert place_main([str(run1), "--low", "2", "--high", "2", "--output", str(path)]) == 0
    advice = capsys.readouterr().out
    proposed = advise(first, 2, 2)
    predicted = proposed.proposed.cut_bytes
    job = bridged(PAIRS, str(nbytes), str(rounds),
                  launcher_args=("--rank-map", str(path), "--monitor", str(run2)))
    assert job.returncode == 0, job.output
    second = load_job(run2)
    assert second.layout == proposed.owners  # the run was placed as mmpi-place advised
    assert [v for v, c in enumerate(second.layout) if c == "low"] == \
        json.loads(path.read_text())["low"]
    measured = cut_bytes(second.matrix("p2p_bytes"), second.layout)
    assert measured == predicted == 0, advice
    assert "as run (2+2)" in advice
    assert second.matrix("p2p_bytes").sum() == first.matrix("p2p_bytes").sum()
