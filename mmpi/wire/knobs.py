"""Tuning knobs read from the environment (`MMPI_*`): one registry, parsed in one place.

The knobs are for benchmarks and unusual machines. A typo in one must not surface as a bare
`ValueError` from deep inside an import, nor be clamped silently into some other value: the
error says which variable, what it held and what it may hold. Unset or empty means the default.

Rule: every knob is a `Knob` in `KNOBS`, with its kind and its bounds. The readers the ranks
and the forwarder use (`env_int`, `env_float`, `env_choice`) take the bounds from there, and
mmpi-run checks its whole environment with the same code (`problems`) before it starts
anything, so the launcher's check and the processes' readers can never disagree.
Bounds are ranges, not just types: no infinity or NaN, nothing negative, and no value that
cannot work (docs/reference.md, "Knobs", says why each bound is where it is).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass

from ..errors import UsageError
from .protocol import HEARTBEAT, LOST_AFTER

INT = "a whole number"
NUMBER = "a number"
CHOICE = "one of"
DIRECTORY = "a directory"

KiB, MiB, TiB = 1 << 10, 1 << 20, 1 << 40
SECOND_US = 1_000_000  # the longest wait or nap a microsecond knob may ask for
# The forwarder holds eager messages whole, within this many bytes in flight per direction
# (forwarder/daemon.py's eager_budget): an eager size above it would defeat that limit.
EAGER_BUDGET = 16 * MiB
MAX_RANKS = 1 << 16  # ranks in one cluster (launch/_checks.py says why)


@dataclass(frozen=True)
class Knob:
    """One environment variable: its kind, default, bounds and what it sets."""

    name: str
    kind: str  # INT, NUMBER, CHOICE or DIRECTORY
    default: object  # None: given by the job (the forwarder's layout, mmpi-run's plan)
    what: str  # what it sets, for docs and messages
    low: float = 0  # the smallest value (INT, NUMBER) ...
    high: float = math.inf  # ... and the largest
    choices: tuple[str, ...] = ()  # CHOICE: the accepted words, lower case
    unit: str = ""  # bytes, s, us

    def range_text(self) -> str:
        """The accepted values in words: 'from 1 to 64', 'from 2 to 3600 s', 'one of a, b'."""
        if self.kind == CHOICE:
            return f"one of {', '.join(self.choices)}"
        if self.kind == DIRECTORY:
            return "a directory"
        text = f"from {_number(self.low)} to {_number(self.high)}"
        if self.unit == "bytes":
            return f"{text} bytes ({_bytes(self.low)} to {_bytes(self.high)})"
        if self.unit == "us":
            return f"{text} microseconds ({_number(self.high / SECOND_US)} s)"
        return f"{text} {self.unit}".rstrip()


def _number(value: float) -> str:
    """A bound as people write it: 4096, 0.5, 1000000 (not 1e+06)."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _bytes(value: float) -> str:
    """A size in the largest binary unit that divides it: 4 KiB, 64 MiB, 1 TiB, 1 byte."""
    for unit, size in (("TiB", TiB), ("MiB", MiB), ("KiB", KiB)):
        if value and value % size == 0:
            return f"{_number(value / size)} {unit}"
    return f"{_number(value)} byte{'s' * (value != 1)}"


def _us(name: str, default: float, what: str) -> Knob:
    return Knob(name, NUMBER, default, what, 0, SECOND_US, unit="us")


_REGISTRY = (
    Knob("MMPI_EAGER_MAX", INT, None, "bytes sent inline with the envelope (default: the "
         "forwarder's, 32 KiB)", 0, EAGER_BUDGET, unit="bytes"),
    # Below 4 KiB a large message is thousands of MPI messages per MiB; above 64 MiB the
    # forwarder's pool (up to 8 chunks per direction) would hold a GiB.
    Knob("MMPI_CHUNK", INT, 1 * MiB, "the forwarder's chunk of a large message", 4 * KiB,
         64 * MiB, unit="bytes"),
    Knob("MMPI_STRIPE_MIN", INT, 4 * MiB, "messages from this size are striped over all "
         "forwarders", 1, TiB, unit="bytes"),
    # Heartbeats come every HEARTBEAT seconds: a shorter timeout would lose a live forwarder.
    Knob("MMPI_FORWARDER_TIMEOUT", NUMBER, LOST_AFTER, "a rank declares a forwarder lost "
         "after this long without its heartbeat", 2 * HEARTBEAT, 3600, unit="s"),
    Knob("MMPI_HELLO_TIMEOUT", NUMBER, 10.0, "how long a process that connects to a "
         "forwarder has to answer its challenge", 0.5, 3600, unit="s"),
    _us("MMPI_SPIN_US", 0, "busy polling after the last progress, in a wait"),
    _us("MMPI_YIELD_US", 5000, "then yielding the CPU (sched_yield) for this long"),
    _us("MMPI_MAX_SLEEP_US", 250, "then naps that grow up to this"),
    _us("MMPI_NATIVE_DRAIN_US", 1000, "a wait for a collective's native requests drains the "
        "forwarder link once per this much waiting"),
    Knob("MMPI_TESTS_PER_YIELD", INT, 10, "...and tests the requests this many times between "
         "two yields of the CPU", 1, 10_000),
    Knob("MMPI_RECV_BUDGET", INT, 256 * MiB, "early-arrived large forwarded data a rank holds "
         "before its senders wait for it to pull", 1 * MiB, TiB, unit="bytes"),
    _us("MMPI_LATE_US", 200, "how long a large message's chunks wait at the forwarder for "
        "their receive"),
    Knob("MMPI_CHECK_COLLECTIVES", CHOICE, "1", "0 skips the per-call check of collectives",
         choices=("0", "1")),
    Knob("MMPI_FWD_MODE", CHOICE, "split", "how the forwarder spreads its work over threads",
         choices=("split", "direction", "single")),
    Knob("MMPI_FWD_THREADS", CHOICE, None, "older spelling of MMPI_FWD_MODE: 1 is single, 2 "
         "is direction", choices=("1", "2")),
    Knob("MMPI_FWD_POOL_MANY", INT, 8, "chunk buffers per direction while several pairs "
         "stream at once", 1, 64),
    Knob("MMPI_RELAY", CHOICE, "auto", "the forwarder's relay",
         choices=("auto", "compiled", "python")),
    Knob("MMPI_RANK_PATH", CHOICE, "auto", "the ranks' crossing path",
         choices=("auto", "compiled", "python")),
    Knob("MMPI_PROGRESS", CHOICE, "off", "asynchronous progress",
         choices=("off", "leaders", "all", "auto")),
    _us("MMPI_PROGRESS_NAP_US", 50, "a progress thread's first nap between passes while "
        "work is in flight"),
    _us("MMPI_PROGRESS_MAX_NAP_US", 1000, "...and its longest"),
    Knob("MMPI_DYNAMIC_BCAST", CHOICE, "1", "0 turns dynamic broadcasts off",
         choices=("0", "1")),
    Knob("MMPI_DYNAMIC_BCAST_MIN", INT, 1 * MiB, "the smallest message of a dynamic "
         "broadcast", 0, TiB, unit="bytes"),
    Knob("MMPI_DYNAMIC_BCAST_DESTS", INT, 3, "the fewest receivers of a dynamic broadcast in "
         "the other cluster", 2, MAX_RANKS),
    Knob("MMPI_MONITOR", DIRECTORY, None, "a directory: every rank writes its traffic counters "
         "there"),
    # Set by mmpi-run with --progress (the busiest host's load, for `auto`).
    Knob("MMPI_HOST_RANKS", INT, None, "ranks on the busiest host", 1, 2 * MAX_RANKS),
    Knob("MMPI_HOST_PROCS", INT, None, "ranks and forwarders on the busiest host", 1,
         4 * MAX_RANKS),
)
KNOBS: Mapping[str, Knob] = {k.name: k for k in _REGISTRY}
SET_BY_MMPI_RUN = ("MMPI_HOST_RANKS", "MMPI_HOST_PROCS")  # not in the user's table


