"""The names the bridged `MPI` namespace puts in place of mpi4py's own (under mmpi-run only).

Each is a stand-in (`_api.standin`): a subclass of mpi4py's class that also takes mpi4py's
objects, so code that never touches the bridge behaves as before. They differ where a bridged
object is involved: `MPI.Intracomm(comm)` of a bridged communicator is a bridged communicator;
windows and files on a communicator across the zipper say that they are not bridged, and on
one inside a cluster use its native communicator; `Attach_buffer` sizes buffered sends.
`_handleof`, `_addressof` and mpi4py's C API (`capi_table`, with capi.c) give a bridged
communicator's native handle where one exists, and raise NotBridged where none does.
"""

from __future__ import annotations

import ctypes
import inspect
import os
import sys
import threading
import zlib

from .._api import intercore as _inter
from .._api import waits as _request_waits
from .._api.bridged import _Bridged, copy_of, from_native, subclass_copy
from .._api.group import BridgedGroup, ranks_of
from .._api.intercomm import Intercomm as BridgedIntercomm
from .._api.p2p_methods import attached
from .._api.prequest import Prequest
from .._api.standin import StandIn, dispatch_unbound, pickle_natively
from .._backend import compiled as _compiled
from .._engine.buffers import as_view
from .._io.file import open_across
from .._rma.window import create_across
from .._startup.native import MPI
from ..errors import MMPIError, NotBridged


def _communicator_class(native):
    class Stand(native, metaclass=StandIn):
        _stands_for = native

        def __new__(cls, comm=None):
            if cls is Stand:  # MPI.Intracomm(x): a copy, bridged if x is
                if isinstance(comm, BridgedIntercomm) and native is MPI.Intracomm:
                    raise TypeError("expecting an intracommunicator")
                if isinstance(comm, _Bridged):
                    return copy_of(comm)
                return native(comm)
            if isinstance(comm, _Bridged):  # a program's own subclass around a bridged one
                return subclass_copy(cls, comm)
            return native.__new__(cls, comm)  # a program's own subclass

        def Compare(self, comm) -> int:
            """IDENT, CONGRUENT, SIMILAR or UNEQUAL (native and bridged mixed too)."""
            if isinstance(self, _Bridged):
                return type(self).Compare(self, comm)
            if isinstance(comm, _Bridged):
                mine = MPI.Comm.Get_size(self)
                other = comm._core
                me = (other.engine.vrank,)
                return MPI.CONGRUENT if mine == 1 and other.members == me else MPI.UNEQUAL
            return native.Compare(self, comm)

        @classmethod
        def fromhandle(cls, handle: int):
            """The communicator of a native handle (a bridged one's: that communicator)."""
            return from_native(native.fromhandle(handle))

        @classmethod
        def fromint(cls, arg: int):
            """The communicator of a native handle given as an integer."""
            return from_native(native.fromint(arg))

        @classmethod
        def f2py(cls, arg: int):
            """The communicator of a Fortran handle."""
            return from_native(native.f2py(arg))

    Stand.__name__ = Stand.__qualname__ = native.__name__
    Stand.__doc__ = f"mpi4py's {native.__name__}, for native and bridged communicators."
    dispatch_unbound(Stand, native)
    pickle_natively(native)
    return Stand


Comm = _communicator_class(MPI.Comm)
Intracomm = _communicator_class(MPI.Intracomm)


def _create_from_group(cls, group, stringtag: str = "org.mpi4py", info=MPI.INFO_NULL,
                       errhandler=None):
    """The communicator of `group`, with no parent; only its members call (see mpi4py)."""
    if not isinstance(group, BridgedGroup):
        return MPI.Intracomm.Create_from_group(group, stringtag, info, errhandler)
    world = sys.modules["mmpi.MPI"].COMM_WORLD
    # members calling with different tags would not meet: MPI asks for the same string
    comm = world.Create_group(group, zlib.crc32(str(stringtag).encode()) & 0x7FFF)
    if errhandler is not None:
        comm.Set_errhandler(errhandler)
    if info != MPI.INFO_NULL:
        comm.Set_info(info)
    return comm


