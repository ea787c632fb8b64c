"""The ``MPI`` namespace of mmpi: mpi4py's, with a bridged COMM_WORLD when run under mmpi-run.

Under ``mmpi-run`` (the launcher sets ``MMPI_RENDEZVOUS``) importing this module joins the
bridge, like ``MPI_Init``; ``COMM_WORLD`` is bridged, and ``Request``, ``Group``, ``Comm``,
``Intracomm``, ``Win``, ``File``, ``Attach_buffer``/``Detach_buffer`` are mmpi's stand-ins for
mpi4py's (subclasses of them that also take bridged objects, see `_facade`). Anywhere else it is
plain mpi4py, so the same program runs natively for comparison. Every other name (datatypes,
ops, constants, ``Wtime``, ``Status``...) is mpi4py's own.
"""

from __future__ import annotations

from . import _bootstrap
from ._native import MPI as _native

_world = _bootstrap.join()

if _world is None:
    COMM_WORLD = _native.COMM_WORLD
    Request = _native.Request
    BRIDGED = False
else:
    from ._facade import (  # noqa: F401
        COMM_SELF,
        Attach_buffer,
        Cartcomm,
        Comm,
        Detach_buffer,
        Distgraphcomm,
        File,
        Graphcomm,
        Intercomm,
        Intracomm,
        Message,
        Prequest,
        Topocomm,
        Win,
        _comm_lock,
        _comm_lock_table,
        _commctx_inter,
        _commctx_intra,
        mpi_exceptions,
    )
    from ._group import Group  # noqa: F401
    from .request import Request  # noqa: F401

    COMM_WORLD = _world
    COMM_WORLD.__module__ = __name__  # pickled by name, as mpi4py's predefined handles
    BRIDGED = True
    mpi_exceptions()

    def Query_thread() -> int:
        """The thread level the bridge supports: calls from one thread at a time."""
        return min(_native.Query_thread(), _native.THREAD_SERIALIZED)

    def Init_thread(required: int = _native.THREAD_MULTIPLE) -> int:
        """MPI is initialized already (the bridge joined at import): the level it provides."""
        return Query_thread()

    def Init() -> None:
        """MPI is initialized already: the bridge joined at import."""

    def Finalize() -> None:
        """Leave the bridge, then finalize MPI."""
        _bootstrap.finalize()
        _native.Finalize()


# mpi4py's public names, bound here once: a module `__getattr__` costs 0.35 us per lookup,
# and programs look up `MPI.SUM`, `MPI.ANY_SOURCE`... in their inner loops. Names defined
# above win; anything mpi4py only resolves on demand still goes through `__getattr__`.
globals().update({name: value for name, value in vars(_native).items()
                  if not name.startswith("_") and name not in globals()})


def __getattr__(name: str):
    return getattr(_native, name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(dir(_native)))
