"""A job's output as whole, labelled lines: the readers the runner feeds each pipe through.

A forwarder's lines are labelled with its name (`Labeller`). A cluster's come from Hydra's
chunk-prefixed stream, or on Open MPI from the ranks' own marks in the same form
(launch/_openmpi.py Rule 3), and are rebuilt per rank (`RankDemux`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import NamedTuple

from .plan import CHUNK_MARK, CLUSTER, Launch

_MARK = CHUNK_MARK.encode()
_CHUNK_HEAD = re.compile(rb"\[(\d+)\] ")


class Line(NamedTuple):
    """One whole line of a job's output, before it is written."""

    label: str  # "[fwd0] ", "[low:1 v1] ", "[low] "
    text: str  # without the newline
    maybe_mpiexec: bool  # not known to come from a rank: could be mpiexec's own message
    rank: int | None = None  # the local rank that printed it, when known


class Labeller:
    """Label each line of one process's output with its name (forwarders)."""

    def __init__(self, name: str) -> None:
        self._label = f"[{name}] "

    def feed(self, raw: bytes) -> list[Line]:
        """Take one line of the raw stream (it ends in a newline except at EOF)."""
        return [Line(self._label, raw.decode(errors="replace").removesuffix("\n"), True)]

    def flush(self) -> list[Line]:
        """Return the unfinished lines, at EOF: none, feed() had whole lines."""
        return []


class RankDemux:
    """Rebuild whole per-rank lines from Hydra's chunk-prefixed output of one cluster job.

    Hydra writes ``MARK[k] `` before every chunk a rank wrote and after every newline inside
    a chunk, and chunks of different ranks may follow each other in mid-line. So: split on
    MARK, give each piece to the rank its head names, and keep a partial line per rank.
    Text with no head at the start of a line is mpiexec's own (labelled ``[cluster] ``).
    """

    def __init__(self, cluster: str, first_vrank: int = 0, vranks: Sequence[int] = ()) -> None:
        self._cluster = cluster
        self._first_vrank = first_vrank
        self._vranks = tuple(vranks)  # of each local rank, under a rank map
        self._partial: dict[int | None, bytes] = {}

    def feed(self, raw: bytes) -> list[Line]:
        """Take one line of the raw stream (it ends in a newline except at EOF)."""
        out: list[Line] = []
        pieces = raw.split(_MARK)
        rank: int | None = None
        self._add(rank, pieces[0], out)
        for piece in pieces[1:]:
            head = _CHUNK_HEAD.match(piece)
            if head:
                rank, piece = int(head[1]), piece[head.end() :]
            else:
                piece = _MARK + piece  # the program printed the mark byte itself
            self._add(rank, piece, out)
        return out

    def flush(self) -> list[Line]:
        """Return the unfinished lines, at EOF."""
        out = [self._line(rank, data) for rank, data in self._partial.items()]
        self._partial.clear()
        return out

    def _add(self, rank: int | None, data: bytes, out: list[Line]) -> None:
        if not data:
            return
        data = self._partial.pop(rank, b"") + data
        *lines, rest = data.split(b"\n")
        out.extend(self._line(rank, line) for line in lines)
        if rest:
            self._partial[rank] = rest

    def _line(self, rank: int | None, data: bytes) -> Line:
        text = data.decode(errors="replace")
        if rank is None:
            return Line(f"[{self._cluster}] ", text, True)
        vrank = self._vranks[rank] if rank < len(self._vranks) else self._first_vrank + rank
        return Line(f"[{self._cluster}:{rank} v{vrank}] ", text, False, rank)


Reader = Labeller | RankDemux


def for_launch(launch: Launch) -> Reader:
    """The reader for one pipe of `launch`: per rank for a cluster, else by job name."""
    if launch.role == CLUSTER:
        return RankDemux(launch.name, launch.first_vrank, launch.vranks)
    return Labeller(launch.name)


__all__ = ["Labeller", "Line", "RankDemux", "Reader", "for_launch"]