Intracomm.Create_from_group = classmethod(_create_from_group)


class Intercomm(MPI.Intercomm, metaclass=StandIn):
    """mpi4py's Intercomm; intercommunicators between bridged groups are not bridged yet."""

    _stands_for = MPI.Intercomm

    def __new__(cls, comm=None):
        if isinstance(comm, BridgedIntercomm):  # a copy: the object itself (it lives in the
            return comm                         # bridge, see _api.standin.StandIn.__call__)
        if isinstance(comm, _Bridged):  # as mpi4py's Intercomm(an intracommunicator)
            raise TypeError("expecting an intercommunicator")
        return MPI.Intercomm.__new__(cls if cls is not Intercomm else MPI.Intercomm, comm)

    @classmethod
    def Create_from_groups(cls, local_group, local_leader, remote_group, remote_leader,
                           stringtag="org.mpi4py", info=MPI.INFO_NULL, errhandler=None):
        """The intercommunicator between two groups; only their members call."""
        if isinstance(local_group, BridgedGroup) or isinstance(remote_group, BridgedGroup):
            world = sys.modules["mmpi.MPI"].COMM_WORLD
            core = _inter.from_groups(world._core.engine, ranks_of(local_group),
                                      ranks_of(remote_group), str(stringtag))
            comm = world._wrap(core, "")
            if errhandler is not None:
                comm.Set_errhandler(errhandler)
            return comm
        return MPI.Intercomm.Create_from_groups(local_group, local_leader, remote_group,
                                                remote_leader, stringtag, info, errhandler)


dispatch_unbound(Intercomm, MPI.Intercomm)


def _no_dynamic_processes(name: str):
    def call(self, *args, **kwargs):
        raise NotBridged(
            f"COMM_SELF.{name} is not bridged yet: a bridged job's ranks do not connect to "
            "other processes (their peers, on a bridged communicator, refuse too, so this "
            "call would wait for ever); COMM_SELF.Spawn starts children in this rank's "
            "cluster")

    call.__name__ = call.__qualname__ = name
    call.__doc__ = "Not bridged yet: raises NotBridged."
    return call


class _Self(Intracomm):
    """MPI.COMM_SELF under mmpi-run: mpi4py's; Accept and Connect are refused at once.

    A native Accept waits for ever for a Connect that a bridged communicator refuses. Spawn
    is mpi4py's: the children start in this rank's cluster, through its Hydra, and run
    plain mpi4py there (they are no ranks of the bridged world; `bootstrap.spawned`).
    """

    Accept = _no_dynamic_processes("Accept")
    Connect = _no_dynamic_processes("Connect")

    def free(self) -> None:
        """Free the communicator if it is not null, and not a predefined one (COMM_SELF)."""
        # mpi4py leaves its constant COMM_SELF alone; this one copies its handle, not its
        # mark of a constant, and mpi4py's free would turn it into COMM_NULL
        if self is not COMM_SELF:
            MPI.Intracomm.free(self)

    def __reduce__(self):
        return "COMM_SELF" if self is COMM_SELF else MPI.Intracomm.__reduce__(self)


def _self_comm() -> _Self:
    """COMM_SELF, of class `_Self`: mpi4py's handle, copied without calling MPI.

    mpi4py's copy constructor asks MPI whether the handle is an intercommunicator, which
    MPICH refuses (aborting) before MPI_Init, and with mpi4py.rc.initialize = False this
    module is imported before it; the handle is a constant, its bytes can be copied.
    """
    comm = _Self()
    ctypes.memmove(MPI._addressof(comm), MPI._addressof(MPI.COMM_SELF), MPI._sizeof(MPI.Comm))
    return comm


COMM_SELF = _self_comm()
Topocomm = _communicator_class(MPI.Topocomm)
Cartcomm = _communicator_class(MPI.Cartcomm)
Graphcomm = _communicator_class(MPI.Graphcomm)
Distgraphcomm = _communicator_class(MPI.Distgraphcomm)


