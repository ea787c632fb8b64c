"""A monitored run of the scattered-pairs example, merged and placed by the tools."""

from __future__ import annotations

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
