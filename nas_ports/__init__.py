"""NAS Parallel Benchmarks 3.4 (EP, IS, CG, MG, LU) ported to Python/numpy on ``mmpi.MPI``."""

from __future__ import annotations

KERNELS = ("ep", "is", "cg", "mg", "lu")
CLASSES = ("S", "W", "A", "B")

__all__ = ["CLASSES", "KERNELS"]
