"""mpi4py's own MPI module, as mmpi's internals use it.

Under mmpi-run `import mpi4py.MPI` gives the bridged namespace instead (see `hook`); every
internal module takes the real one from here.
"""

from __future__ import annotations

from . import hook as _hook

MPI = _hook.native()

__all__ = ["MPI"]
