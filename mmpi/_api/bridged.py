"""What every bridged communicator class shares: identity, naming, info, buffers, errors, handles.

The classes themselves (`comm.Comm`, `topology.Cartcomm`, ...) add mpi4py's base class; the
methods come from mixins by concern: point-to-point (`p2p_methods`), collectives (`coll_methods`),
persistent collectives and partitioned calls (`persist_methods`), communicators and groups
(`create_methods`).
"""

from __future__ import annotations

import sys
import weakref

from .._startup.native import MPI
from ..errors import MMPIError, NotBridged, UsageError
from ..wire.layout import Layout
from .coll_methods import CollectiveMethods
from .core import Core
from .create_methods import CommunicatorMethods
from .intercore import InterCore
from .p2p_methods import PointToPointMethods
from .persist_methods import PersistentMethods


class _Bridged(PointToPointMethods, CollectiveMethods, PersistentMethods, CommunicatorMethods):
    """What every bridged communicator class shares: identity and naming."""

    __slots__ = ()

    def __new__(cls, *args, **kwargs):
        """A new bridged communicator object (its native handle stays MPI_COMM_NULL).

        Called with nothing, as `type(comm)()`: a null communicator, as mpi4py makes one;
        with a bridged communicator, as `type(comm)(comm)`: a copy of it, as mpi4py's.
        """
        if not args and not kwargs:
            return _native_base(cls)()
        if len(args) == 1 and isinstance(args[0], _Bridged):
            return copy_of(args[0])
        return _blank(cls)

    def __init__(self, core: Core, name: str = "") -> None:
        if isinstance(core, _Bridged):  # a copy (see __new__), made already
            return
        self._core = core
        self._name = name
        self._tag_ub = core.engine.tag_ub
        self._errhandler = MPI.ERRORS_RETURN
        self._topo = None

    def _wrap(self, core: Core, name: str, cls=None):
        """A bridged communicator object for `core` (a plain one unless `cls` says)."""
        if cls is None and isinstance(core, InterCore):
            cls = intercomm_class()
        parts = _PARTS.get(cls)
        if parts is not None:  # a program's subclass (subclass_copy): its class again
            new = subclass_copy(parts[0], parts[1](core, name))
        else:
            new = (_plain(cls) if cls else intracomm_class())(core, name)
        if self._errhandler != MPI.ERRORS_RETURN:  # a new communicator inherits it (MPI)
            new.Set_errhandler(self._errhandler)
        return new

    def __eq__(self, other) -> bool:
        if isinstance(other, _Bridged):
            return other._core is self._core
        if isinstance(other, MPI.Comm):  # a native one: only COMM_NULL, once this is freed
            return self._core.freed and not MPI.Comm.__bool__(other)
        return NotImplemented

    def __ne__(self, other) -> bool:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __hash__(self) -> int:
        return id(self._core)

    def __bool__(self) -> bool:
        return not self._core.freed

    def __reduce__(self):
        if self._core is self._core.engine.communicators[0]:
            world = sys.modules["mmpi.MPI"].COMM_WORLD
            if self is world:
                return "COMM_WORLD"  # found again by name, as mpi4py's predefined handles
            return copy_of, (world,)  # MPI.Intracomm(COMM_WORLD): again a copy
        raise ValueError(f"cannot serialize '{type(self).__name__}' instance")

    # -- info (kept, not interpreted) ----------------------------------------------------
    def Set_info(self, info) -> None:
        """Keep a copy of the hints (the bridge does not act on them)."""
        if info == MPI.INFO_NULL:  # as MPI: an invalid info object
            raise UsageError(f"Set_info on rank {self._core.rank}: MPI.INFO_NULL is not an "
                             "info object (MPI.Info.Create() makes an empty one)")
        self._info = info.Dup()

    def Get_info(self):
        """A copy of the hints set on this communicator."""
        info = getattr(self, "_info", None)
        return info.Dup() if info is not None else MPI.Info.Create()

    @property
    def info(self):
        """The hints set on this communicator."""
        return self.Get_info()

    @info.setter
    def info(self, info) -> None:
        self.Set_info(info)

    # -- a buffer for buffered sends (MPI 4.1: per communicator; here, the process's) ----
    def Attach_buffer(self, buf) -> None:
        """Attach a buffer for this communicator's buffered sends."""
        from .p2p_methods import attached

        try:
            attached.size = -1 if buf is MPI.BUFFER_AUTOMATIC else MPI.buffer(buf).nbytes
        except (TypeError, ValueError, BufferError):
            attached.size = -1
        self._buffer = buf

    def Detach_buffer(self):
        """Detach it, once the buffered sends have completed."""
        self.Flush_buffer()
        buf, self._buffer = getattr(self, "_buffer", None), None
        from .p2p_methods import attached

        attached.size = 0
        return buf

    def Flush_buffer(self) -> None:
        """Wait until the buffered sends have completed."""
        from .p2p_methods import attached

        self._core.engine.wait_for(lambda: all([op.poll() for op, _ in attached.pending]))

    def Iflush_buffer(self):
        """Flush_buffer, as a request (complete once it returns)."""
        from .._engine.op import completed
        from .request import BridgedRequest

        self.Flush_buffer()
        return BridgedRequest(completed())

    def __repr__(self) -> str:
        core = self._core
        if not isinstance(core, Core):  # COMM_WORLD before MPI.Init (bootstrap.unjoined_world)
            return f"<mmpi.{type(self).__name__} {self._name} (MPI not initialized)>"
        return (f"<mmpi.{type(self).__name__} {self._name or '(unnamed)'} rank "
                f"{core.rank}/{core.size} ({core.engine.cluster})>")

    def _open(self, call: str) -> None:
        """Refuse `call` once freed, as mpi4py's COMM_NULL does (MPI_ERR_COMM)."""
        if self._core.freed:
            self._core.check_open(call)

    def Get_rank(self) -> int:
        """Rank of this process in the communicator."""
        core = self._core
        if core.freed:
            core.check_open("Get_rank")
        return core.rank

    def Get_size(self) -> int:
        """Number of processes in the communicator."""
        core = self._core
        if core.freed:
            core.check_open("Get_size")
        return core.size

    @property
    def rank(self) -> int:
        """Rank of this process in the communicator."""
        core = self._core
        if core.freed:
            core.check_open("rank")
        return core.rank

    @property
    def size(self) -> int:
        """Number of processes in the communicator."""
        core = self._core
        if core.freed:
            core.check_open("size")
        return core.size

    @property
    def cluster(self) -> str:
        """Name of this process's cluster: 'low' or 'high' (mmpi's own)."""
        return self._core.engine.cluster

    @property
    def layout(self) -> Layout:
        """Which cluster runs each rank of this communicator (mmpi's own)."""
        owners = self._core.engine.layout.owners
        return Layout.from_owners([owners[w] for w in self._core.members])

    def Get_name(self) -> str:
        """Name of the communicator (MPI_COMM_NULL's once freed, as mpi4py's)."""
        return "MPI_COMM_NULL" if self._core.freed else self._name

    def Set_name(self, name: str) -> None:
        """Set the communicator's name."""
        self._name = str(name)

    @property
    def name(self) -> str:
        """Name of the communicator."""
        return self._name

    @name.setter
    def name(self, value: str) -> None:
        self._name = str(value)

    # -- the native handle: one exists only inside one cluster -------------------------
    def _native_comm(self, call: str):
        """The native communicator that stands for this one; NotBridged if none can.

        A communicator whose ranks are all in this cluster has one, ranked as it is: its
        point-to-point context's (`create`), where its messages within the cluster go. One
        across the zipper has none: its ranks run in two MPI jobs.
        """
        core = self._core
        if core.freed:
            return MPI.COMM_NULL
        if isinstance(core, InterCore) or core.spans:
            what = "an intercommunicator of the bridge" if isinstance(core, InterCore) else \
                "a communicator with ranks in both clusters"
            raise NotBridged(
                f"{call} of {self._name or 'a bridged communicator'} is impossible: no native "
                f"handle exists for {what} (its ranks run in two MPI jobs joined by "
                "forwarders), and MPI_COMM_NULL would let C or Fortran code go on silently; "
                "use the bridged object from Python, or give native code a communicator of "
                "one cluster (e.g. from comm.Split by cluster)")
        native = core.p2p.comm
        _BY_HANDLE[native.handle] = self
        return native

    @property
    def handle(self) -> int:
        """The native handle of this communicator, where one exists (see `_native_comm`)."""
        return self._native_comm("handle").handle

    def toint(self) -> int:
        """The native handle as an integer, where one exists (see `_native_comm`)."""
        return self._native_comm("toint").toint()

    def py2f(self) -> int:
        """The Fortran handle, where one exists (see `_native_comm`)."""
        return self._native_comm("py2f").py2f()

    @classmethod
    def fromhandle(cls, handle: int):
        """The communicator of a native handle (the bridged one it came from, if any)."""
        return from_native(MPI.Comm.fromhandle(handle))

    @classmethod
    def fromint(cls, arg: int):
        """The communicator of a native handle given as an integer."""
        return from_native(MPI.Comm.fromint(arg))

    @classmethod
    def f2py(cls, arg: int):
        """The communicator of a Fortran handle."""
        return from_native(MPI.Comm.f2py(arg))

    def Is_inter(self) -> bool:
        """A bridged communicator is an intracommunicator."""
        self._core.check_open("Is_inter")
        return False

    def Is_intra(self) -> bool:
        """A bridged communicator is an intracommunicator."""
        self._core.check_open("Is_intra")
        return True

    @property
    def is_inter(self) -> bool:
        """False: an intracommunicator."""
        self._core.check_open("is_inter")
        return False

    @property
    def is_intra(self) -> bool:
        """True: an intracommunicator."""
        self._core.check_open("is_intra")
        return True

    def Get_topology(self) -> int:
        """MPI.CART, MPI.DIST_GRAPH, or MPI.UNDEFINED for none."""
        self._core.check_open("Get_topology")
        return MPI.UNDEFINED if self._topo is None else self._topo.kind

    @property
    def topology(self) -> int:
        """The topology kind."""
        return self.Get_topology()

    @property
    def is_topo(self) -> bool:
        """Whether a topology is attached."""
        return self._topo is not None

    def Abort(self, errorcode: int = 0):
        """Abort the whole bridged job: this cluster aborts, mmpi-run stops the rest."""
        self._core.engine.local.Abort(errorcode)

    # -- error handlers ------------------------------------------------------------------
    def Set_errhandler(self, errhandler) -> None:
        """ERRORS_RETURN: errors raise (MPI.Exception); ERRORS_ARE_FATAL/ABORT: they abort."""
        if not isinstance(errhandler, MPI.Errhandler) or errhandler == MPI.ERRHANDLER_NULL:
            raise UsageError(f"Set_errhandler: {errhandler!r} is not an error handler")
        if errhandler == MPI.ERRORS_RETURN:
            self.__class__ = _plain(type(self))
        elif errhandler in (MPI.ERRORS_ARE_FATAL, MPI.ERRORS_ABORT):
            self.__class__ = _fatal(_plain(type(self)))
        else:
            raise NotBridged("Set_errhandler: only MPI.ERRORS_RETURN, MPI.ERRORS_ARE_FATAL and "
                             "MPI.ERRORS_ABORT are bridged, not user error handlers")
        self._errhandler = MPI.Errhandler(errhandler)  # a handle of its own, as MPI keeps

    def Get_errhandler(self):
        """The error handler set on this communicator (a new handle: the caller frees it)."""
        return MPI.Errhandler(self._errhandler)

    def Call_errhandler(self, errorcode: int) -> None:
        """Invoke the error handler: ERRORS_ARE_FATAL/ABORT abort the job; ERRORS_RETURN returns."""
        if self._errhandler in (MPI.ERRORS_ARE_FATAL, MPI.ERRORS_ABORT):
            self.Abort(errorcode)


