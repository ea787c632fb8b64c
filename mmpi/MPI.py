"""The ``MPI`` namespace of mmpi: mpi4py's, with a bridged COMM_WORLD when run under mmpi-run.

Under ``mmpi-run`` (the launcher sets ``MMPI_RENDEZVOUS``) importing this module joins the
bridge, like ``MPI_Init``; ``COMM_WORLD`` is bridged, and ``Request``, ``Group``, ``Comm``,
``Intracomm``, ``Win``, ``File``, ``Attach_buffer``/``Detach_buffer`` are mmpi's stand-ins for
mpi4py's (subclasses of them that also take bridged objects, see `_runtime.facade`). Anywhere else
it is plain mpi4py, so the same program runs natively for comparison. Every other name (datatypes,
ops, constants, ``Wtime``, ``Status``...) is mpi4py's own.
"""

from __future__ import annotations

from functools import partial as _partial

from ._runtime import bootstrap as _bootstrap
from ._startup.native import MPI as _native

_world = _bootstrap.join()
_leave = _bootstrap.finalize

if _world is None:
    COMM_WORLD = _native.COMM_WORLD
    Request = _native.Request
    BRIDGED = False
else:
    from ._api.group import Group  # noqa: F401
    from ._api.request import Request  # noqa: F401
    from ._runtime.facade import (  # noqa: F401
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
        Session,
        Topocomm,
        Win,
        _comm_lock,
        _comm_lock_table,
        _commctx_inter,
        _commctx_intra,
        mpi_exceptions,
    )

    COMM_WORLD = _world
    COMM_WORLD.__module__ = __name__  # pickled by name, as mpi4py's predefined handles
    BRIDGED = True
    # Tools find mpi4py's compiled module, and the MPI library and libmpi.pxd beside it,
    # through `mpi4py.MPI.__file__`: under the hook that name is this module, so say theirs.
    __file__ = _native.__file__
    mpi_exceptions()

    _query_thread, _SERIALIZED = _native.Query_thread, _native.THREAD_SERIALIZED
    _finalize = _native.Finalize

    def Query_thread() -> int:
        """The thread level the bridge supports: calls from one thread at a time."""
        return min(_query_thread(), _SERIALIZED)

    def Init_thread(required: int = _native.THREAD_MULTIPLE) -> int:
        """MPI is initialized already (the bridge joined at import): the level it provides."""
        return Query_thread()

    def Init() -> None:
        """MPI is initialized already: the bridge joined at import."""

    def Finalize() -> None:
        """Leave the bridge, then finalize MPI."""
        _leave()
        _finalize()


# mpi4py's public names, bound here once: a module `__getattr__` costs 0.35 us per lookup,
# and programs look up `MPI.SUM`, `MPI.ANY_SOURCE`... in their inner loops. Names defined
# above win; anything mpi4py only resolves on demand still goes through `__getattr__`.
globals().update({name: value for name, value in vars(_native).items()
                  if not name.startswith("_") and name not in globals()})


_lookup = _partial(getattr, _native)
_names = _partial(dir, _native)
# No module objects in the namespace, as in mpi4py's: a program walking it (mpi4py's own
# test_doc) must not wander into the library's modules and round their import cycles.
del _bootstrap, _native, _partial


def __getattr__(name: str):
    return _lookup(name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_names()))
