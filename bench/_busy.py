"""How busy the machine is besides our jobs: the runnable processes that are not ours.

The load average lags by a minute and counts the benchmark's own jobs (a bridged 2+2 job runs
five processes on a two-core machine by design), so it cannot say whether someone else is
competing for the cores. Between our jobs, /proc/loadavg's count of runnable threads can:
sampled a few times, less the reader itself, it is what others run now. When it reaches the
CPUs this process may use, every figure is measured against a stranger's work.
"""

from __future__ import annotations

import os
import statistics
import time

LOADAVG = "/proc/loadavg"


def cpus() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def others_running(samples: int = 5, interval: float = 0.02, path: str = LOADAVG
                   ) -> float | None:
    """Runnable threads of other processes now (median of `samples`), None where unknown."""
    counts = []
    for i in range(samples):
        try:
            with open(path) as f:
                running = f.read().split()[3].split("/")[0]
            counts.append(max(0, int(running) - 1))  # less this reader
        except (OSError, IndexError, ValueError):
            return None
        if i + 1 < samples:
            time.sleep(interval)
    return statistics.median(counts)


def warning(others: float | None, ncpus: int) -> str | None:
    """A sentence saying the figures are not trustworthy, if `others` fill the CPUs."""
    if others is None or others < ncpus:
        return None
    return (f"{others:g} other runnable processes on {ncpus} CPU{'s' if ncpus > 1 else ''}: "
            "they compete with the benchmark's jobs for every core, so these figures are "
            "not trustworthy (measure on an idle machine)")


__all__ = ["cpus", "others_running", "warning"]
