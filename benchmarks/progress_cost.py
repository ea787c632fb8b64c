"""What a progress thread costs small blocking calls: 8 B ping-pong and Barrier, off against on.

usage: python benchmarks/progress_cost.py [ROUNDS] [LOW] [HIGH]     (default 12 1 1)

Runs `mmpi-run --low LOW --high HIGH --progress MODE` with MODE off, all, leaders and off again
in turn (each round starting with the next), ROUNDS times; each run times an 8 B ping-pong
between local rank 0 of each cluster and a Barrier (medians of five repetitions). Prints, per
mode, the median of the run-by-run ratios to the first `off` run of the same round (issue 38's
target: at most 1.10). The second `off` run is the control: its ratio is what the spread
between jobs alone gives, the resolution of the others.
Under mmpi-run, with `--rank`, it is the ranks' program.
"""

from __future__ import annotations

import re
import statistics
import subprocess
import sys
import time

MODES = ("off", "all", "leaders", "off again")
LINE = re.compile(r"lat ([\d.]+) us barrier ([\d.]+) us")


def rank() -> None:
    """The ranks' part: time the ping-pong and the Barrier; local rank 0 of low prints."""
    import numpy as np
    from mpi4py import MPI

    w = MPI.COMM_WORLD
    me, half = w.Get_rank(), w.Get_size() // 2
    buf = np.zeros(8, np.uint8)

    def timed(n: int, step) -> float:
        w.Barrier()
        t = time.perf_counter()
        for _ in range(n):
            step()
        return (time.perf_counter() - t) / n * 1e6

    def ping() -> None:
        if me == 0:
            w.Send(buf, half, 1)
            w.Recv(buf, half, 1)
        elif me == half:
            w.Recv(buf, 0, 1)
            w.Send(buf, 0, 1)

    lat = statistics.median(timed(2000, ping) / 2 for _ in range(5))
    bar = statistics.median(timed(1000, w.Barrier) for _ in range(5))
    if me == 0:
        print(f"lat {lat:.2f} us barrier {bar:.2f} us", flush=True)


def main() -> None:
    """Alternate the modes' runs and print the medians and ratios."""
    given = [int(a) for a in sys.argv[1:4]]
    rounds, low, high = given + [12, 1, 1][len(given):]
    got: dict[str, list[tuple[float, float]]] = {m: [] for m in MODES}
    for r in range(rounds):
        # the order turns round by round, so that no mode always runs first (or last)
        for mode in MODES[r % len(MODES):] + MODES[:r % len(MODES)]:
            out = subprocess.run(["mmpi-run", "--low", str(low), "--high", str(high),
                                  "--progress", mode.split()[0], sys.executable, __file__, "--rank"],
                                 capture_output=True, text=True, timeout=300).stdout
            m = LINE.search(out)
            if m is None:
                sys.exit(f"round {r}, --progress {mode}: no figures in\n{out[-2000:]}")
            got[mode].append((float(m[1]), float(m[2])))
    print(f"# {rounds} rounds, {low}+{high}: medians (us), and of the ratios to off, run by run")
    for mode in MODES:
        for i, what in enumerate(("8 B latency", "Barrier")):
            ratios = [x[i] / o[i] for x, o in zip(got[mode], got["off"], strict=True)]
            print(f"{mode:<9} {what:<12} {statistics.median(x[i] for x in got[mode]):8.2f}"
                  f"  ratio {statistics.median(ratios):.3f}")


if __name__ == "__main__":
    rank() if "--rank" in sys.argv else main()
