"""The ``MPI`` namespace of mmpi: mpi4py's, with a bridged COMM_WORLD when run under mmpi-run.

Under ``mmpi-run`` (the launcher sets ``MMPI_RENDEZVOUS``) importing this module joins the
bridge, like ``MPI_Init`` (or ``MPI.Init()`` does, if the program set
``mpi4py.rc.initialize = False``); ``COMM_WORLD`` is bridged, and ``Request``, ``Group``,
``Comm``, ``Intracomm``, ``Win``, ``File``, ``Attach_buffer``/``Detach_buffer`` are mmpi's
stand-ins for mpi4py's (subclasses of them that also take bridged objects, see
`_runtime.facade`), documented as mpi4py's. Anywhere else it is plain mpi4py, so the same
program runs natively for comparison. Every other name (datatypes, ops, constants, ``Wtime``,
``Status``...) is mpi4py's own.
"""

from __future__ import annotations

from functools import partial as _partial

from ._runtime import bootstrap as _bootstrap
from ._startup.native import MPI as _native

if not _bootstrap.bridging():
    COMM_WORLD = _native.COMM_WORLD
    Request = _native.Request
    BRIDGED = False
else:
    from ._api.group import Group  # noqa: F401
    from ._api.request import Request  # noqa: F401
    from ._api.standin import StandIn as _StandIn
    from ._api.standin import document as _document
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
        _addressof,
        _comm_lock,
        _comm_lock_table,
        _commctx_inter,
        _commctx_intra,
        _handleof,
        capi_table,
        mpi_exceptions,
    )

    BRIDGED = True
    # Tools find mpi4py's compiled module, and the MPI library and libmpi.pxd beside it,
    # through `mpi4py.MPI.__file__`: under the hook that name is this module, so say theirs.
    __file__ = _native.__file__
    # C extensions written for mpi4py take its C API from here (`import_mpi4py()`).
    __pyx_capi__ = capi_table()
    mpi_exceptions()
    del capi_table, mpi_exceptions

    def _environment(native, join, leave):
        """mpi4py's Init, Init_thread, Finalize and Query_thread, for the bridge."""

        def Query_thread() -> int:
            """The thread level the bridge supports: calls from one thread at a time."""
            return min(native.Query_thread(), native.THREAD_SERIALIZED)

        def Init() -> None:
            """Initialize MPI and join the bridge (mpi4py.rc.initialize = False)."""
            native.Init()  # as natively: an error if MPI is initialized already
            join(COMM_WORLD)

        def Init_thread(required: int = native.THREAD_MULTIPLE) -> int:
            """Init at thread level `required`; the level provided (THREAD_SERIALIZED at most)."""
            native.Init_thread(required)
            join(COMM_WORLD)
            return Query_thread()

        def Finalize() -> None:
            """Leave the bridge, then finalize MPI."""
            leave()
            native.Finalize()

        return Query_thread, Init, Init_thread, Finalize

    Query_thread, Init, Init_thread, Finalize = _environment(_native, _bootstrap.join,
                                                             _bootstrap.finalize)
    del _environment

    COMM_WORLD = _bootstrap.unjoined_world()
    COMM_WORLD.__module__ = __name__  # pickled by name, as mpi4py's predefined handles
    if _bootstrap.initialize_at_import():
        _bootstrap.join(COMM_WORLD)
    else:
        _bootstrap.join_at_exit(COMM_WORLD)

    # The names mpi4py documents carry its docstrings here too (help(), mpi4py's test_doc).
    for _name, _value in list(globals().items()):
        if isinstance(_value, _StandIn) or (callable(_value) and not isinstance(_value, type)
                                            and str(getattr(_value, "__module__", None))
                                            .startswith("mmpi")):
            _document(_value, getattr(_native, _name, None))
    del _name, _value, _StandIn, _document


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
