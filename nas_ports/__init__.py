"""NAS Parallel Benchmarks 3.4 (EP, IS, CG, MG, LU) ported to Python/numpy on ``mmpi.MPI``."""

from __future__ import annotations

import os

# NPB's MPI codes run one single-threaded process per core: the ranks are the parallelism, so
# BLAS must not start its own threads behind MPI's back (set before numpy is first imported).
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

KERNELS = ("ep", "is", "cg", "mg", "lu")
CLASSES = ("S", "W", "A", "B")
# scipy (CG's sparse matrix) and numba (compiled MG and LU loops) are not in a core install.
INSTALL_HINT = 'pip install "mmpi[nas]"'


class MissingExtra(ImportError):
    """A kernel needs a package of the ``nas`` extra that is not installed."""


__all__ = ["CLASSES", "INSTALL_HINT", "KERNELS", "MissingExtra"]