def intercomm_class() -> type:
    """The bridged Intercomm class (intercomm.Intercomm)."""
    for cls in _Bridged.__subclasses__():
        if issubclass(cls, MPI.Intercomm):
            return cls
    raise RuntimeError("mmpi._api.intercomm is not loaded")


def intracomm_class() -> type:
    """The bridged Intracomm class without a topology (comm.Comm)."""
    for cls in _Bridged.__subclasses__():
        if issubclass(cls, MPI.Intracomm) and not issubclass(cls, MPI.Topocomm):
            return cls
    raise RuntimeError("mmpi._api.comm is not loaded")


_FATAL: dict[type, type] = {}


def _plain(cls: type) -> type:
    return getattr(cls, "_plain_class", cls)


def _fatal(cls: type) -> type:
    """`cls` with every public method aborting the job on an MPI error (ERRORS_ARE_FATAL)."""
    fatal = _FATAL.get(cls)
    if fatal is None:
        methods = {}
        for name in dir(cls):
            attr = getattr(cls, name)
            if not name.startswith("_") and callable(attr) and not isinstance(attr, type) \
                    and name not in ("Set_errhandler", "Get_errhandler", "Abort"):
                methods[name] = _aborting(name, attr)
        fatal = _FATAL[cls] = type(cls.__name__, (cls,), {**methods, "_plain_class": cls,
                                                           "__module__": cls.__module__})
    return fatal


