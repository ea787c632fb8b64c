"""The timing loop of the in-job comparisons (`allreduce_parts.py`, `barrier_lean.py`, ...).

Ways of doing the same thing are timed in one job, round by round, in an order that reverses
every other round: a comparison across separate jobs drowns in this machine's drift (see
RESULTS.md, "Noise").
"""

import time


def alternate(ways: dict, rounds: int, calls: int, warm: int, sync) -> dict[str, list[float]]:
    """Time `calls` calls of each way per round, after `sync()` and `warm` untimed calls.

    Returns, per way's name, its time per call in microseconds, one figure per round, as this
    rank's clock saw it.
    """
    times = {name: [] for name in ways}
    names = list(ways)
    for i in range(rounds):
        for name in names if i % 2 == 0 else names[::-1]:
            f = ways[name]
            sync()
            for _ in range(warm):
                f()
            t0 = time.perf_counter()
            for _ in range(calls):
                f()
            times[name].append((time.perf_counter() - t0) / calls * 1e6)
    return times
