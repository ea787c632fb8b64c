"""The names the bridged `MPI` namespace puts in place of mpi4py's own (under mmpi-run only).

Each is a subclass of mpi4py's class whose `isinstance` still accepts mpi4py's objects, so
code that never touches the bridge behaves as before; they differ only where a bridged object
is involved: `MPI.Intracomm(comm)` of a bridged communicator is that communicator; windows and
files on a communicator across the zipper say that they are not bridged, and on one inside a
cluster use its native communicator; buffered sends see the attached buffer's size.
"""

from __future__ import annotations

from ._native import MPI
from ._p2p_api import attached
from .comm import _Bridged
from .errors import MMPIError, NotBridged
from .request import Prequest as BridgedPrequest


class _Accepting(type):
    """isinstance(x, a facade class) holds for instances of the mpi4py class it stands for."""

    def __instancecheck__(cls, obj) -> bool:
        native = cls.__dict__.get("_stands_for")
        return isinstance(obj, native) if native else type.__instancecheck__(cls, obj)

    def __subclasscheck__(cls, sub) -> bool:
        native = cls.__dict__.get("_stands_for")
        return issubclass(sub, native) if native else type.__subclasscheck__(cls, sub)


class Comm(MPI.Comm, metaclass=_Accepting):
    """mpi4py's Comm; a bridged communicator given to it stays itself."""

    _stands_for = MPI.Comm

    def __new__(cls, comm=None):
        """As mpi4py's (a program's own subclass too), but a bridged communicator stays."""
        if cls is Comm:
            return comm if isinstance(comm, _Bridged) else MPI.Comm(comm)
        return MPI.Comm.__new__(cls, comm)


class Intracomm(MPI.Intracomm, metaclass=_Accepting):
    """mpi4py's Intracomm; a bridged communicator given to it stays itself."""

    _stands_for = MPI.Intracomm

    def __new__(cls, comm=None):
        """As mpi4py's (a program's own subclass too), but a bridged communicator stays."""
        if cls is Intracomm:
            return comm if isinstance(comm, _Bridged) else MPI.Intracomm(comm)
        return MPI.Intracomm.__new__(cls, comm)


class Prequest(MPI.Prequest, metaclass=_Accepting):
    """mpi4py's Prequest; Startall takes bridged and native persistent requests."""

    _stands_for = MPI.Prequest

    @classmethod
    def Startall(cls, requests) -> None:
        """Start every request of the list."""
        natives = [r for r in requests if not isinstance(r, BridgedPrequest)]
        for r in requests:
            if isinstance(r, BridgedPrequest):
                r.Start()
        if natives:
            MPI.Prequest.Startall(natives)

    startall = Startall


def mpi_exceptions() -> None:
    """From now on the bridge's errors are also mpi4py MPI.Exceptions (`except` catches them).

    An exception class cannot take MPI.Exception as a base once made, so each error class
    gets a twin that has both; MMPIError makes its instances as the twins.
    """
    import inspect

    from . import errors

    for _, cls in inspect.getmembers(errors, inspect.isclass):
        if issubclass(cls, MMPIError) and cls not in MMPIError._twins:
            MMPIError._twins[cls] = type(cls.__name__, (cls, MPI.Exception), {
                "__init__": BaseException.__init__,
                "__str__": BaseException.__str__,
                "__repr__": BaseException.__repr__,
                "__int__": cls.Get_error_class,
                "__module__": cls.__module__,
                "__doc__": cls.__doc__,
            })


def native_of(comm, what: str):
    """The native communicator to hand to mpi4py for `comm` (a bridged one: if it can be)."""
    if not isinstance(comm, _Bridged):
        return comm
    core = comm._core
    if core.spans:
        raise NotBridged(f"{what} on a communicator across the zipper is not bridged: "
                         "one-sided windows and MPI-IO files need one cluster's communicator "
                         "(e.g. from comm.Split_type(MPI.COMM_TYPE_SHARED))")
    return core.coll.comm


class Win(MPI.Win, metaclass=_Accepting):
    """mpi4py's Win; on a bridged communicator inside one cluster, through its native one."""

    _stands_for = MPI.Win

    @classmethod
    def Create(cls, memory, disp_unit=1, info=MPI.INFO_NULL, comm=MPI.COMM_SELF):
        """Create a window (see mpi4py)."""
        return MPI.Win.Create(memory, disp_unit, info, native_of(comm, "Win.Create"))

    @classmethod
    def Allocate(cls, size, disp_unit=1, info=MPI.INFO_NULL, comm=MPI.COMM_SELF):
        """Allocate a window (see mpi4py)."""
        return MPI.Win.Allocate(size, disp_unit, info, native_of(comm, "Win.Allocate"))

    @classmethod
    def Allocate_shared(cls, size, disp_unit=1, info=MPI.INFO_NULL, comm=MPI.COMM_SELF):
        """Allocate a shared window (see mpi4py)."""
        return MPI.Win.Allocate_shared(size, disp_unit, info,
                                       native_of(comm, "Win.Allocate_shared"))

    @classmethod
    def Create_dynamic(cls, info=MPI.INFO_NULL, comm=MPI.COMM_SELF):
        """Create a dynamic window (see mpi4py)."""
        return MPI.Win.Create_dynamic(info, native_of(comm, "Win.Create_dynamic"))


class File(MPI.File, metaclass=_Accepting):
    """mpi4py's File; on a bridged communicator inside one cluster, through its native one."""

    _stands_for = MPI.File

    @classmethod
    def Open(cls, comm, filename, amode=MPI.MODE_RDONLY, info=MPI.INFO_NULL):
        """Open a file (see mpi4py)."""
        return MPI.File.Open(native_of(comm, "File.Open"), filename, amode, info)


def Attach_buffer(buf) -> None:
    """Attach a buffer for buffered sends (bridged ones count against its size too)."""
    MPI.Attach_buffer(buf)
    attached.size = -1 if buf is MPI.BUFFER_AUTOMATIC else len(memoryview(buf).cast("B"))


def Detach_buffer():
    """Detach the buffer once the buffered sends using it have completed."""
    from .request import _engine

    if _engine is not None and attached.pending:
        _engine.wait_for(lambda: all([op.poll() for op, _ in attached.pending]))
    attached.pending = []
    attached.size = 0
    return MPI.Detach_buffer()


__all__ = ["Comm", "Intracomm", "Win", "File", "Prequest", "Attach_buffer", "Detach_buffer",
           "native_of", "mpi_exceptions"]
