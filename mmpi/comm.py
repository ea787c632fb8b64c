"""The bridged communicator: mpi4py's `Intracomm` API over a communicator core.

`Comm` is a subclass of mpi4py's `MPI.Intracomm`, so programs that check `isinstance(comm,
MPI.Intracomm)` see one; its MPI handle is MPI_COMM_NULL, so no native function can be handed
it by mistake and silently work on one cluster alone. Every method of mpi4py's class that the
bridge does not provide raises `NotBridged`, naming the call.
"""

from __future__ import annotations

from ._coll_api import CollectiveMethods
from ._communicator import Core
from ._native import MPI
from ._p2p_api import PointToPointMethods
from .errors import NotBridged
from .wire.layout import Layout

_Intracomm = MPI.Intracomm


class Comm(PointToPointMethods, CollectiveMethods, _Intracomm):
    """A communicator of the bridged world (mirrors mpi4py.MPI.Intracomm)."""

    def __new__(cls, *args, **kwargs):
        """A new bridged communicator object (its native handle stays MPI_COMM_NULL)."""
        return _Intracomm.__new__(cls)

    def __init__(self, core: Core, name: str) -> None:
        self._core = core
        self._name = name
        self._tag_ub = core.engine.local.Get_attr(MPI.TAG_UB)

    # -- identity ------------------------------------------------------------------------
    def __eq__(self, other) -> bool:
        if isinstance(other, Comm):
            return other is self
        if isinstance(other, _Intracomm) or isinstance(other, MPI.Comm):
            return False  # a native communicator (COMM_NULL included) is never this one
        return NotImplemented

    def __ne__(self, other) -> bool:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __hash__(self) -> int:
        return id(self)

    def __bool__(self) -> bool:
        return not self._core.freed

    def __repr__(self) -> str:
        core = self._core
        return (f"<mmpi.Comm {self._name or '(unnamed)'} rank {core.rank}/{core.size} "
                f"({core.engine.cluster})>")

    def Get_rank(self) -> int:
        """Rank of this process in the communicator."""
        return self._core.rank

    def Get_size(self) -> int:
        """Number of processes in the communicator."""
        return self._core.size

    @property
    def rank(self) -> int:
        """Rank of this process in the communicator."""
        return self._core.rank

    @property
    def size(self) -> int:
        """Number of processes in the communicator."""
        return self._core.size

    @property
    def cluster(self) -> str:
        """Name of this process's cluster: 'low' or 'high'."""
        return self._core.engine.cluster

    @property
    def layout(self) -> Layout:
        """Which cluster runs each rank of this communicator (mmpi's own, not mpi4py's)."""
        owners = self._core.engine.layout.owners
        return Layout.from_owners([owners[w] for w in self._core.members])

    def Get_name(self) -> str:
        """Name of the communicator."""
        return self._name

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

    def Is_inter(self) -> bool:
        """A bridged communicator is an intracommunicator."""
        return False

    def Is_intra(self) -> bool:
        """A bridged communicator is an intracommunicator."""
        return True

    @property
    def is_inter(self) -> bool:
        """False: an intracommunicator."""
        return False

    @property
    def is_intra(self) -> bool:
        """True: an intracommunicator."""
        return True

    def Get_attr(self, keyval: int):
        """Communicator attributes; TAG_UB is the largest user tag."""
        if keyval == MPI.TAG_UB:
            return self._tag_ub
        return self._core.engine.local.Get_attr(keyval)

    def Abort(self, errorcode: int = 0):
        """Abort this cluster's job; mmpi-run then stops the rest of the bridged job."""
        self._core.engine.local.Abort(errorcode)


def _not_bridged(name: str):
    def call(self, *args, **kwargs):
        raise NotBridged(f"{name} is not bridged yet: mmpi does not provide "
                         f"MPI.Intracomm.{name} on a communicator that spans the zipper")

    call.__name__ = name
    call.__doc__ = "Not bridged yet: raises NotBridged."
    return call


def _stub_the_rest() -> None:
    """Every public method of mpi4py's Intracomm that Comm lacks raises NotBridged by name."""
    for name in dir(_Intracomm):
        if name.startswith("_") or name in vars(Comm):
            continue
        if any(name in vars(base) for base in (PointToPointMethods, CollectiveMethods)):
            continue
        attr = getattr(_Intracomm, name)
        if callable(attr) and not isinstance(attr, type):
            setattr(Comm, name, _not_bridged(name))


_stub_the_rest()

__all__ = ["Comm"]
