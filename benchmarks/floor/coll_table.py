"""Medians of `run.sh coll` rounds: each relay and rank pairing, and mmpi, against native.

    python benchmarks/floor/coll_table.py FILE...

FILE holds the output of `bash benchmarks/floor/run.sh coll|bcast|barrier [ROUNDS]` (with
PYTHON=1, the bare-mpi4py pairings too; `bcast` adds two of them with the calls separated as
mmpi's Barrier separates them, "polled"). For each collective of the rounds it prints, per way
of running it, the median and range of the ratio to the C native time of the same round
(mmpi: its own mmpi-bench ratio, bridged / native in that run), how many rounds meet issue 5's
target, and the median of the time against the C relay's time in the same round. The barrier
(`run.sh barrier`, Python only) is against mpi4py's native barrier instead.
"""

from __future__ import annotations

import re
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from targets import TARGETS as _ISSUE_TARGETS  # noqa: E402  (issue 5's goals, one place)

# (op, bytes) -> issue 5's target for it; and the order of mmpi-bench's rows in a round
# (run.sh drops its headers): `allreduce bcast --sizes 8,1M` prints bcast 8 B and 1 MiB, then
# allreduce 8 B and 1 MiB; `alltoall --sizes 64K` one row.
_BY_NAME = {t.name: t for t in _ISSUE_TARGETS}
TARGETS = {("barrier", 0): _BY_NAME["barrier"],
           ("allreduce", 8): _BY_NAME["allreduce 8 B"],
           ("allreduce", 1 << 20): _BY_NAME["allreduce 1 MiB"],
           ("bcast", 1 << 20): _BY_NAME["bcast 1 MiB"],
           ("alltoall", 64 << 10): _BY_NAME["alltoall 64 KiB"]}
MMPI_ROWS = [("bcast", 8), ("bcast", 1 << 20), ("allreduce", 8), ("allreduce", 1 << 20),
             ("alltoall", 64 << 10)]
WAYS = {"C": "C relay, C ranks", "python": "Python relay, Python ranks",
        "C/python": "C relay, Python ranks", "python/C": "Python relay, C ranks",
        "python polled": "Python relay and ranks, polled",
        "C/python polled": "C relay, Python ranks, polled",
        "mmpi": "mmpi (its own ratio)"}

# "polled": coll.py's calls separated as mmpi's Barrier separates them (SETTLE=polled)
_LINE = re.compile(r"(?:\((C|Python) relay\) )?(C|python) (native|relayed) (\w+) (\d+) B "
                   r"([^:]*): ([\d.]+) us$")
_ROW = re.compile(r"(\d+|-)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)$")


@dataclass
class Round:
    """The figures of one round."""

    native: dict = field(default_factory=dict)  # (lang, op, bytes) -> us
    relayed: dict = field(default_factory=dict)  # (way, op, bytes) -> us
    mmpi: dict = field(default_factory=dict)  # (op, bytes) -> (bridged us, ratio)


def parse(lines) -> list[Round]:
    """The rounds in `lines` (run.sh's output)."""
    rounds: list[Round] = []
    rows: list[tuple] = []
    for line in lines:
        line = line.strip()
        if line.startswith("== round"):
            rounds.append(Round())
            rows = []
            continue
        if not rounds:
            continue
        r = rounds[-1]
        if m := _LINE.match(line):
            relay, lang, kind, op, n, how, us = m.groups()
            key = (op, int(n))
            if kind == "native":
                r.native[(lang.lower(), *key)] = float(us)
            else:
                way = "C" if lang == "C" else "python"
                if relay:  # a relay in the other language
                    way = f"{'C' if relay == 'C' else 'python'}/{way}"
                if "polled settle" in how:
                    way += " polled"
                r.relayed[(way, *key)] = float(us)
        elif not (m := _ROW.match(line)):
            continue
        elif m.group(1) == "-":  # `mmpi-bench barrier` (run.sh barrier) has no size
            r.mmpi[("barrier", 0)] = (float(m.group(3)), float(m.group(4)))
        elif len(rows) < len(MMPI_ROWS):
            size, _native, bridged, ratio = m.groups()
            key = MMPI_ROWS[len(rows)]
            if int(size) != key[1]:
                raise ValueError(f"round {len(rounds)}: mmpi-bench row of {size} B where "
                                 f"{key[0]} {key[1]} B was expected: {line!r}")
            rows.append(key)
            r.mmpi[key] = (float(bridged), float(ratio))
    return rounds


def table(rounds: list[Round]) -> list[str]:
    """Lines of the summary, one block per target collective."""
    out = []
    for (op, n), target in TARGETS.items():
        # coll.c has no barrier: that one is against mpi4py's, as mmpi-bench's native calls it
        lang = "c" if any(("c", op, n) in r.native for r in rounds) else "python"
        block = [f"{op} {n} B (target <= {target.goal:g}), ratio to "
                 f"{'C' if lang == 'c' else 'mpi4py'} native:"]
        for way, label in WAYS.items():
            ratios, vs_c = [], []
            for r in rounds:
                base, c = r.native.get((lang, op, n)), r.relayed.get(("C", op, n))
                if way == "mmpi":
                    if (op, n) not in r.mmpi:
                        continue
                    us, ratio = r.mmpi[(op, n)]
                elif (way, op, n) in r.relayed and base:
                    us = r.relayed[(way, op, n)]
                    ratio = us / base
                else:
                    continue
                ratios.append(ratio)
                if c:
                    vs_c.append(us / c)
            if not ratios:
                continue
            met = sum(target.met(x) for x in ratios)
            line = (f"  {label:32} {statistics.median(ratios):5.2f} "
                    f"[{min(ratios):.2f}-{max(ratios):.2f}]  met {met:2} of {len(ratios):2}")
            if vs_c and way != "C":
                line += f"  time / C relay's {statistics.median(vs_c):.2f}"
            block.append(line)
        if len(block) > 1:  # a collective the rounds did not run has no block
            out += block
    return out


def main(argv: list[str]) -> int:
    """Print the summary of the rounds in the files `argv`."""
    if not argv:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    rounds = []
    for path in argv:
        with open(path) as f:
            rounds += parse(f)
    print(f"{len(rounds)} rounds")
    print("\n".join(table(rounds)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
