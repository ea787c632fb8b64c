"""mmpi/_startup/site/mmpi_output_mark.py: a rank's writes marked as Hydra marks them (Open MPI)."""
# ruff: noqa: D103  (test names say what they check)

from __future__ import annotations

import os
import sys

from launch._readers import RankDemux
from mmpi.wire import rendezvous as rv

sys.path.insert(0, rv.startup_dir())
import mmpi_output_mark  # noqa: E402  (lives on the ranks' PYTHONPATH, not a package)


def test_every_write_and_every_line_in_it_starts_with_the_mark():
    r, w = os.pipe()
    marked = mmpi_output_mark._Marked(w, b"\x1f[3] ")
    marked.write(b"one\ntwo")
    marked.write(b" and\n")
    marked.write(b"")
    os.close(w)
    data = os.read(r, 1000)
    os.close(r)
    assert data == b"\x1f[3] one\n\x1f[3] two\x1f[3]  and\n"
    reader = RankDemux("high", 2)  # what mmpi-run makes of it: whole lines, by rank
    lines = [x for raw in data.splitlines(keepends=True) for x in reader.feed(raw)]
    assert [(x.label, x.text) for x in lines] == [("[high:3 v5] ", "one"),
                                                  ("[high:3 v5] ", "two and")]
