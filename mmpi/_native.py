"""mpi4py's own MPI module, as mmpi's internals use it.

Under mmpi-run `import mpi4py.MPI` may give mmpi's bridged namespace instead (see `_hook`);
every internal module takes the real one from here, bound before any such swap.
"""

from __future__ import annotations

from mpi4py import MPI

__all__ = ["MPI"]