class Message(MPI.Message, metaclass=StandIn):
    """mpi4py's Message, for native and bridged matched messages."""

    _stands_for = MPI.Message

    @classmethod
    def Probe(cls, comm, source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG, status=None):
        """Wait for a matching message on `comm` and take it (comm.Mprobe)."""
        if isinstance(comm, _Bridged):
            return comm.Mprobe(source, tag, status)
        return MPI.Message.Probe(comm, source, tag, status)

    @classmethod
    def Iprobe(cls, comm, source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG, status=None):
        """Take a matching message on `comm` if one has arrived, else None (comm.Improbe)."""
        if isinstance(comm, _Bridged):
            return comm.Improbe(source, tag, status)
        return MPI.Message.Iprobe(comm, source, tag, status)

    @classmethod
    def probe(cls, comm, source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG, status=None):
        """Probe, for an object (comm.mprobe)."""
        if isinstance(comm, _Bridged):
            return comm.mprobe(source, tag, status)
        return MPI.Message.probe(comm, source, tag, status)

    @classmethod
    def iprobe(cls, comm, source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG, status=None):
        """Iprobe, for an object (comm.improbe)."""
        if isinstance(comm, _Bridged):
            return comm.improbe(source, tag, status)
        return MPI.Message.iprobe(comm, source, tag, status)


dispatch_unbound(Message, MPI.Message)


class Session(MPI.Session, metaclass=StandIn):
    """mpi4py's Session; its world process set is the bridged world, not this cluster's.

    MPI's sessions are local calls: the library knows only this rank's job. "mpi://WORLD"
    (its size, its group, the communicator made from that group) is the bridged world here;
    every other process set ("mpi://SELF", ...) is the native library's.
    """

    _stands_for = MPI.Session
    WORLD = "mpi://WORLD"

    def Get_pset_info(self, pset_name: str) -> MPI.Info:
        """The process set's info; "mpi_size" of the world is the bridged world's size."""
        info = MPI.Session.Get_pset_info(self, pset_name)
        if pset_name == self.WORLD:
            info.Set("mpi_size", str(_bridged_world("Session.Get_pset_info").Get_size()))
        return info

    def Create_group(self, pset_name: str):
        """The process set's group: the bridged world's for "mpi://WORLD"."""
        if pset_name == self.WORLD:
            return _bridged_world("Session.Create_group").Get_group()
        return MPI.Session.Create_group(self, pset_name)


def _bridged_world(call: str):
    """The bridged COMM_WORLD, for a session's "mpi://WORLD"; NotBridged while there is none."""
    from . import bootstrap

    world = bootstrap.world()
    engine = bootstrap.engine()
    if world is None or engine is None or engine.finalized:
        raise NotBridged(
            f'{call}("mpi://WORLD") is not bridged before MPI.Init() or after MPI.Finalize(): '
            "the bridged world exists only while MPI is initialized, and the native one is "
            "this cluster's alone")
    return world


_EMPTY = memoryview(bytearray(0))


def native_of(comm, what: str):
    """The native communicator to hand to mpi4py for `comm` (a bridged one: if it can be)."""
    if not isinstance(comm, _Bridged):
        return comm
    core = comm._core
    if core.spans:
        raise NotBridged(f"{what} on a communicator across the zipper is not bridged; on "
                         "a communicator inside one cluster it is mpi4py's own")
    return core.coll.comm


