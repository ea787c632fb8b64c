"""The bridged communicator: mpi4py's `Intracomm` API across the zipper.

`Comm` (and `topology.Cartcomm`, `.Graphcomm`, `.Distgraphcomm`) is a subclass of mpi4py's class,
so `isinstance(comm, MPI.Intracomm)` holds; the handle inside the object stays MPI_COMM_NULL, so
no mpi4py function handed one by mistake can silently work on a single cluster. Its `handle`
(and `toint`, `py2f`, mpi4py's C API) is a native communicator's where one stands for it (all
ranks in one cluster), else raises `NotBridged` (see `bridged._Bridged._native_comm`). Every
method of mpi4py's class that the bridge does not provide raises `NotBridged`, naming the call.
"""

from __future__ import annotations

from .._startup.native import MPI
from ..errors import NotBridged
from .bridged import _Bridged
from .topology import Cartcomm, Distgraphcomm, Graphcomm, TopologyMethods

_Intracomm = MPI.Intracomm


class Comm(TopologyMethods, _Bridged, _Intracomm):
    """A communicator of the bridged world (mirrors mpi4py.MPI.Intracomm)."""


def _not_bridged(cls_name: str, name: str):
    def call(self, *args, **kwargs):
        raise NotBridged(f"{name} is not bridged yet: mmpi does not provide "
                         f"MPI.{cls_name}.{name} on a bridged communicator")

    call.__name__ = name
    call.__doc__ = "Not bridged yet: raises NotBridged."
    return call


def _stub_the_rest(cls, native) -> None:
    """Every public callable of mpi4py's class that `cls` lacks raises NotBridged by name."""
    mine = set()
    for base in cls.__mro__:
        if base is native or base in native.__mro__:
            break
        mine |= set(vars(base))
    for name in dir(native):
        if name.startswith("_") or name in mine:
            continue
        attr = getattr(native, name)
        if callable(attr) and not isinstance(attr, type):
            setattr(cls, name, _not_bridged(native.__name__, name))


for _cls, _native in ((Comm, _Intracomm), (Cartcomm, MPI.Cartcomm), (Graphcomm, MPI.Graphcomm),
                      (Distgraphcomm, MPI.Distgraphcomm)):
    _stub_the_rest(_cls, _native)
del _cls, _native

__all__ = ["Comm", "Cartcomm", "Graphcomm", "Distgraphcomm", "_Bridged"]
