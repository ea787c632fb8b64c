"""The compiled parts, built where a C compiler is present; mmpi works without them.

`_mmpi_crelay` (the forwarder's relay loop in C, forwarder/_crelay.c) and `_mmpi_crank` (the
ranks' crossing path, mmpi/_crank.c) are top-level modules, so that a source checkout's
packages on the path do not hide them, compiled against the MPI headers and library of the
`mpich` wheel, the MPI that mpi4py loads here (MPICH's ABI, libmpi.so.12). If they or a
compiler are missing, or a build fails, the install goes on without it: the forwarder uses its
Python relay and the ranks their Python path, saying so (the forwarder's start-up line,
`mmpi-run --verbose`).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from setuptools import Extension, setup


def _mpich_prefix() -> Path | None:
    """Where the mpich wheel put include/mpi.h and lib/libmpi.so (None: not found)."""
    candidates = []
    try:
        from importlib.metadata import distribution

        dist = distribution("mpich")
        for f in dist.files or ():
            if str(f).endswith("include/mpi.h"):
                candidates.append(Path(dist.locate_file(f)).resolve().parent.parent)
    except Exception:  # noqa: BLE001 - no wheel metadata: look on PATH instead
        pass
    mpicc = shutil.which("mpicc")
    if mpicc:
        candidates.append(Path(mpicc).resolve().parent.parent)
    for prefix in candidates:
        if (prefix / "include" / "mpi.h").exists() and (prefix / "lib" / "libmpi.so").exists():
            return prefix
    return None


def _extensions() -> list[Extension]:
    if os.environ.get("MMPI_NO_COMPILE"):
        return []
    prefix = _mpich_prefix()
    if prefix is None:
        print("mmpi: no MPICH headers found; the forwarder will use its Python relay")
        return []
    return [Extension(
        name, [source],
        include_dirs=[str(prefix / "include")], library_dirs=[str(prefix / "lib")],
        libraries=["mpi"], extra_compile_args=["-O2", "-std=c99"],
        # site-packages -> <prefix>/lib, for an import before mpi4py's
        extra_link_args=["-Wl,-rpath,$ORIGIN/../.."],
        optional=True,
    ) for name, source in (("_mmpi_crelay", "forwarder/_crelay.c"),
                           ("_mmpi_crank", "mmpi/_crank.c"))]


setup(ext_modules=_extensions())