class Win(MPI.Win, metaclass=StandIn):
    """mpi4py's Win; on a bridged communicator inside one cluster, through its native one."""

    _stands_for = MPI.Win

    @classmethod
    def Create(cls, memory, disp_unit=1, info=MPI.INFO_NULL, comm=MPI.COMM_SELF):
        """Create a window (see mpi4py); across the zipper, served by messages (_rma.window)."""
        if isinstance(comm, _Bridged) and comm._core.spans:
            mem = _EMPTY if memory is None or memory is MPI.BOTTOM else \
                as_view(memory, writable=True, op="Win.Create")
            return create_across(comm, mem, disp_unit, MPI.WIN_FLAVOR_CREATE)
        return MPI.Win.Create(memory, disp_unit, info, native_of(comm, "Win.Create"))

    @classmethod
    def Allocate(cls, size, disp_unit=1, info=MPI.INFO_NULL, comm=MPI.COMM_SELF):
        """Allocate a window (see mpi4py); across the zipper, served by messages (_rma.window)."""
        if isinstance(comm, _Bridged) and comm._core.spans:
            mem = memoryview(bytearray(size)) if size else _EMPTY
            return create_across(comm, mem, disp_unit, MPI.WIN_FLAVOR_ALLOCATE)
        return MPI.Win.Allocate(size, disp_unit, info, native_of(comm, "Win.Allocate"))

    @classmethod
    def Allocate_shared(cls, size, disp_unit=1, info=MPI.INFO_NULL, comm=MPI.COMM_SELF):
        """Allocate a shared window (see mpi4py)."""
        if isinstance(comm, _Bridged) and comm._core.spans:
            raise NotBridged("Win.Allocate_shared on a communicator across the zipper is not "
                             "bridged: two clusters share no memory; allocate it on one "
                             "cluster's (e.g. from comm.Split_type(MPI.COMM_TYPE_SHARED)), or "
                             "use Win.Allocate, which is bridged across")
        return MPI.Win.Allocate_shared(size, disp_unit, info,
                                       native_of(comm, "Win.Allocate_shared"))

    @classmethod
    def Create_dynamic(cls, info=MPI.INFO_NULL, comm=MPI.COMM_SELF):
        """Create a dynamic window (see mpi4py); across the zipper, served by messages."""
        if isinstance(comm, _Bridged) and comm._core.spans:
            return create_across(comm, _EMPTY, 1, MPI.WIN_FLAVOR_DYNAMIC)
        return MPI.Win.Create_dynamic(info, native_of(comm, "Win.Create_dynamic"))


class File(MPI.File, metaclass=StandIn):
    """mpi4py's File; on a bridged communicator inside one cluster, through its native one."""

    _stands_for = MPI.File

    @classmethod
    def Open(cls, comm, filename, amode=MPI.MODE_RDONLY, info=MPI.INFO_NULL):
        """Open a file (see mpi4py); across the zipper, one native file per cluster (_io.file)."""
        if isinstance(comm, _Bridged) and comm._core.spans:
            return open_across(comm, comm._core, os.fspath(filename), amode, info,
                               lambda d, mem: create_across(d, mem, 8,
                                                            MPI.WIN_FLAVOR_ALLOCATE))
        return MPI.File.Open(native_of(comm, "File.Open"), filename, amode, info)


pickle_natively(MPI.Win, MPI.File, MPI.Message, MPI.Session, MPI.Intercomm)


def buffer_size(buf) -> int:
    """Bytes in a buffer given to Attach_buffer (-1: automatic, or not to be told)."""
    if buf is MPI.BUFFER_AUTOMATIC:
        return -1
    try:
        return MPI.buffer(buf).nbytes
    except (TypeError, ValueError, BufferError):
        return -1


def Attach_buffer(buf) -> None:
    """Attach a buffer for buffered sends (bridged ones count against its size too)."""
    size = buffer_size(buf)
    MPI.Attach_buffer(buf)
    attached.size = size


def Detach_buffer():
    """Detach the buffer once the buffered sends using it have completed."""
    engine = _request_waits.engine
    if engine is not None and attached.pending:
        engine.wait_for(lambda: all([op.poll() for op, _ in attached.pending]))
    attached.pending = []
    attached.size = 0
    return MPI.Detach_buffer()


def _handleof(arg) -> int:
    """The native handle of an MPI object; of a bridged communicator where one exists."""
    if isinstance(arg, _Bridged):
        return arg._native_comm("MPI._handleof").handle
    return MPI._handleof(arg)


def _addressof(arg) -> int:
    """Where the native handle of an MPI object lies; of a bridged communicator's native one."""
    if isinstance(arg, _Bridged):
        return MPI._addressof(arg._native_comm("MPI._addressof"))
    return MPI._addressof(arg)


def _capi_get(obj):
    """The object whose handle mpi4py's PyMPIComm_Get gives C code for `obj` (capi.c)."""
    if isinstance(obj, _Bridged):
        return obj._native_comm("PyMPIComm_Get (mpi4py's C API)")
    return obj


