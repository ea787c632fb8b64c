"""Waiting without burning a core: spin briefly, then yield, then sleep with growing naps.

Every thread blocked inside an MPI call spins a full core on this MPICH, and a bridged job runs
more processes than a small machine has cores, so nothing in mmpi blocks inside MPI: waits poll
with non-blocking calls and back off with this policy. Tunable by environment for benchmarks:
MMPI_SPIN_US (busy polling after the last progress), MMPI_YIELD_US (then sched_yield), and
MMPI_MAX_SLEEP_US (cap of the exponentially growing naps after that).
"""

from __future__ import annotations

import os
import time

_now = time.perf_counter
_yield = getattr(os, "sched_yield", lambda: time.sleep(0))


def _env_us(name: str, default: float) -> float:
    return float(os.environ.get(name, default)) * 1e-6


SPIN = _env_us("MMPI_SPIN_US", 100)
YIELD = _env_us("MMPI_YIELD_US", 2000)
MAX_SLEEP = _env_us("MMPI_MAX_SLEEP_US", 1000)
MIN_SLEEP = 20e-6


class Backoff:
    """Adaptive back-off for one polling loop; call `idle()` after an empty poll."""

    __slots__ = ("_since", "_nap", "spin", "yield_", "max_sleep")

    def __init__(self, spin: float = SPIN, yield_: float = YIELD, max_sleep: float = MAX_SLEEP):
        self.spin = spin
        self.yield_ = yield_
        self.max_sleep = max_sleep
        self._since = 0.0
        self._nap = MIN_SLEEP

    def reset(self) -> None:
        """Something happened: poll eagerly again."""
        self._since = 0.0
        self._nap = MIN_SLEEP

    def idle(self) -> None:
        """Nothing happened in the last poll: wait a little, longer the longer it stays quiet."""
        now = _now()
        if self._since == 0.0:
            self._since = now
            return
        quiet = now - self._since
        if quiet < self.spin:
            return
        if quiet < self.spin + self.yield_:
            _yield()
            return
        time.sleep(self._nap)
        self._nap = min(self._nap * 2, self.max_sleep)
