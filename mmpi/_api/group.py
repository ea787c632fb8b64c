"""Groups of the bridged world: ordered sets of world ranks, with mpi4py's `MPI.Group` API.

`Group` is what `MPI.Group` names under mmpi-run: a subclass of mpi4py's, so native groups
(`COMM_SELF.Get_group()`, `MPI.GROUP_EMPTY`) are still instances of it, and its class methods
(`Union`, `Intersection`, `Difference`) take both. A bridged group's MPI handle is
MPI_GROUP_NULL: it lives here, as a tuple of world ranks, and pure functions do its algebra.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from .._startup.native import MPI
from ..errors import RankError, UsageError
from .standin import StandIn, dispatch_unbound, pickle_natively

_native = MPI.Group
UNDEFINED = MPI.UNDEFINED


_here: tuple[int, ...] = ()  # world ranks of this rank's cluster, by native rank


def bind(cluster_ranks) -> None:
    """Let native groups of this cluster be read as world ranks (bridged mode)."""
    global _here
    _here = tuple(cluster_ranks)


def ranks_of(group) -> tuple[int, ...]:
    """The world ranks of a bridged group, or of a native one of this cluster.

    A native group (GROUP_EMPTY, COMM_SELF's group, ...) is read through the cluster's world.
    """
    if isinstance(group, BridgedGroup):
        return group._ranks
    if isinstance(group, _native) and _native.__bool__(group):
        size = group.Get_size()
        if size == 0:
            return ()
        native = _native.Translate_ranks(group, list(range(size)), _native_world())
        if _here and UNDEFINED not in native:
            return tuple(_here[r] for r in native)
    raise UsageError(f"a group of the bridged world was expected, got {group!r}")


def _native_world():
    global _world_group
    if _world_group is None:
        _world_group = MPI.COMM_WORLD.Get_group()
    return _world_group


_world_group = None


def _compare(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    if a == b:
        return MPI.IDENT
    return MPI.SIMILAR if set(a) == set(b) else MPI.UNEQUAL


def _make(ranks, me: int) -> BridgedGroup:
    if not ranks:
        return MPI.GROUP_EMPTY
    return BridgedGroup(tuple(ranks), me)


class Group(_native, metaclass=StandIn):
    """A group of processes (mpi4py's API), native or of the bridged world."""

    _stands_for = _native

    @classmethod
    def Create_from_session_pset(cls, session, pset_name: str):
        """The process set's group: the bridged world's for "mpi://WORLD".

        See `_runtime.facade.Session`.
        """
        if pset_name == "mpi://WORLD":
            return sys.modules["mmpi.MPI"].COMM_WORLD.Get_group()
        return _native.Create_from_session_pset(session, pset_name)

    @classmethod
    def Union(cls, group1, group2):
        """The ranks of `group1`, then those of `group2` that it lacks."""
        if not isinstance(group1, BridgedGroup) and not isinstance(group2, BridgedGroup):
            return _native.Union(group1, group2)
        a, b = ranks_of(group1), ranks_of(group2)
        seen = set(a)
        return _make(a + tuple(r for r in b if r not in seen), _me(group1, group2))

    @classmethod
    def Intersection(cls, group1, group2):
        """The ranks of `group1` that are also in `group2`, in `group1`'s order."""
        if not isinstance(group1, BridgedGroup) and not isinstance(group2, BridgedGroup):
            return _native.Intersection(group1, group2)
        b = set(ranks_of(group2))
        return _make(tuple(r for r in ranks_of(group1) if r in b), _me(group1, group2))

    Intersect = Intersection

    def Compare(self, group) -> int:
        """IDENT (same ranks, same order), SIMILAR (same ranks) or UNEQUAL."""
        if isinstance(self, BridgedGroup) or isinstance(group, BridgedGroup):
            return _compare(ranks_of(self), ranks_of(group))
        return _native.Compare(self, group)

    def Translate_ranks(self, ranks=None, group=None) -> list[int]:
        """The ranks in `group` of these ranks of this group (native and bridged mixed)."""
        if isinstance(self, BridgedGroup):  # called on the class: MPI.Group.Translate_ranks(g)
            return BridgedGroup.Translate_ranks(self, ranks, group)
        if isinstance(group, BridgedGroup):  # this one native: read as world ranks
            return BridgedGroup(ranks_of(self), -1).Translate_ranks(ranks, group)
        return _native.Translate_ranks(self, ranks, group)

    @classmethod
    def Difference(cls, group1, group2):
        """The ranks of `group1` that are not in `group2`, in `group1`'s order."""
        if not isinstance(group1, BridgedGroup) and not isinstance(group2, BridgedGroup):
            return _native.Difference(group1, group2)
        b = set(ranks_of(group2))
        return _make(tuple(r for r in ranks_of(group1) if r not in b), _me(group1, group2))


def _me(*groups) -> int:
    for g in groups:
        if isinstance(g, BridgedGroup):
            return g._me
    return -1


class BridgedGroup(Group):
    """An ordered set of world ranks; this process is world rank `me`."""

    __slots__ = ("_ranks", "_index", "_me", "_freed")

    def __new__(cls, *args, **kwargs):
        """A new group object (its native handle stays MPI_GROUP_NULL)."""
        return _native.__new__(cls)

    def __init__(self, ranks: tuple[int, ...], me: int) -> None:
        self._ranks = ranks
        self._index = {w: i for i, w in enumerate(ranks)}
        self._me = me
        self._freed = False
        if len(self._index) != len(ranks):
            raise UsageError(f"a group cannot hold a rank twice: {list(ranks)}")

    @property
    def world_ranks(self) -> tuple[int, ...]:
        """The world ranks of the group's members, in order (mmpi's own)."""
        return self._ranks

    def __eq__(self, other) -> bool:
        if isinstance(other, BridgedGroup):
            return other._ranks == self._ranks and other._freed == self._freed
        if isinstance(other, _native):  # a native group: GROUP_NULL once this is freed
            return self._freed and not _native.__bool__(other)
        return NotImplemented

    def __ne__(self, other) -> bool:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __hash__(self) -> int:
        return hash(self._ranks)

    def __bool__(self) -> bool:
        return not self._freed

    def __reduce__(self):
        raise ValueError("cannot serialize 'mpi4py.MPI.Group' instance")

    def __repr__(self) -> str:
        return f"<mmpi.Group of world ranks {list(self._ranks)}>"

    def Get_size(self) -> int:
        """Number of processes in the group."""
        return len(self._ranks)

    def Get_rank(self) -> int:
        """Rank of this process in the group (MPI.UNDEFINED if it is not in it)."""
        return self._index.get(self._me, UNDEFINED)

    @property
    def size(self) -> int:
        """Number of processes in the group."""
        return len(self._ranks)

    @property
    def rank(self) -> int:
        """Rank of this process in the group."""
        return self.Get_rank()

    def _check(self, ranks: Sequence[int], call: str) -> list[int]:
        out = []
        for r in ranks:
            r = int(r)
            if not 0 <= r < len(self._ranks):
                raise RankError(f"Group.{call}: rank {r} is not in a group of size "
                                f"{len(self._ranks)}")
            out.append(r)
        if len(set(out)) != len(out):
            raise RankError(f"Group.{call}: a rank is given twice in {out}")
        return out

    def Incl(self, ranks: Sequence[int]):
        """The group of these ranks, in this order."""
        return _make([self._ranks[r] for r in self._check(ranks, "Incl")], self._me)

    def Excl(self, ranks: Sequence[int]):
        """The group without these ranks."""
        drop = set(self._check(ranks, "Excl"))
        return _make([w for i, w in enumerate(self._ranks) if i not in drop], self._me)

    def _ranges(self, ranges, call: str) -> list[int]:
        out: list[int] = []
        for first, last, stride in ranges:
            if stride == 0:
                raise RankError(f"Group.{call}: a range with stride 0")
            stop = last + (1 if stride > 0 else -1)
            out += list(range(first, stop, stride))
        return self._check(out, call)

    def Range_incl(self, ranks):
        """The group of the ranks in these (first, last, stride) ranges."""
        return _make([self._ranks[r] for r in self._ranges(ranks, "Range_incl")], self._me)

    def Range_excl(self, ranks):
        """The group without the ranks in these (first, last, stride) ranges."""
        drop = set(self._ranges(ranks, "Range_excl"))
        return _make([w for i, w in enumerate(self._ranks) if i not in drop], self._me)

    def Translate_ranks(self, ranks: Sequence[int] | None = None, group=None) -> list[int]:
        """The ranks in `group` (default: the world) of these ranks of this group.

        MPI.UNDEFINED where a process is not in `group`; PROC_NULL stays PROC_NULL.
        """
        if ranks is None:
            ranks = range(len(self._ranks))
        where = None if group is None else {w: i for i, w in enumerate(ranks_of(group))}
        out = []
        for r in ranks:
            if r == MPI.PROC_NULL:
                out.append(MPI.PROC_NULL)
                continue
            w = self._ranks[self._check([r], "Translate_ranks")[0]]
            out.append(w if where is None else where.get(w, UNDEFINED))
        return out

    def Dup(self):
        """A copy of this group."""
        return BridgedGroup(self._ranks, self._me)

    def Free(self) -> None:
        """Release the group (it compares equal to MPI.GROUP_NULL afterwards)."""
        self._freed = True

    free = Free


dispatch_unbound(Group, _native)
pickle_natively(_native)


__all__ = ["Group", "BridgedGroup"]
