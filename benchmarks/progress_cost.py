"""What a progress thread costs small blocking calls: 8 B ping-pong and Barrier, off against on.

usage: python benchmarks/progress_cost.py [ROUNDS] [LOW] [HIGH]     (default 12 1 1)

Runs `mmpi-run --low LOW --high HIGH --progress MODE` with MODE off, all, leaders and off again
in turn (each round starting with the next), ROUNDS times; each run times an 8 B ping-pong
between local rank 0 of each cluster and a Barrier (medians of five repetitions). Prints, per
mode, the median of the run-by-run ratios to the first `off` run of the same round (issue 38's
target: at most 1.10). The second `off` run is the control: its ratio is what the spread
between jobs alone gives, the resolution of the others.

usage: python benchmarks/progress_cost.py --wrapper

What a call pays for the wrapper it runs in while a thread is on, timed inside one 1+1 job
with `--progress all`: a public method called through it against the same method bare.
Under mmpi-run, with `--rank` (or `--wrapper-rank`), it is the ranks' program.
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


def wrapper_rank() -> None:
    """The ranks' part of --wrapper: ns per `Get_rank` call, wrapped and bare, five times."""
    from mpi4py import MPI

    w = MPI.COMM_WORLD
    bare = getattr(type(w).Get_rank, "__wrapped__", None)
    if bare is None:
        sys.exit("progress_cost: Get_rank is not wrapped: is the progress thread on?")

    def per_call(fn, n: int = 300_000) -> float:
        t = time.perf_counter()
        for _ in range(n):
            fn()
        return (time.perf_counter() - t) / n * 1e9

    got = [(per_call(w.Get_rank), per_call(lambda: bare(w))) for _ in range(5)]
    if w.Get_rank() == 0:
        wrapped, plain = (statistics.median(x[i] for x in got) for i in (0, 1))
        print(f"Get_rank through the wrapper {wrapped:.0f} ns, bare {plain:.0f} ns "
              f"(medians of five runs of 300,000 calls)", flush=True)


def wrapper() -> None:
    """Run wrapper_rank in a 1+1 job with a thread on every rank."""
    out = subprocess.run(["mmpi-run", "--low", "1", "--high", "1", "--progress", "all",
                          sys.executable, __file__, "--wrapper-rank"],
                         capture_output=True, text=True, timeout=300)
    line = [x for x in out.stdout.splitlines() if "through the wrapper" in x]
    if out.returncode or not line:
        sys.exit(f"progress_cost --wrapper failed:\n{out.stdout[-2000:]}{out.stderr[-2000:]}")
    print(line[0].split("] ", 1)[-1])


def main() -> None:
    """Alternate the modes' runs and print the medians and ratios."""
    given = [int(a) for a in sys.argv[1:4]]
    rounds, low, high = given + [12, 1, 1][len(given):]
    got: dict[str, list[tuple[float, float]]] = {m: [] for m in MODES}
    for r in range(rounds):
        # the order turns round by round, so that no mode always runs first (or last)
        for mode in MODES[r % len(MODES):] + MODES[:r % len(MODES)]:
            out = subprocess.run(["mmpi-run", "--low", str(low), "--high", str(high),
                                  "--progress", mode.split()[0], sys.executable, __file__,
                                  "--rank"],
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
    if "--rank" in sys.argv:
        rank()
    elif "--wrapper-rank" in sys.argv:
        wrapper_rank()
    elif "--wrapper" in sys.argv:
        wrapper()
    else:
        main()
