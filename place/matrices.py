"""A monitored job's traffic matrices: rank files merged and checked, the .npz file, loading.

A rank file, ``<dir>/rank-<vrank>.json``, is what one rank of a monitored job
(``MMPI_MONITOR=<dir>``) writes at finalize::

    {"version": 1, "rank": 3, "size": 4, "cluster": "high",
     "layout": ["low", "low", "high", "high"],
     "phases": [{"name": "main",
                 "p2p_msgs": [n ints], "p2p_bytes": [...], "coll_msgs": [...],
                 "coll_bytes": [...], "hist_p2p": [n lists of 48 ints], "hist_coll": [...]}]}

An optional ``"combined": {"sends": s, "crossings": c, "bytes_not_crossed": b}`` says how
many of the sends counted in ``p2p_*`` went as dynamic broadcasts (mmpi/_engine/fanout.py): s sends
whose bytes crossed the zipper c times, b bytes fewer than as sent.

Entry ``[j]`` counts what this rank sent to virtual rank j: user point-to-point (``p2p_*``) and
the messages collectives made (``coll_*``). ``hist_*[j][k]`` counts the messages to j of s
bytes with 2**(k-1) < s <= 2**k (k = 0 for s <= 1; the last bin also takes anything larger).
A message to j is *forwarded* when ``layout[j] != layout[rank]``: it crossed the zipper.

Rules, checked by `merge_rank_files` (every error names the file and the field):

* every rank 0..size-1 has exactly one file, and all agree on version, size and layout;
* ``cluster`` is ``layout[rank]``; each count is a whole number >= 0;
* ``sum(hist[j]) == msgs[j]`` and ``bytes[j]`` lies within what the histogram allows;
* phases are matched by name across ranks (a rank that lacks a phase sent nothing in it),
  and entries of one file with the same name are added up. Phases are taken to be disjoint
  intervals of the run, so the job's totals are their sum.

The merged file, ``matrix.npz`` (`save_matrices`; read it with ``numpy.load`` or
`load_matrices`), holds, for N ranks and P phases, all counts as int64:

=====================================  ==========  ==========================================
``version``                            ()          1
``layout``                             (N,)        cluster of each virtual rank (str)
``phases``                             (P,)        phase names, in first-seen order (str)
``p2p_msgs p2p_bytes``                 (N, N)      [i, j]: sent by i to j, all phases
``coll_msgs coll_bytes``               (N, N)      the same for collectives' messages
``hist_p2p hist_coll``                 (N, N, 48)  [i, j, k]: messages i -> j in size bin k
``forwarded``                          (N, N)      bool: layout[i] != layout[j]
``phase_<name of any of the above>``   (P, ...)    the same per phase (``phase_p2p_bytes``...)
``combined``                           (N, 3)      per rank: sends, crossings, bytes_not_crossed
=====================================  ==========  ==========================================
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mmpi.wire.layout import CLUSTERS

from .errors import MonitorError
from .rankmap import format_ranks

VERSION = 1
BINS = 48
COUNTS = ("p2p_msgs", "p2p_bytes", "coll_msgs", "coll_bytes")
HISTS = ("hist_p2p", "hist_coll")
ARRAYS = COUNTS + HISTS
MATRIX_FILE = "matrix.npz"
_RANK_FILE = re.compile(r"rank-(.*)\.json")
_TOP_KEYS = ("version", "rank", "size", "cluster", "layout", "phases")
COMBINED = ("sends", "crossings", "bytes_not_crossed")
_PHASE_KEYS = ("name", *ARRAYS)
# Smallest and largest message size of each histogram bin; the last bin is open-ended.
_BIN_LOW = np.array([0] + [2 ** (k - 1) + 1 for k in range(1, BINS)], dtype=np.float64)
_BIN_HIGH = np.array([2.0 ** k for k in range(BINS - 1)])


@dataclass(frozen=True, eq=False)
class JobMatrices:
    """What a monitored job sent, per pair of virtual ranks, per phase (read-only arrays).

    ``per_phase[name]`` has shape (P, N, N) for the counts and (P, N, N, 48) for the
    histograms; ``[p, i, j]`` is what rank i sent to rank j during phase ``phases[p]``.
    """

    layout: tuple[str, ...]
    phases: tuple[str, ...]
    per_phase: Mapping[str, np.ndarray]
    combined: np.ndarray | None = None  # (N, 3): the sends that went as dynamic broadcasts

    def combined_totals(self) -> dict[str, int]:
        """The job's dynamic broadcasts: sends, crossings, bytes_not_crossed (all phases)."""
        if self.combined is None:
            return dict.fromkeys(COMBINED, 0)
        return {k: int(v) for k, v in zip(COMBINED, self.combined.sum(axis=0), strict=True)}

    @property
    def size(self) -> int:
        """Number of ranks."""
        return len(self.layout)

    @property
    def forwarded(self) -> np.ndarray:
        """(N, N) bool: whether a message from i to j crossed the zipper."""
        owners = np.array(self.layout)
        return owners[:, None] != owners[None, :]

    def matrix(self, name: str, phase: str | None = None) -> np.ndarray:
        """Array `name` (``p2p_bytes``, ``hist_coll``...) of one phase, or summed over all."""
        if name not in ARRAYS:
            raise MonitorError(f"unknown matrix {name!r} (expected one of {', '.join(ARRAYS)})")
        a = self.per_phase[name]
        if phase is None:
            return a.sum(axis=0)
        return a[self.phase_index(phase)]

    def phase_index(self, phase: str) -> int:
        """Index of `phase` in `phases`."""
        try:
            return self.phases.index(phase)
        except ValueError:
            known = ", ".join(self.phases) or "none"
            raise MonitorError(f"no phase named {phase!r} (phases: {known})") from None


