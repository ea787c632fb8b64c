"""Issue 5's targets, read from `mmpi-bench --json` files: each run's ratio, and over all runs.

`python benchmarks/targets.py FILE...` prints one line per file with the ratio of every target
that the file measured (a file of `mmpi-bench barrier allreduce --sizes 8` has two of them),
then per target the median, the range and how many runs met it. RESULTS.md's "runs meeting
it" column is this count over the batch files; the figures were once taken out by hand.

The targets and how a run's figure is formed (bridged and native from the same run):

* 8 B latency: bridged / native one-way latency, at most 3;
* 4 MiB bandwidth: bridged / across jobs (two one-rank jobs joined by Comm_connect), at least
  0.9;
* bidirectional / unidirectional: bridged bibw / bridged bw at 4 MiB, at least 1.5;
* barrier, 8 B allreduce: bridged / native time, at most 3;
* 1 MiB allreduce and bcast, 64 KiB alltoall: bridged / native time, at most 1.5;
* four pairs: four concurrent pairs' bridged aggregate / one pair's at 4 MiB, at least 0.8.
"""

from __future__ import annotations

import json
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

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


def _value(row: dict | None, mode: str) -> float | None:
    part = (row or {}).get(mode)
    return part.get("value") if part else None


def _div(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def ratios(doc: dict) -> dict[str, float]:
    """{target name: ratio} for every target `doc` (one `mmpi-bench --json` file) measured."""
    rows: dict[tuple, dict] = {}
    for r in doc["results"]:
        rows[(r["bench"], r["size"], r.get("pairs"))] = r

    def row(bench: str, size: int, pairs: int | None = None) -> dict | None:
        return rows.get((bench, size, pairs))

    def over(bench: str, size: int, num: str, den: str) -> float | None:
        return _div(_value(row(bench, size), num), _value(row(bench, size), den))

    found = {
        "latency 8 B": over("latency", 8, "bridged", "native"),
        "bw 4 MiB / across": over("bw", 4 * MiB, "bridged", "across"),
        "bibw / bw 4 MiB": _div(_value(row("bibw", 4 * MiB), "bridged"),
                                _value(row("bw", 4 * MiB), "bridged")),
        "barrier": over("barrier", 0, "bridged", "native"),
        "allreduce 8 B": over("allreduce", 8, "bridged", "native"),
        "allreduce 1 MiB": over("allreduce", MiB, "bridged", "native"),
        "bcast 1 MiB": over("bcast", MiB, "bridged", "native"),
        "alltoall 64 KiB": over("alltoall", 64 * KiB, "bridged", "native"),
        "4 pairs / 1 pair": _div(_value(row("pairs", 4 * MiB, 4), "bridged"),
                                 _value(row("pairs", 4 * MiB, 1), "bridged")),
    }
    return {k: v for k, v in found.items() if v is not None}


def summary(per_run: list[dict[str, float]]) -> list[tuple[Target, list[float]]]:
    """Each target that any run measured, with its ratios in run order."""
    out = []
    for t in TARGETS:
        xs = [r[t.name] for r in per_run if t.name in r]
        if xs:
            out.append((t, xs))
    return out


def main(argv: list[str]) -> int:
    """Print the ratios of the files named in `argv`, then the summary; the exit status."""
    if not argv:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    per_run = []
    for name in argv:
        try:
            doc = json.loads(Path(name).read_text())
            found = ratios(doc)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            print(f"targets.py: {name}: not an mmpi-bench --json file ({exc})", file=sys.stderr)
            return 1
        per_run.append(found)
        print(f"{name}: " + ", ".join(f"{k} {v:.2f}" for k, v in found.items()))
    print()
    print(f"{'target':<20} {'goal':>7} {'median':>7} {'range':>13} {'met':>9}")
    for t, xs in summary(per_run):
        goal = ("<= " if t.at_most else ">= ") + f"{t.goal:g}"
        met = sum(t.met(x) for x in xs)
        print(f"{t.name:<20} {goal:>7} {statistics.median(xs):7.2f} "
              f"{min(xs):6.2f}-{max(xs):<6.2f} {met:>3} of {len(xs):<3}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
