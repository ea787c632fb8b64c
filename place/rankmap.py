"""Rank maps: which cluster runs each application (virtual) rank. Pure; no numpy, no MPI.

A rank map file, as ``mmpi-place --output`` writes it and ``mmpi-run --rank-map`` reads it::

    {"version": 1, "low": [0, 1, 4, 5], "high": [2, 3, 6, 7]}

``low`` and ``high`` list the virtual ranks each cluster runs, every rank of the job exactly
once; the order inside a list does not matter (a cluster's local ranks follow its virtual
ranks in increasing order, see ``mmpi.wire.layout``). The default (thesis) layout is the map
``low: [0..x-1], high: [x..x+y-1]``. Both clusters need at least one rank.

Rule: every check raises `RankMapError` with a message that starts with where the map came
from and names the rank, key or size at fault.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from mmpi.wire import text as textfile
from mmpi.wire.layout import CLUSTERS

from .errors import RankMapError

VERSION = 1
KEYS = ("version", *CLUSTERS)


def load_rank_map(path: str | os.PathLike, low: int | None = None,
                  high: int | None = None, *, where: str | None = None) -> list[str]:
    """Read the rank map at `path`; return the cluster of each virtual rank (``owners``).

    `low` and `high`, when given, are the cluster sizes the job asks for (``--low/--high`` or
    the YAML); a map that does not fit them is refused. `where` starts every error message
    (default: ``rank map <path>``).
    """
    where = where or f"rank map {path}"
    try:
        text = textfile.read(path)
    except OSError as exc:
        raise RankMapError(f"{where}: cannot read it: {exc.strerror or exc}") from exc
    except textfile.NotText as exc:
        raise RankMapError(f"{where}: {exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RankMapError(f"{where}: not valid JSON: {exc.msg} (line {exc.lineno}, "
                           f"column {exc.colno})") from exc
    return rank_map_owners(data, low, high, where=where)


def rank_map_owners(data: object, low: int | None = None, high: int | None = None, *,
                    where: str = "rank map") -> list[str]:
    """Check a rank map already parsed (from JSON or YAML); return the owner of each rank."""
    if not isinstance(data, Mapping):
        raise RankMapError(f"{where}: expected a mapping with keys {', '.join(KEYS)}, "
                           f"got {type(data).__name__}")
    unknown = [k for k in data if k not in KEYS]
    if unknown:
        raise RankMapError(f"{where}: unknown key {unknown[0]!r} (expected {', '.join(KEYS)})")
    missing = [k for k in KEYS if k not in data]
    if missing:
        raise RankMapError(f"{where}: missing key {missing[0]!r}")
    version = data["version"]
    if not _is_int(version) or version != VERSION:
        raise RankMapError(f"{where}: version {version!r} is not supported "
                           f"(this mmpi reads version {VERSION})")
    lists = {c: _rank_list(data[c], c, where) for c in CLUSTERS}
    seen: dict[int, str] = {}
    for c in CLUSTERS:
        for r in lists[c]:
            if r in seen:
                if seen[r] == c:
                    raise RankMapError(f"{where}: rank {r} is listed twice in {c}")
                raise RankMapError(f"{where}: rank {r} is listed in both low and high")
            seen[r] = c
    for c, want in (("low", low), ("high", high)):
        got = len(lists[c])
        if want is not None and got != want:
            raise RankMapError(f"{where}: {c} lists {got} rank{'s' * (got != 1)} but the job "
                               f"has {want} in the {c} cluster")
        if got == 0:
            raise RankMapError(f"{where}: {c} lists no rank (each cluster needs at least one)")
    size = len(seen)
    if low is not None and high is not None:
        size = low + high
    # With the sizes right and no rank twice, a rank out of range always leaves one missing.
    beyond = sorted(r for r in seen if r >= size)
    absent = [r for r in range(size) if r not in seen]
    if absent:
        s = "s" * (len(absent) != 1)
        missing = (f"rank{s} {format_ranks(absent)} {'are' if s else 'is'} missing (in "
                   "neither low nor high)")
        if beyond:
            raise RankMapError(f"{where}: rank {beyond[0]} is out of range (the job has {size} "
                               f"ranks, 0..{size - 1}) and {missing}")
        raise RankMapError(f"{where}: {missing}")
    return [seen[r] for r in range(size)]


def rank_map_data(owners: Sequence[str]) -> dict:
    """The rank map (JSON-ready) of a layout given as the owner of each virtual rank."""
    for v, c in enumerate(owners):
        if c not in CLUSTERS:
            raise RankMapError(f"rank map: rank {v} has unknown cluster {c!r} "
                               "(expected low or high)")
    data = {"version": VERSION}
    data.update({c: [v for v, o in enumerate(owners) if o == c] for c in CLUSTERS})
    return data


def write_rank_map(path: str | os.PathLike, owners: Sequence[str]) -> None:
    """Write the rank map of `owners` to `path` (checked as `load_rank_map` would read it)."""
    data = rank_map_data(owners)
    rank_map_owners(data, where="rank map")
    lines = ["{", f'  "version": {data["version"]},']
    lines += [f'  "{c}": {json.dumps(data[c])}{"," * (c != CLUSTERS[-1])}' for c in CLUSTERS]
    Path(path).write_text("\n".join(lines) + "\n}\n")


def format_ranks(ranks: Sequence[int]) -> str:
    """Ranks in short form, runs as ranges: ``0-3, 6, 8-9``."""
    out: list[str] = []
    rs = sorted(ranks)
    i = 0
    while i < len(rs):
        j = i
        while j + 1 < len(rs) and rs[j + 1] == rs[j] + 1:
            j += 1
        out.append(str(rs[i]) if i == j else f"{rs[i]}-{rs[j]}")
        i = j + 1
    return ", ".join(out)


def _is_int(x: object) -> bool:
    # bool is an int in Python; `true` in a rank list is a mistake, not rank 1.
    return isinstance(x, int) and not isinstance(x, bool)


def _rank_list(value: object, cluster: str, where: str) -> list[int]:
    if not isinstance(value, list):
        raise RankMapError(f"{where}: {cluster}: expected a list of ranks, "
                           f"got {type(value).__name__}")
    for i, r in enumerate(value):
        if not _is_int(r) or r < 0:
            raise RankMapError(f"{where}: {cluster}[{i}]: expected a rank (a whole number "
                               f">= 0), got {r!r}")
    return value
