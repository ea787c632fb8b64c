"""Optional Numba compilation of the loop kernels of MG and LU, with a plain-Python fallback.

Rule: every kernel given to `kernel` must also be correct as ordinary Python, because without
Numba (not in a core install: the ``nas`` extra brings it) or with NAS_PORTS_NO_JIT=1 it runs
as written — slowly, but the results are the same. Compiled code is cached next to the
sources, so only the first run of a kernel pays for it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any, TypeVar

from . import INSTALL_HINT

F = TypeVar("F", bound=Callable[..., Any])

_DISABLED = os.environ.get("NAS_PORTS_NO_JIT", "").strip() not in ("", "0")

try:
    if _DISABLED:
        raise ImportError("disabled by NAS_PORTS_NO_JIT")
    import numba
except ImportError:
    numba = None

ENABLED = numba is not None
# Wall time spent compiling (or loading from the cache) the kernels of this process.
compile_seconds = 0.0


def kernel(signature: str, *, inline: bool = False) -> Callable[[F], F]:
    """Compile `fn` eagerly for `signature` with Numba when it is available; else return it.

    `inline` marks small helpers that other kernels call once per grid point: Numba then
    splices them into the caller instead of paying a call with a dozen array arguments.
    """

    def wrap(fn: F) -> F:
        global compile_seconds
        if numba is None:
            return fn
        t0 = time.perf_counter()
        compiled = numba.njit(
            signature,
            cache=True,
            nogil=True,
            error_model="numpy",
            inline="always" if inline else "never",
        )(fn)
        compile_seconds += time.perf_counter() - t0
        return compiled  # type: ignore[no-any-return]

    return wrap


def describe() -> str:
    """One line for the report: which engine ran the loop kernels and what compiling cost."""
    if numba is None:
        why = "disabled by NAS_PORTS_NO_JIT" if _DISABLED else f"no numba: {INSTALL_HINT}"
        return f"loop kernels: plain Python/numpy ({why})"
    return (
        f"loop kernels: Numba {numba.__version__}, compiled or loaded from cache in "
        f"{compile_seconds:.2f} s (outside the timed region)"
    )
