"""The compiled parts (the forwarder's relay, the ranks' crossing path): loaded where built.

Both are C extensions built by `pip install .` where a compiler and an MPI's headers were found
(setup.py): the mpich wheel's (MPICH's ABI), or Open MPI's. Each says which (`BUILT_FOR`), and
is used only with the MPI mpi4py loads being of that kind. Whether one can be used, and if not
why, is the same question for both: the forwarder says the answer in its start-up line, the
ranks under `mmpi-run --verbose`.
"""

from __future__ import annotations

import importlib
import importlib.util


def load(name: str, mpi_library: str):
    """(module, "") if extension `name` was built and loads here, else (None, why not).

    `mpi_library` is the MPI library's version string (MPI.Get_library_version()).
    """
    if importlib.util.find_spec(name) is None:
        return None, "not built (no C compiler or MPI headers when mmpi was installed)"
    running = family(mpi_library)
    if running is None:
        return None, "built for MPICH or Open MPI, but mpi4py uses another MPI"
    try:
        module = importlib.import_module(name)
    except ImportError as exc:  # e.g. built for the other MPI, whose library is not here
        return None, f"does not load: {exc}"
    built = getattr(module, "BUILT_FOR", "MPICH")
    if built != running:
        return None, f"built for {built}, but mpi4py uses {running}"
    return module, ""


def family(mpi_library: str) -> str | None:
    """"MPICH" or "Open MPI" from MPI.Get_library_version()'s text; None for another MPI."""
    if mpi_library.startswith("MPICH"):
        return "MPICH"
    return "Open MPI" if "Open MPI" in mpi_library else None


__all__ = ["family", "load"]