def merge_rank_files(directory: str | os.PathLike) -> JobMatrices:
    """Read and check every ``rank-*.json`` in `directory`; return the job's matrices."""
    d = Path(directory)
    files = _rank_files(d)
    first_path, first = None, None
    size = 0
    phases: list[str] = []
    blocks: dict[str, list[np.ndarray]] = {}
    combined: dict[int, list[int]] = {}
    for rank, path in sorted(files.items()):
        doc = _read_json(path)
        _check_keys(doc, _TOP_KEYS, str(path), optional=("combined",))
        if first is not None:
            for key in ("version", "size", "layout"):
                if doc[key] != first[key]:
                    raise MonitorError(f"{path}: {key} {_short(doc[key])} differs from "
                                       f"{_short(first[key])} in {first_path}")
        _check_header(doc, path, rank)
        if first is None:
            first_path, first, size = path, doc, doc["size"]
            blocks = {name: [] for name in ARRAYS}
        combined[rank] = _combined(doc.get("combined"), path)
        row = _phase_rows(doc["phases"], path, size)
        for name in row:
            if name not in phases:
                phases.append(name)
                for a in ARRAYS:
                    shape = (size, size) if a in COUNTS else (size, size, BINS)
                    blocks[a].append(np.zeros(shape, dtype=np.int64))
        for name, arrays in row.items():
            p = phases.index(name)
            for a in ARRAYS:
                blocks[a][p][rank] = arrays[a]
    absent = [r for r in range(size) if r not in files]
    if absent:
        raise MonitorError(f"{d}: no file for rank{'s' * (len(absent) > 1)} "
                           f"{format_ranks(absent)} of {size} (rank-<vrank>.json)")
    per_phase = {}
    for a in ARRAYS:
        shape = (0, size, size) if a in COUNTS else (0, size, size, BINS)
        arr = np.stack(blocks[a]) if blocks[a] else np.zeros(shape, dtype=np.int64)
        arr.flags.writeable = False
        per_phase[a] = arr
    both = np.array([combined[r] for r in range(size)], dtype=np.int64).reshape(size, 3)
    both.flags.writeable = False
    return JobMatrices(tuple(first["layout"]), tuple(phases), per_phase, both)


def _combined(part, path: Path) -> list[int]:
    """A rank file's optional ``combined`` field, checked, as [sends, crossings, bytes]."""
    if part is None:
        return [0, 0, 0]
    where = f"{path}: combined"
    if not isinstance(part, dict):
        raise MonitorError(f"{where}: expected an object, got {type(part).__name__}")
    _check_keys(part, COMBINED, where)
    values = [part[k] for k in COMBINED]
    if not all(type(v) is int for v in values):  # not True/False either, which numpy takes
        raise MonitorError(f"{where}: expected whole numbers, got {part}")
    return _counts(values, where, (len(COMBINED),)).tolist()


