"""mmpi: run one mpi4py program across two clusters joined by zipper-node forwarders.

Replace ``from mpi4py import MPI`` with ``from mmpi import MPI``. Started by ``mmpi-run`` the
program sees one bridged ``MPI.COMM_WORLD``; started by plain ``mpiexec`` it is plain mpi4py.
"""

from __future__ import annotations

from .errors import (
    BridgeError,
    CommError,
    ForwarderLost,
    MMPIError,
    NotBridged,
    ProtocolError,
    RankError,
    RankGone,
    RootError,
    StateError,
    TagError,
    TruncationError,
    UsageError,
)

__version__ = "0.2.0"


def __getattr__(name: str):
    # MPI is imported lazily: importing it initialises MPI and, under mmpi-run, joins the bridge,
    # which must not happen merely because `import mmpi.errors` ran.
    if name == "MPI":
        import importlib

        return importlib.import_module(".MPI", __name__)
    raise AttributeError(f"module 'mmpi' has no attribute {name!r}")


__all__ = [
    "MPI",
    "MMPIError",
    "UsageError",
    "NotBridged",
    "RankError",
    "RootError",
    "CommError",
    "TagError",
    "TruncationError",
    "StateError",
    "RankGone",
    "BridgeError",
    "ForwarderLost",
    "ProtocolError",
    "__version__",
]
