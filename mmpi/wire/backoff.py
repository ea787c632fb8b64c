"""Waiting without burning a core: poll and yield the CPU, then sleep with growing naps.

Every thread blocked inside an MPI call spins a full core on this MPICH, and a bridged job runs
more processes than a small machine has cores, so no process of a job blocks inside MPI: waits
poll with non-blocking calls and back off with this policy. Pure spinning starves the forwarder
and sleeping at once costs a timer tick, so the default is: sched_yield for a few milliseconds
of quiet, then naps (docs/performance.md, "Waiting policy"). Tunable: MMPI_SPIN_US (busy
polling after the last progress), MMPI_YIELD_US (then sched_yield), MMPI_MAX_SLEEP_US (cap of
the exponentially growing naps after that). They are read when first needed, not at import:
mmpi-run imports this module too, and checks the knobs itself, to say so in its own words.
"""

from __future__ import annotations

import os
import time

from .knobs import env_float

_now = time.perf_counter
yield_cpu = getattr(os, "sched_yield", lambda: time.sleep(0))


_KNOBS = {"SPIN": "MMPI_SPIN_US", "YIELD": "MMPI_YIELD_US", "MAX_SLEEP": "MMPI_MAX_SLEEP_US"}
_policy: dict[str, float] = {}


def policy() -> dict[str, float]:
    """SPIN, YIELD and MAX_SLEEP in seconds, from their knobs (read once, on first use)."""
    if not _policy:
        _policy.update({k: env_float(name) * 1e-6 for k, name in _KNOBS.items()})
    return _policy


def __getattr__(name: str) -> float:
    # `from mmpi.wire.backoff import YIELD` still works, and reads the knobs only then.
    if name in _KNOBS:
        return policy()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _tight_timer_slack() -> None:
    # Linux pads every sleep by the thread's timer slack (50 us by default); our naps are short,
    # so ask for 1 us. Best effort: elsewhere the naps are just a little longer.
    try:
        import ctypes

        ctypes.CDLL(None).prctl(29, 1000, 0, 0, 0)  # PR_SET_TIMERSLACK
    except (OSError, AttributeError):
        pass


_tight_timer_slack()
MIN_SLEEP = 20e-6


class Backoff:
    """Adaptive back-off for one polling loop; call `idle()` after an empty poll."""

    __slots__ = ("_since", "_nap", "spin", "yield_", "max_sleep")

    def __init__(self, spin: float | None = None, yield_: float | None = None,
                 max_sleep: float | None = None):
        knobs = _policy or policy()
        self.spin = knobs["SPIN"] if spin is None else spin
        self.yield_ = knobs["YIELD"] if yield_ is None else yield_
        self.max_sleep = knobs["MAX_SLEEP"] if max_sleep is None else max_sleep
        self._since = 0.0
        self._nap = MIN_SLEEP

    def reset(self) -> None:
        """Something happened: poll eagerly again."""
        self._since = 0.0
        self._nap = MIN_SLEEP

    def napping(self) -> bool:
        """Whether the wait has been quiet so long that `idle()` naps instead of yielding."""
        return self._since != 0.0 and _now() - self._since >= self.spin + self.yield_

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
            yield_cpu()
            return
        time.sleep(self._nap)
        self._nap = min(self._nap * 2, self.max_sleep)