def _raw(name: str, environ: Mapping[str, str] | None) -> str | None:
    raw = (os.environ if environ is None else environ).get(name, "").strip()
    return raw or None


def _shown(raw: str) -> str:
    """A number or word as the message quotes it: in full, unless it is very long."""
    text = repr(raw)
    return text if len(text) <= 40 else text[:37] + "..."


def parse(knob: Knob, raw: str) -> object:
    """The value of `raw` for `knob`; UsageError naming the knob and the text otherwise."""
    if knob.kind == CHOICE:
        word = raw.strip().lower()
        if word not in knob.choices:
            raise UsageError(f"{knob.name}={_shown(raw)}: expected {knob.range_text()}")
        return word
    if knob.kind == DIRECTORY:
        if os.path.exists(raw) and not os.path.isdir(raw):
            raise UsageError(f"{knob.name}={raw!r}: exists and is not a directory")
        return raw
    convert = int if knob.kind == INT else float
    try:
        value = convert(raw)
    except ValueError:
        raise UsageError(f"{knob.name}={_shown(raw)}: expected {knob.kind}") from None
    if isinstance(value, float) and not math.isfinite(value):
        raise UsageError(f"{knob.name}={_shown(raw)}: must be a finite number {knob.range_text()}")
    if not knob.low <= value <= knob.high:
        raise UsageError(f"{knob.name}={_shown(raw)}: must be {knob.range_text()}")
    return value


def _value(name: str, kind: tuple[str, ...], default, environ):
    knob = KNOBS[name]  # a KeyError here is a bug: every knob is registered
    if knob.kind not in kind:
        raise TypeError(f"{name} is {knob.kind}, not read as {kind}")
    raw = _raw(name, environ)
    if raw is None:
        return knob.default if default is None else default
    return parse(knob, raw)


def env_int(name: str, default: int | None = None,
            environ: Mapping[str, str] | None = None) -> int:
    """The whole number in environment variable `name`, within its bounds, else the default.

    `default` replaces the registry's where the job gives it (the forwarder's eager size).
    """
    return _value(name, (INT,), default, environ)


def env_float(name: str, default: float | None = None,
              environ: Mapping[str, str] | None = None) -> float:
    """The number in environment variable `name`, within its bounds, else the default."""
    return float(_value(name, (NUMBER,), default, environ))


def env_choice(name: str, environ: Mapping[str, str] | None = None) -> str:
    """The word in environment variable `name`, one of its choices, else the default."""
    return _value(name, (CHOICE,), None, environ)


def env_flag(name: str, environ: Mapping[str, str] | None = None) -> bool:
    """Whether a 0/1 knob is on."""
    return env_choice(name, environ) == "1"


def problems(environ: Mapping[str, str], skip: tuple[str, ...] = ()) -> list[str]:
    """What is wrong with the knobs set in `environ`, one sentence each (mmpi-run's check).

    `skip`: knobs the caller sets itself, whatever the environment holds.
    """
    found = []
    for knob in _REGISTRY:
        raw = _raw(knob.name, environ)
        if raw is None or knob.name in skip:
            continue
        try:
            parse(knob, raw)
        except UsageError as exc:
            found.append(str(exc))
    return found


__all__ = ["CHOICE", "DIRECTORY", "INT", "KNOBS", "MAX_RANKS", "NUMBER", "SET_BY_MMPI_RUN",
           "Knob", "env_choice", "env_flag", "env_float", "env_int", "parse", "problems"]