def save_matrices(job: JobMatrices, path: str | os.PathLike) -> None:
    """Write `job` as the documented ``matrix.npz`` (compressed)."""
    arrays: dict[str, np.ndarray] = {
        "version": np.array(VERSION, dtype=np.int64),
        "layout": np.array(job.layout, dtype=str),
        "phases": np.array(job.phases, dtype=str),
        "forwarded": job.forwarded,
        "combined": (job.combined if job.combined is not None
                     else np.zeros((job.size, 3), dtype=np.int64)),
    }
    for a in ARRAYS:
        arrays[a] = job.matrix(a)
        arrays[f"phase_{a}"] = job.per_phase[a]
    # np.savez adds ".npz" to a name without it; write through a file object to keep the name.
    # A fresh file renamed into place: nothing is written through a link planted at `path`.
    tmp = f"{os.fspath(path)}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez_compressed(f, **arrays)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def load_matrices(path: str | os.PathLike) -> JobMatrices:
    """Read a ``matrix.npz`` written by `save_matrices`, checking its arrays."""
    try:
        with np.load(path, allow_pickle=False) as z:
            data = {k: z[k] for k in z.files}
    except (OSError, ValueError) as exc:
        raise MonitorError(f"{path}: cannot read it as a matrix file: {exc}") from exc
    for key in ("version", "layout", "phases", *(f"phase_{a}" for a in ARRAYS)):
        if key not in data:
            raise MonitorError(f"{path}: no array {key!r}: not a matrix file of mmpi-monitor")
    if data["version"].shape != () or int(data["version"]) != VERSION:
        raise MonitorError(f"{path}: version {data['version']} is not supported "
                           f"(this mmpi reads version {VERSION})")
    layout = tuple(str(c) for c in data["layout"])
    phases = tuple(str(p) for p in data["phases"])
    _check_layout(list(layout), f"{path}: layout", len(layout))
    n, p = len(layout), len(phases)
    per_phase = {}
    for a in ARRAYS:
        arr = data[f"phase_{a}"]
        want = (p, n, n) if a in COUNTS else (p, n, n, BINS)
        if arr.shape != want or arr.dtype.kind not in "iu":
            raise MonitorError(f"{path}: phase_{a} has shape {arr.shape} and type {arr.dtype}, "
                               f"expected {want} of integers")
        arr = arr.astype(np.int64)
        arr.flags.writeable = False
        per_phase[a] = arr
    combined = data.get("combined")  # absent from files of earlier versions of mmpi
    if combined is not None and (combined.shape != (n, 3) or combined.dtype.kind not in "iu"):
        raise MonitorError(f"{path}: combined has shape {combined.shape}, expected ({n}, 3)")
    return JobMatrices(layout, phases, per_phase,
                       None if combined is None else combined.astype(np.int64))


def load_job(path: str | os.PathLike) -> JobMatrices:
    """The matrices of a monitor directory (its rank files, else its matrix.npz) or .npz file."""
    p = Path(path)
    if p.is_dir():
        if any(_RANK_FILE.fullmatch(f.name) for f in p.iterdir()):
            return merge_rank_files(p)
        if (p / MATRIX_FILE).exists():
            return load_matrices(p / MATRIX_FILE)
        raise MonitorError(f"{p}: no rank-*.json files and no {MATRIX_FILE}: not a monitor "
                           "directory (mmpi-run --monitor DIR, or MMPI_MONITOR=DIR)")
    if p.exists():
        return load_matrices(p)
    raise MonitorError(f"{p}: no such file or directory")


def size_bin(nbytes: int) -> int:
    """Histogram bin of a message of `nbytes` bytes."""
    return 0 if nbytes <= 1 else min((nbytes - 1).bit_length(), BINS - 1)


# -- checking a rank file -----------------------------------------------------------------------
def _rank_files(d: Path) -> dict[int, Path]:
    if not d.is_dir():
        raise MonitorError(f"{d}: not a directory")
    files: dict[int, Path] = {}
    for f in sorted(d.iterdir()):
        m = _RANK_FILE.fullmatch(f.name)
        if not m:
            continue
        if not m.group(1).isdigit():
            raise MonitorError(f"{f}: not a rank file name (expected rank-<vrank>.json)")
        r = int(m.group(1))
        if r in files:
            raise MonitorError(f"{files[r]} and {f} both hold rank {r}")
        files[r] = f
    if not files:
        raise MonitorError(f"{d}: no rank-*.json files (did the job run with monitoring on?)")
    return files


def _read_json(path: Path) -> dict:
    try:
        doc = json.loads(path.read_text())
    except OSError as exc:
        raise MonitorError(f"{path}: cannot read it: {exc.strerror or exc}") from exc
    except json.JSONDecodeError as exc:
        raise MonitorError(f"{path}: not valid JSON: {exc.msg} (line {exc.lineno}, column "
                           f"{exc.colno}); was the rank stopped while writing it?") from exc
    if not isinstance(doc, dict):
        raise MonitorError(f"{path}: expected a JSON object, got {type(doc).__name__}")
    return doc


def _check_keys(doc: dict, expected: Iterable[str], where: str,
                optional: tuple[str, ...] = ()) -> None:
    expected = tuple(expected)
    for k in expected:
        if k not in doc:
            raise MonitorError(f"{where}: missing field {k!r}")
    for k in doc:
        if k not in expected and k not in optional:
            raise MonitorError(f"{where}: unknown field {k!r} (expected {', '.join(expected)})")


