"""Tests of launch._readers on bytes: Hydra's chunked rank output back into labelled lines."""
# ruff: noqa: D103  (test names say what they check)

from __future__ import annotations

from launch._readers import Labeller, RankDemux
from launch.plan import CHUNK_MARK

M = CHUNK_MARK  # what Hydra's -prepend-pattern puts before "[k] "


def feed(demux: RankDemux | Labeller, *raw: str | bytes) -> list[str]:
    """Feed raw lines of a job's output; return what would be printed."""
    lines = [x for r in raw for x in demux.feed(r.encode() if isinstance(r, str) else r)]
    return [f"{x.label}{x.text}\n" for x in lines]


def test_demux_rewrites_rank_prefixes():
    demux = RankDemux("high", first_vrank=2)
    assert feed(demux, f"{M}[1] text\n") == ["[high:1 v3] text\n"]
    assert feed(demux, f"{M}[0] [1] is a list\n") == ["[high:0 v2] [1] is a list\n"]
    assert feed(demux, "mpiexec says hi\n") == ["[high] mpiexec says hi\n"]
    assert [x.maybe_mpiexec for x in demux.feed(b"x\n" + f"{M}[0] y\n".encode())] == [True, False]


def test_forwarder_lines_are_labelled():
    assert feed(Labeller("fwd1"), "ready\n", "no newline") == [
        "[fwd1] ready\n",
        "[fwd1] no newline\n",
    ]


def test_demux_rebuilds_lines_split_and_interleaved_by_hydra():
    # What Hydra really sent for print("hi") on 2 unbuffered ranks: chunks, not lines.
    demux = RankDemux("low", first_vrank=0)
    out = feed(demux, f"{M}[0] hi{M}[1] hi\n", f"{M}[1] there\n", f"{M}[0] \n")
    assert out == ["[low:1 v1] hi\n", "[low:1 v1] there\n", "[low:0 v0] hi\n"]


def test_demux_keeps_partial_lines_until_eof():
    demux = RankDemux("low", first_vrank=0)
    assert feed(demux, f"{M}[0] no newline") == []
    assert feed(demux, f"{M}[1] a\x1fb\n") == ["[low:1 v1] a\x1fb\n"]
    assert [x.label + x.text for x in demux.flush()] == ["[low:0 v0] no newline"]
    assert demux.flush() == []


def test_demux_survives_bad_utf8():
    assert feed(RankDemux("low", 0), f"{M}[0] ".encode() + b"\xff\n") == ["[low:0 v0] \ufffd\n"]
