"""A tiny stand-in for the rank side's monitor: the rank files a job with known traffic writes.

It follows the rank-file contract on its own (it does not use `place`), so tests of the tools
do not depend on the library's counters, and the library's tests can compare against it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path

BINS = 48


def size_bin(s: int) -> int:
    """k with 2**(k-1) < s <= 2**k; 0 for s <= 1; the last bin takes anything larger."""
    k = 0
    while 2**k < s and k < BINS - 1:
        k += 1
    return k


def rank_documents(layout: Sequence[str], messages: Iterable[tuple],
                   phases: Sequence[str] = ("main",)) -> list[dict]:
    """One rank-file document per rank; `messages` are (phase, kind, src, dst, nbytes)."""
    n = len(layout)
    docs = []
    for r in range(n):
        docs.append({
            "version": 1, "rank": r, "size": n, "cluster": layout[r], "layout": list(layout),
            "phases": [{"name": p,
                        "p2p_msgs": [0] * n, "p2p_bytes": [0] * n,
                        "coll_msgs": [0] * n, "coll_bytes": [0] * n,
                        "hist_p2p": [[0] * BINS for _ in range(n)],
                        "hist_coll": [[0] * BINS for _ in range(n)]} for p in phases],
        })
    for phase, kind, src, dst, nbytes in messages:
        ph = docs[src]["phases"][list(phases).index(phase)]
        ph[f"{kind}_msgs"][dst] += 1
        ph[f"{kind}_bytes"][dst] += nbytes
        ph[f"hist_{kind}"][dst][size_bin(nbytes)] += 1
    return docs


def write_rank_files(directory: Path, layout: Sequence[str], messages: Iterable[tuple],
                     phases: Sequence[str] = ("main",)) -> list[dict]:
    """Write ``rank-<r>.json`` for every rank into `directory`; return the documents."""
    directory.mkdir(parents=True, exist_ok=True)
    docs = rank_documents(layout, messages, phases)
    for d in docs:
        (directory / f"rank-{d['rank']}.json").write_text(json.dumps(d))
    return docs


def pairs_messages(n: int, nbytes: int = 1 << 20, count: int = 3) -> list[tuple]:
    """The scattered partners i <-> i+n/2: `count` messages of `nbytes` each way."""
    h = n // 2
    return [("main", "p2p", a, b, nbytes) for i in range(h) for a, b in ((i, i + h), (i + h, i))
            for _ in range(count)]
