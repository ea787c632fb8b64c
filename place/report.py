"""Human-readable summaries of a job's traffic: totals, the forwarded share, heaviest pairs."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .matrices import JobMatrices
from .rankmap import format_ranks

KIND_NAMES = {"p2p": "p2p", "coll": "collectives", "total": "total"}
TOP_PAIRS = 5


def kind_matrix(job: JobMatrices, kind: str, what: str = "bytes",
                phase: str | None = None) -> np.ndarray:
    """(N, N) ``msgs`` or ``bytes`` of `kind` (``p2p``, ``coll`` or ``total``) sent i -> j."""
    if kind == "total":
        return (job.matrix(f"p2p_{what}", phase) + job.matrix(f"coll_{what}", phase))
    return job.matrix(f"{kind}_{what}", phase)


def forwarded_bytes(matrix: np.ndarray, owners: Sequence[str]) -> int:
    """Bytes of `matrix` (sent i -> j) that cross the zipper when rank v runs in owners[v]."""
    o = np.array(owners)
    return int(matrix[o[:, None] != o[None, :]].sum())


def heaviest_pairs(matrix: np.ndarray, count: int = TOP_PAIRS) -> list[tuple[int, int, int]]:
    """The `count` pairs (i < j, bytes both ways) that exchange most, heaviest first."""
    both = np.triu(matrix + matrix.T, 1)
    flat = np.argsort(-both, axis=None, kind="stable")[:count]  # ties: lower ranks first
    pairs = []
    for f in flat:
        i, j = np.unravel_index(int(f), both.shape)
        if both[i, j] > 0:
            pairs.append((int(i), int(j), int(both[i, j])))
    return pairs


def layout_line(owners: Sequence[str]) -> str:
    """``low 0-3, high 4-7``."""
    return ", ".join(f"{c} {format_ranks([v for v, o in enumerate(owners) if o == c]) or '-'}"
                     for c in ("low", "high"))


def summarize(job: JobMatrices, phase: str | None = None) -> str:
    """Totals, forwarded bytes and share per kind, per phase, and the heaviest pairs."""
    lines = [f"{job.size} ranks: {layout_line(job.layout)}; "
             f"phase{'s' * (len(job.phases) != 1)}: {', '.join(job.phases) or 'none'}"
             + (f" (showing {phase})" if phase else "")]
    lines.append(f"{'kind':<12} {'messages':>12} {'bytes':>11} {'forwarded':>11} {'share':>7}")
    for kind in ("p2p", "coll", "total"):
        msgs = int(kind_matrix(job, kind, "msgs", phase).sum())
        b = kind_matrix(job, kind, "bytes", phase)
        total, fwd = int(b.sum()), forwarded_bytes(b, job.layout)
        lines.append(f"{KIND_NAMES[kind]:<12} {msgs:>12,} {human_bytes(total):>11} "
                     f"{human_bytes(fwd):>11} {share(fwd, total):>7}")
    if phase is None and len(job.phases) > 1:
        lines.append(f"{'phase':<12} {'messages':>12} {'bytes':>11} {'forwarded':>11} "
                     f"{'share':>7}")
        for name in job.phases:
            msgs = int(kind_matrix(job, "total", "msgs", name).sum())
            b = kind_matrix(job, "total", "bytes", name)
            total, fwd = int(b.sum()), forwarded_bytes(b, job.layout)
            lines.append(f"{name:<12} {msgs:>12,} {human_bytes(total):>11} "
                         f"{human_bytes(fwd):>11} {share(fwd, total):>7}")
    fan = job.combined_totals()
    if fan["sends"]:
        lines.append(f"dynamic broadcasts: {fan['sends']:,} of the sends above went as "
                     f"{fan['crossings']:,} crossing(s) of their bytes; "
                     f"{human_bytes(fan['bytes_not_crossed'])} did not cross the zipper")
    columns = {k: heaviest_pairs(kind_matrix(job, k, "bytes", phase)) for k in KIND_NAMES}
    rows = max(len(c) for c in columns.values())
    if rows:
        lines.append("heaviest pairs (bytes both ways; * crossed the zipper):")
        lines.append("    " + "".join(f"{KIND_NAMES[k]:<24}" for k in columns).rstrip())
        for r in range(rows):
            cells = []
            for pairs in columns.values():
                if r < len(pairs):
                    i, j, b = pairs[r]
                    star = "*" if job.layout[i] != job.layout[j] else " "
                    cells.append(f"{f'{i}-{j}{star}':<9}{human_bytes(b):>11}    ")
                else:
                    cells.append(" " * 24)
            lines.append("    " + "".join(cells).rstrip())
    return "\n".join(lines)


def human_bytes(n: float) -> str:
    """``512 B``, ``3.4 KiB``, ``12.0 MiB``."""
    if n < 1024:
        return f"{int(n)} B"
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        n /= 1024
        if n < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}"
    raise AssertionError("unreachable")


def share(part: int, total: int) -> str:
    """``48.1%``, or ``-`` of nothing."""
    return f"{100.0 * part / total:.1f}%" if total else "-"
