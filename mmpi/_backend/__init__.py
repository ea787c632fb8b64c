"""The backend of a rank's hot loops, chosen once per process: compiled where built, else Python.

`MMPI_RANK_PATH` chooses: `auto` (the default: compiled where it loads), `compiled` (a rank
fails at start without it) or `python` (the reference). `get()` is first called when a
rank's engine starts, so that a bad value is reported like any other error; every later call
returns the same backend. `describe()` says which runs and why, for `mmpi-run --verbose`.
The interface both implement is `interface.Backend`.
"""

from __future__ import annotations

from ..errors import UsageError
from ..wire.knobs import KNOBS, env_choice
from .interface import Backend

CHOICES = KNOBS["MMPI_RANK_PATH"].choices  # auto, compiled, python

_chosen: Backend | None = None


def get() -> Backend:
    """Return this process's backend (chosen on the first call, from MMPI_RANK_PATH)."""
    global _chosen
    if _chosen is None:
        _chosen = _choose(env_choice("MMPI_RANK_PATH"))
    return _chosen


def _choose(choice: str) -> Backend:
    from . import compiled, python

    if choice not in CHOICES:
        raise UsageError(f"MMPI_RANK_PATH={choice!r}: expected one of {', '.join(CHOICES)}")
    built = compiled.backend() if choice != "python" else None
    if choice == "compiled" and built is None:
        raise UsageError(f"MMPI_RANK_PATH=compiled: the compiled rank path is "
                         f"{compiled.WHY_NOT} (reinstall with a C compiler present, or use "
                         "MMPI_RANK_PATH=python)")
    return built if built is not None else python.PythonBackend()


def describe(backend: Backend) -> str:
    """'compiled', or 'python' and why, for a start-up line."""
    if backend.name == "compiled":
        return "compiled"
    from . import compiled

    if compiled.WHY_NOT:
        return f"python ({compiled.WHY_NOT})"
    return "python (MMPI_RANK_PATH=python)"


__all__ = ["CHOICES", "Backend", "describe", "get"]