def _capi_new(native):
    """What mpi4py's PyMPIComm_New gives C code for the communicator `native` (capi.c)."""
    if native == MPI.COMM_SELF:  # of the class the program sees COMM_SELF have
        return _Self(native)
    return from_native(native)


def capi_table() -> dict:
    """mpi4py's `__pyx_capi__` with its communicator functions asking the bridge first.

    mpi4py's own where the compiled wrappers were not built (no C compiler at install).
    """
    table = dict(MPI.__pyx_capi__)
    ext = _compiled.extension()
    if ext is None:
        return table
    table["PyMPIComm_Get"], table["PyMPIComm_New"] = ext.wrap_capi(
        table["PyMPIComm_Get"], table["PyMPIComm_New"], _capi_get, _capi_new)
    return table


def _comm_lock_table(comm) -> dict:
    """mpi4py's table of a communicator's locks (mpi4py.util.pkl5 takes them), bridged too."""
    if isinstance(comm, _Bridged):
        return comm._core.locks
    return MPI._comm_lock_table(comm)


def _comm_lock(comm, key=None):
    """The lock `key` of a communicator, made on first use (mpi4py's `_comm_lock`)."""
    if isinstance(comm, _Bridged):
        table = _comm_lock_table(comm)
        lock = table.get(key)
        if lock is None:
            lock = table[key] = threading.Lock()
        return lock
    return MPI._comm_lock(comm, key)


def _commctx_intra(comm):
    """mpi4py's private duplicate of a communicator and a fresh tag, bridged ones too.

    mpi4py.util.pkl5 runs its collectives on them.
    """
    if not isinstance(comm, _Bridged):
        return MPI._commctx_intra(comm)
    core = comm._core
    if core.pickled_ctx is None:  # every rank's first such call: the Dup is collective
        core.pickled_ctx = [comm.Dup(), 0]
    ctx = core.pickled_ctx
    ctx[1] = ctx[1] + 1 if ctx[1] < core.engine.tag_ub else 1
    return ctx[0], ctx[1]


def _commctx_inter(comm):
    """mpi4py's private duplicate of an intercommunicator and its companions, bridged too.

    (duplicate, a fresh tag, a communicator of the local group, whether that group is the
    low one), as mpi4py's; see _commctx_intra.
    """
    if not isinstance(comm, BridgedIntercomm):
        return MPI._commctx_inter(comm)
    core = comm._core
    if core.pickled_ctx is None:  # every rank's first such call: the Dups are collective
        low = min(core.local_members) < min(core.members)
        core.pickled_ctx = [comm.Dup(), 0, comm._local.Dup(), low]
    ctx = core.pickled_ctx
    ctx[1] = ctx[1] + 1 if ctx[1] < core.engine.tag_ub else 1
    return ctx[0], ctx[1], ctx[2], ctx[3]


def mpi_exceptions() -> None:
    """From now on the bridge's errors are also mpi4py MPI.Exceptions (`except` catches them).

    An exception class cannot take MPI.Exception as a base once made, so each error class
    gets a twin that has both; MMPIError makes its instances as the twins.
    """
    from .. import errors

    for _, cls in inspect.getmembers(errors, inspect.isclass):
        if issubclass(cls, MMPIError) and cls.mpi_exception and cls not in MMPIError._twins:
            MMPIError._twins[cls] = type(cls.__name__, (cls, MPI.Exception), {
                "__init__": BaseException.__init__,
                "__str__": BaseException.__str__,
                "__repr__": BaseException.__repr__,
                "__int__": cls.Get_error_class,
                "__module__": cls.__module__,
                "__doc__": cls.__doc__,
            })


__all__ = ["Comm", "Intracomm", "Intercomm", "COMM_SELF", "Topocomm", "Cartcomm",
           "Graphcomm", "Distgraphcomm", "Prequest", "Session", "Message", "Win", "File",
           "Attach_buffer", "Detach_buffer", "native_of", "mpi_exceptions", "capi_table",
           "_comm_lock", "_comm_lock_table", "_commctx_intra", "_commctx_inter", "_handleof",
           "_addressof"]