def _aborting(name: str, method):
    def call(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except (MMPIError, MPI.Exception) as exc:
            print(f"mmpi: {name} on rank {self._core.rank}: {exc} (MPI.ERRORS_ARE_FATAL); "
                  "aborting", file=sys.stderr, flush=True)
            self._core.engine.local.Abort(1)

    call.__name__ = name
    call.__doc__ = method.__doc__
    return call


_MIXED: dict[tuple[type, type], type] = {}
_PARTS: dict[type, tuple[type, type]] = {}  # the inverse of _MIXED


def subclass_copy(cls: type, comm: _Bridged) -> _Bridged:
    """`MyComm(comm)` for a program's subclass of an MPI communicator class and a bridged one.

    The object is of a class made of both (the program's first, then the bridged one), so the
    program's methods run and MPI's calls are bridged (mpi4py.util.pkl5 is such a program).
    """
    key = (cls, type(comm))
    mixed = _MIXED.get(key)
    if mixed is None:
        own = [k.__dict__["__init__"] for k in cls.__mro__ if "__init__" in k.__dict__ and
               k.__module__.split(".")[0] not in ("mmpi", "mpi4py", "builtins")]

        def __init__(self, *args, **kwargs):  # the program's own, not the bridged class's
            if own:
                own[0](self, *args, **kwargs)

        mixed = _MIXED[key] = type(cls.__name__, (cls, type(comm)), {
            "__module__": cls.__module__, "__qualname__": cls.__qualname__,
            "__init__": __init__})
        _PARTS[mixed] = key
    base = mixed
    while base.__module__ != "mpi4py.MPI":  # the C type its layout comes from (__base__ chain)
        base = base.__base__
    new = base.__new__(mixed)
    new.__dict__.update(comm.__dict__)
    return new


def _native_base(cls: type) -> type:
    """The mpi4py class a bridged communicator class derives from."""
    return next(b for b in cls.__mro__ if b.__module__ == "mpi4py.MPI")


def _blank(cls: type) -> _Bridged:
    """An object of bridged communicator class `cls`, its fields not set yet."""
    return _native_base(cls).__new__(cls)


# The native handles given out for bridged communicators inside one cluster (`_native_comm`),
# so that a handle coming back (fromhandle, C code's PyMPIComm_New) finds its bridged object.
_BY_HANDLE: weakref.WeakValueDictionary = weakref.WeakValueDictionary()


def bridged_of(native):
    """The bridged communicator whose native handle `native` holds, or None."""
    comm = _BY_HANDLE.get(native.handle) if native else None
    if comm is None or comm._core.freed or comm._core.p2p.comm != native:
        return None
    return comm


def from_native(native):
    """`native`, or a copy of the bridged communicator it is the native handle of."""
    comm = bridged_of(native)
    return native if comm is None else copy_of(comm)


def copy_of(comm: _Bridged) -> _Bridged:
    """Another object for the same bridged communicator, equal to it (mpi4py's copies)."""
    new = _blank(type(comm))
    new.__dict__.update(comm.__dict__)
    return new
