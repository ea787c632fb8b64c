"""Tuning knobs read from the environment (`MMPI_*`): parsed in one place, errors name the knob.

The knobs are for benchmarks and unusual machines. A typo in one must not surface as a bare
`ValueError` from deep inside an import, nor be clamped silently into some other value: the
error says which variable, what it held and what it may hold. Unset or empty means the default.
"""

from __future__ import annotations

import math
import os

from ..errors import UsageError


def _read(name: str, convert, what: str):
    """(raw text, value) of environment variable `name`; (None, None) if unset or empty."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return None, None
    try:
        return raw, convert(raw)
    except ValueError:
        raise UsageError(f"{name}={raw!r}: expected {what}") from None


def env_int(name: str, default: int, *, minimum: int = 0) -> int:
    """The whole number in environment variable `name`, at least `minimum`, else `default`."""
    raw, value = _read(name, int, "a whole number")
    if raw is None:
        return default
    if value < minimum:
        raise UsageError(f"{name}={raw!r}: must be at least {minimum}")
    return value


def env_float(name: str, default: float, *, minimum: float = 0.0, above: bool = False) -> float:
    """The number in environment variable `name`, else `default`.

    It must be at least `minimum`, or greater than it if `above`.
    """
    raw, value = _read(name, float, "a number")
    if raw is None:
        return default
    if math.isnan(value) or value < minimum or (above and value == minimum):
        bound = f"greater than {minimum:g}" if above else f"at least {minimum:g}"
        raise UsageError(f"{name}={raw!r}: must be {bound}")
    return value
