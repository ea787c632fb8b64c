"""Medians per point and variant of the alternating runs that `ab.sh` collected.

`python benchmarks/ab_table.py OUT BENCH,BENCH,...` names the table rows of one run in order
(one name per row that `mmpi-bench -q` prints for the benchmarks given to `ab.sh`, pairs
excepted: its rows name themselves). It prints, for each point, each variant's median of the
bridged figure and every run's figure; for pairs also the ratio to one pair.
"""

from __future__ import annotations

import re
import statistics
import sys
from collections import defaultdict


def parse(lines, names: list[str]) -> dict:
    """{(row, label, size): {variant: [bridged figure per round]}} from ab.sh's OUT."""
    data: dict = defaultdict(lambda: defaultdict(list))
    variant, row = None, 0
    for line in lines:
        if line.startswith("=="):
            variant, row = re.search(r"\[(.*)\]", line).group(1), 0
            continue
        f = line.split()
        if not f or f[0] == "DONE" or variant is None:
            continue
        if row < len(names):  # size native [across] bridged ratio [ratio]
            key = (row, names[row], f[0])
            data[key][variant].append(float(f[3] if len(f) == 6 else f[2]))
        else:  # pairs: pairs size native bridged ratio native/1 bridged/1
            data[(row, f"pairs {f[0]}", f[1])][variant].append(float(f[3]))
            data[(row + 1000, f"pairs {f[0]} / 1 pair", f[1])][variant].append(float(f[-1]))
        row += 1
    return data


def main(argv: list[str]) -> None:
    """Print the table of OUT (argv[1]) for the row names in argv[2]."""
    with open(argv[1]) as f:
        data = parse(f, argv[2].split(","))
    variants = list(dict.fromkeys(v for point in data.values() for v in point))
    print("point".ljust(24) + "  ".join(v.ljust(44) for v in variants))
    for key in sorted(data):
        runs = data[key]
        cells = [f"{statistics.median(runs[v]):8.4g}  " + "/".join(f"{x:.4g}" for x in runs[v])
                 if runs[v] else "-" for v in variants]
        print(f"{key[1]} {key[2]}".ljust(24) + "  ".join(c.ljust(44) for c in cells))


if __name__ == "__main__":
    main(sys.argv)