def _check_header(doc: dict, path: Path, rank: int) -> None:
    if not _is_int(doc["version"]) or doc["version"] != VERSION:
        raise MonitorError(f"{path}: version {doc['version']!r} is not supported (this mmpi "
                           f"reads version {VERSION})")
    size = doc["size"]
    if not _is_int(size) or size < 1:
        raise MonitorError(f"{path}: size: expected a whole number >= 1, got {size!r}")
    if doc["rank"] != rank or not _is_int(doc["rank"]):
        raise MonitorError(f"{path}: rank {doc['rank']!r} does not match the file name")
    if rank >= size:
        raise MonitorError(f"{path}: rank {rank} is out of range for size {size}")
    _check_layout(doc["layout"], f"{path}: layout", size)
    if doc["cluster"] != doc["layout"][rank]:
        raise MonitorError(f"{path}: cluster {doc['cluster']!r} differs from layout[{rank}] "
                           f"= {doc['layout'][rank]!r}")
    if not isinstance(doc["phases"], list):
        raise MonitorError(f"{path}: phases: expected a list, got "
                           f"{type(doc['phases']).__name__}")


def _check_layout(layout: object, where: str, size: int) -> None:
    if not isinstance(layout, list) or len(layout) != size:
        raise MonitorError(f"{where}: expected a list of {size} cluster names, got "
                           f"{_short(layout)}")
    for v, c in enumerate(layout):
        if c not in CLUSTERS:
            raise MonitorError(f"{where}[{v}]: unknown cluster {c!r} (expected low or high)")


def _phase_rows(phases: list, path: Path, size: int) -> dict[str, dict[str, np.ndarray]]:
    rows: dict[str, dict[str, np.ndarray]] = {}
    for i, ph in enumerate(phases):
        where = f"{path}: phases[{i}]"
        if not isinstance(ph, dict):
            raise MonitorError(f"{where}: expected an object, got {type(ph).__name__}")
        _check_keys(ph, _PHASE_KEYS, where)
        name = ph["name"]
        if not isinstance(name, str) or not name:
            raise MonitorError(f"{where}.name: expected a non-empty string, got {name!r}")
        arrays = {a: _counts(ph[a], f"{where}.{a}", (size,) if a in COUNTS else (size, BINS))
                  for a in ARRAYS}
        for kind in ("p2p", "coll"):
            _check_histogram(arrays, kind, where)
        if name in rows:
            for a in ARRAYS:
                rows[name][a] = rows[name][a] + arrays[a]
        else:
            rows[name] = arrays
    return rows


def _counts(value: object, where: str, shape: tuple[int, ...]) -> np.ndarray:
    try:
        arr = np.array(value)
    except (ValueError, OverflowError) as exc:
        raise MonitorError(f"{where}: expected {_shape_words(shape)}: {exc}") from exc
    if arr.shape != shape:
        got = arr.shape if arr.dtype != object else "ragged lists"
        raise MonitorError(f"{where}: expected {_shape_words(shape)}, got shape {got}")
    if arr.size and arr.dtype.kind not in "iu":
        raise MonitorError(f"{where}: expected whole numbers, got {arr.dtype} values")
    if arr.size and arr.min() < 0:
        j = np.unravel_index(int(arr.argmin()), shape)
        raise MonitorError(f"{where}{''.join(f'[{x}]' for x in j)}: negative count "
                           f"{int(arr.min())}")
    return arr.astype(np.int64)


def _check_histogram(arrays: dict[str, np.ndarray], kind: str, where: str) -> None:
    msgs, nbytes, hist = arrays[f"{kind}_msgs"], arrays[f"{kind}_bytes"], arrays[f"hist_{kind}"]
    bad = np.nonzero(hist.sum(axis=1) != msgs)[0]
    if bad.size:
        j = int(bad[0])
        raise MonitorError(f"{where}.hist_{kind}[{j}]: adds up to {int(hist[j].sum())} "
                           f"messages, but {kind}_msgs[{j}] is {int(msgs[j])}")
    low = hist @ _BIN_LOW
    high = np.where(hist[:, -1] > 0, np.inf, hist[:, :-1] @ _BIN_HIGH)
    # Float sums: allow for rounding of the (exact, integer) bounds near 2**53.
    bad = np.nonzero((nbytes < low * (1 - 1e-12)) | (nbytes > high * (1 + 1e-12)))[0]
    if bad.size:
        j = int(bad[0])
        raise MonitorError(f"{where}.{kind}_bytes[{j}]: {int(nbytes[j])} bytes cannot be the "
                           f"size of the messages in hist_{kind}[{j}] ({low[j]:.0f} to "
                           f"{high[j]:.0f} bytes)")


def _is_int(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _shape_words(shape: tuple[int, ...]) -> str:
    if len(shape) == 1:
        return f"a list of {shape[0]} counts"
    return f"{shape[0]} lists of {shape[1]} counts"


def _short(value: object) -> str:
    s = json.dumps(value) if not isinstance(value, str) else repr(value)
    return s if len(s) <= 60 else s[:57] + "..."
