"""The compiled parts (the forwarder's relay, the ranks' crossing path): loaded where built.

Both are C extensions built by `pip install .` where a compiler and the mpich wheel's headers
were found (setup.py), against MPICH's ABI. Whether one can be used, and if not why, is the
same question for both: the forwarder says the answer in its start-up line, the ranks under
`mmpi-run --verbose`.
"""

from __future__ import annotations

import importlib
import importlib.util


def load(name: str, mpi_library: str):
    """(module, "") if extension `name` was built and loads here, else (None, why not).

    `mpi_library` is the MPI library's version string (MPI.Get_library_version()).
    """
    if importlib.util.find_spec(name) is None:
        return None, "not built (no C compiler or MPICH headers when mmpi was installed)"
    if not mpi_library.startswith("MPICH"):
        return None, "built for MPICH, but mpi4py uses another MPI"
    try:
        return importlib.import_module(name), ""
    except ImportError as exc:
        return None, f"does not load: {exc}"


__all__ = ["load"]
