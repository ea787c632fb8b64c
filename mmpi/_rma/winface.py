"""What a window across the zipper shows of itself: memory, group, attributes, names.

A mixin of `_window.BridgedWin`, which keeps the fields read here: `_comm` (None once freed),
`_mem`, `_units`, `_sizes`, `_rank`, `_size`, `_flavor`, `_name`, `_errhandler`.
"""

from __future__ import annotations

from .._startup.native import MPI
from ..errors import NotBridged, RankError, UsageError


class WindowFace:
    """The window's own attributes (MPI.WIN_BASE, ...), names, error handler and identity."""

    __slots__ = ()

    def _live(self, name: str):
        if self._comm is None:
            raise UsageError(f"Win.{name}: the window has been freed")
        return self._comm

    def tomemory(self):
        """The window's memory on this rank."""
        self._live("tomemory")
        if self._flavor == MPI.WIN_FLAVOR_DYNAMIC:  # MPI_BOTTOM, as MPI says
            return MPI.buffer.fromaddress(0, 0)
        return MPI.buffer(self._mem)

    def Shared_query(self, rank: int):
        """(memory, disp_unit) of `rank`'s window memory, where this rank can load and store it.

        As MPI 4.1 says for a window not made by Allocate_shared: only this rank's own memory
        is so here (the others' may lie in the other cluster), so any other rank answers with
        size 0; MPI.PROC_NULL asks for the lowest rank with memory (size 0 unless it is this).
        """
        self._live("Shared_query")
        rank = int(rank)
        if rank == MPI.PROC_NULL:
            rank = next((r for r, n in enumerate(self._sizes) if n), MPI.PROC_NULL)
        elif not 0 <= rank < self._size:
            raise RankError(f"Win.Shared_query on rank {self._rank}: rank {rank} is not in the "
                            f"window's group of size {self._size}")
        if rank == self._rank:
            return MPI.buffer(self._mem), self._units[rank]
        return MPI.buffer.fromaddress(0, 0), self._units[rank] if rank >= 0 else 1

    def Get_group(self):
        """The group of the communicator the window was made on."""
        return self._live("Get_group").Get_group()

    def Get_attr(self, keyval: int):
        """WIN_BASE, WIN_SIZE, WIN_DISP_UNIT, WIN_CREATE_FLAVOR, WIN_MODEL."""
        self._live("Get_attr")
        if keyval == MPI.WIN_BASE:
            return MPI.Get_address(self._mem) if len(self._mem) else 0
        if keyval == MPI.WIN_SIZE:
            return len(self._mem)
        if keyval == MPI.WIN_DISP_UNIT:
            return self._units[self._rank]
        if keyval == MPI.WIN_CREATE_FLAVOR:
            return self._flavor
        if keyval == MPI.WIN_MODEL:
            return MPI.WIN_UNIFIED
        raise NotBridged("Win.Get_attr: attributes of a program's own keyvals are not "
                         "bridged on a window across the zipper")

    def Get_info(self):
        """An empty info object: the window keeps no hints."""
        return MPI.Info.Create()

    def Set_info(self, info) -> None:
        """Hints are accepted and not acted on."""

    def Get_name(self) -> str:
        """The window's name."""
        return self._name

    def Set_name(self, name: str) -> None:
        """Name the window."""
        self._name = name

    def Get_errhandler(self):
        """The window's error handler (a new handle, as MPI gives: the caller frees it)."""
        return MPI.Errhandler(self._errhandler)

    def Set_errhandler(self, errhandler) -> None:
        """Errors raise unless ERRORS_ARE_FATAL/ABORT is set (then the job ends).

        The window keeps a handle of its own, as MPI does: freeing the caller's leaves it.
        """
        self._errhandler = MPI.Errhandler(errhandler)

    def __reduce__(self):
        raise ValueError("cannot serialize 'mpi4py.MPI.Win' instance")

    def __bool__(self) -> bool:
        return self._comm is not None

    def __eq__(self, other) -> bool:
        if other is self:
            return True
        return self._comm is None and isinstance(other, MPI.Win) and not other

    def __ne__(self, other) -> bool:
        return not self == other

    __hash__ = object.__hash__

    group = property(Get_group)
    group_size = property(lambda self: self._size)
    group_rank = property(lambda self: self._rank)
    flavor = property(lambda self: self._flavor)
    model = property(lambda self: MPI.WIN_UNIFIED)
    name = property(Get_name, Set_name)
    info = property(Get_info, Set_info)
    attrs = property(lambda self: (self.Get_attr(MPI.WIN_BASE), len(self._mem),
                                   self._units[self._rank]))


def stub_the_rest(cls: type) -> None:
    """Every instance method of mpi4py's Win that `cls` lacks raises NotBridged by name."""
    own = set().union(*(vars(k) for k in cls.__mro__ if k.__module__.startswith("mmpi")))
    for name in dir(MPI.Win):
        raw = MPI.Win.__dict__.get(name)
        if not name.startswith("_") and name not in own and callable(raw) \
                and not isinstance(raw, (classmethod, staticmethod)):
            setattr(cls, name, _not_bridged(name))


def _not_bridged(name: str):
    def call(self, *args, **kwargs):
        raise NotBridged(f"Win.{name} is not bridged on a window across the zipper")

    call.__name__ = name
    return call
