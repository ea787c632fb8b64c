"""The ranks' compiled crossing path (`_crank.c`, installed as `_mmpi_crank`), where built.

`MMPI_RANK_PATH` chooses: `auto` (the default: compiled where it loads), `compiled` (a rank
fails at start without it) or `python` (the reference path, `_p2p` and `_engine` alone).
`choose()` is read when a rank's engine starts, so that a bad value is reported like any
other error; `describe()` says which path runs and why, for `mmpi-run --verbose`.
"""

from __future__ import annotations

import os

from ._native import MPI
from .errors import UsageError
from .wire import compiled

CHOICES = ("auto", "compiled", "python")

_crank, WHY_NOT = compiled.load("_mmpi_crank", MPI.Get_library_version())
if _crank is not None and not hasattr(_crank, "wait_ops"):  # built by an older mmpi
    _crank, WHY_NOT = None, "built by an older mmpi (reinstall it)"


def choose():
    """The compiled module to use on this rank, or None for the Python path."""
    choice = os.environ.get("MMPI_RANK_PATH", "").strip() or "auto"
    if choice not in CHOICES:
        raise UsageError(f"MMPI_RANK_PATH={choice!r}: expected one of {', '.join(CHOICES)}")
    if choice == "compiled" and _crank is None:
        raise UsageError(f"MMPI_RANK_PATH=compiled: the compiled rank path is {WHY_NOT} "
                         "(reinstall with a C compiler present, or use MMPI_RANK_PATH=python)")
    return None if choice == "python" else _crank


def describe(module) -> str:
    """'compiled', or 'python' and why, for a start-up line."""
    if module is not None:
        return "compiled"
    return "python (MMPI_RANK_PATH=python)" if _crank is not None else f"python ({WHY_NOT})"


__all__ = ["CHOICES", "WHY_NOT", "choose", "describe"]
