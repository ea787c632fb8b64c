"""The performance targets, read from `mmpi-bench --json` files (``mmpi-bench --targets``).

Each target is a ratio formed from one run's own figures (docs/performance.md):

* 8 B latency: bridged / native one-way latency, at most 3;
* 4 MiB bandwidth: bridged / across jobs (two one-rank jobs joined by Comm_connect), at least
  0.9;
* bidirectional / unidirectional: bridged bibw / bridged bw at 4 MiB, at least 1.5;
* Barrier, 8 B Allreduce: bridged / native time, at most 3;
* 1 MiB Allreduce and Bcast, 64 KiB Alltoall: bridged / native time, at most 1.5;
* four pairs: four concurrent pairs' bridged aggregate / one pair's at 4 MiB, at least 0.8.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

KiB, MiB = 1 << 10, 1 << 20


@dataclass(frozen=True)
class Target:
    """One target: a ratio that must stay at most, or reach at least, `goal`."""

    name: str
    goal: float
    at_most: bool  # True: the ratio must be at most `goal`; False: at least

    def met(self, ratio: float) -> bool:
        """Whether `ratio` meets the goal (the line itself counts as met)."""
        return ratio <= self.goal if self.at_most else ratio >= self.goal


TARGETS = (
    Target("latency 8 B", 3.0, True),
    Target("bw 4 MiB / across", 0.9, False),
    Target("bibw / bw 4 MiB", 1.5, False),
    Target("barrier", 3.0, True),
    Target("allreduce 8 B", 3.0, True),
    Target("allreduce 1 MiB", 1.5, True),
    Target("bcast 1 MiB", 1.5, True),
    Target("alltoall 64 KiB", 1.5, True),
    Target("4 pairs / 1 pair", 0.8, False),
)


def _div(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def ratios(doc: dict) -> dict[str, float]:
    """{target name: ratio} for every target that `doc` (one --json file) measured."""
    rows = {(r["bench"], r["size"], r.get("pairs")): r for r in doc["results"]}

    def value(bench: str, size: int, mode: str, pairs: int | None = None) -> float | None:
        part = (rows.get((bench, size, pairs)) or {}).get(mode)
        return part.get("value") if part else None

    def over(bench: str, size: int, num: str, den: str) -> float | None:
        return _div(value(bench, size, num), value(bench, size, den))

    found = {
        "latency 8 B": over("latency", 8, "bridged", "native"),
        "bw 4 MiB / across": over("bw", 4 * MiB, "bridged", "across"),
        "bibw / bw 4 MiB": _div(value("bibw", 4 * MiB, "bridged"), value("bw", 4 * MiB, "bridged")),
        "barrier": over("barrier", 0, "bridged", "native"),
        "allreduce 8 B": over("allreduce", 8, "bridged", "native"),
        "allreduce 1 MiB": over("allreduce", MiB, "bridged", "native"),
        "bcast 1 MiB": over("bcast", MiB, "bridged", "native"),
        "alltoall 64 KiB": over("alltoall", 64 * KiB, "bridged", "native"),
        "4 pairs / 1 pair": _div(value("pairs", 4 * MiB, "bridged", 4),
                                 value("pairs", 4 * MiB, "bridged", 1)),
    }
    return {k: v for k, v in found.items() if v is not None}


def format_report(runs: Sequence[tuple[str, dict[str, float]]]) -> str:
    """One line per run (name, its ratios), then per target: median, range, runs meeting it."""
    lines = [f"{name}: " + ", ".join(f"{k} {v:.2f}" for k, v in found.items())
             for name, found in runs]
    lines += ["", f"{'target':<20} {'goal':>7} {'median':>7} {'range':>13} {'met':>9}"]
    for t in TARGETS:
        xs = [found[t.name] for _, found in runs if t.name in found]
        if not xs:
            continue
        goal = ("<= " if t.at_most else ">= ") + f"{t.goal:g}"
        met = sum(t.met(x) for x in xs)
        lines.append(f"{t.name:<20} {goal:>7} {statistics.median(xs):7.2f} "
                     f"{min(xs):6.2f}-{max(xs):<6.2f} {met:>3} of {len(xs):<3}")
    return "\n".join(lines) + "\n"


__all__ = ["TARGETS", "Target", "format_report", "ratios"]
