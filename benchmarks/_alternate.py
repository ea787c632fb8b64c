"""The timing loop of the in-job comparisons (`allreduce_parts.py`, `barrier_lean.py`, ...).

Ways of doing the same thing are timed in one job, round by round, in an order that reverses
every other round: a comparison across separate jobs drowns in this machine's drift (see
RESULTS.md, "Noise").
"""

import time


def alternate(ways: dict, rounds: int, calls: int, warm: int, sync,
              between=None) -> dict[str, list[float]]:
    """Time `calls` calls of each way per round, after `sync()` and `warm` untimed calls.

    Returns, per way's name, its time per call in microseconds, one figure per round, as this
    rank's clock saw it. With `between`, each call is timed alone and `between()` runs untimed
    after it, as `mmpi-bench` times a collective (an untimed Barrier between calls).
    """
    times = {name: [] for name in ways}
    names = list(ways)
    now = time.perf_counter
    for i in range(rounds):
        for name in names if i % 2 == 0 else names[::-1]:
            f = ways[name]
            sync()
            for _ in range(warm):
                f()
            if between is None:
                t0 = now()
                for _ in range(calls):
                    f()
                spent = now() - t0
            else:
                spent = 0.0
                for _ in range(calls):
                    t0 = now()
                    f()
                    spent += now() - t0
                    between()
            times[name].append(spent / calls * 1e6)
    return times
