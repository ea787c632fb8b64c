"""The communicator methods of a bridged communicator: groups, new communicators, attributes.

Communicators made here are bridged too (`create`), whatever their members: one inside a
single cluster sends and reduces natively, one across the zipper gets contexts of its own.
"""

from __future__ import annotations

import copy
import sys

from .._startup.native import MPI
from ..errors import CommError, NotBridged, RankError, UsageError
from . import create as _create
from . import intercore as _inter
from .group import BridgedGroup, Group
from .p2p_methods import as_int
from .request import BridgedRequest

_Comm = MPI.Comm


def _ranks_of_group(group, call: str) -> tuple[int, ...]:
    if isinstance(group, BridgedGroup):
        return group.world_ranks
    if isinstance(group, MPI.Group) and group.Get_size() == 0:
        return ()
    raise UsageError(f"{call}: expected a group of this communicator (from Get_group and the "
                     f"group operations), got {group!r}")


class CommunicatorMethods:
    """Mixin of the bridged communicator: groups, Dup/Split/Create/Free, attributes."""

    __slots__ = ()

    # -- groups --------------------------------------------------------------------------
    def Get_group(self):
        """The group of this communicator (world ranks, in rank order)."""
        core = self._core
        core.check_open("Get_group")
        return BridgedGroup(core.members, core.engine.vrank)

    @property
    def group(self):
        """The group of this communicator."""
        return self.Get_group()

    def Compare(self, comm) -> int:
        """IDENT (the same), CONGRUENT (same ranks, same order), SIMILAR or UNEQUAL."""
        other = getattr(comm, "_core", None)
        if other is None:
            if not isinstance(comm, MPI.Comm) or not MPI.Comm.__bool__(comm):
                raise CommError(f"Compare: {comm!r} is not a communicator")
            me = (self._core.engine.vrank,)  # a native one: COMM_SELF's process at most
            single = MPI.Comm.Get_size(comm) == 1 and self._core.members == me
            return MPI.CONGRUENT if single else MPI.UNEQUAL
        if other is self._core:
            return MPI.IDENT
        if other.members == self._core.members:
            return MPI.CONGRUENT
        return MPI.SIMILAR if set(other.members) == set(self._core.members) else MPI.UNEQUAL

    # -- new communicators ---------------------------------------------------------------
    def _flush(self):
        core = self._core
        core.engine.check()
        if core.pending:
            core.flush()
        return core

    def Dup(self, info=None):
        """A new communicator with the same group (attributes copied)."""
        core = _create.dup(self._flush())
        new = self._wrap(core, "", type(self))  # as MPICH: a duplicate has no name
        # a duplicate keeps the topology and the error handler, as MPI_Comm_dup does
        for field in ("_topo", "_dims", "_periods", "_index", "_edges", "_weights",
                      "_errhandler"):
            if field in self.__dict__:
                setattr(new, field, self.__dict__[field])
        return new

    def Clone(self):
        """A duplicate, as Dup."""
        return self.Dup()

    def Dup_with_info(self, info):
        """A duplicate (the info is not used)."""
        return self.Dup()

    def Idup(self, info=None):
        """A duplicate, and a request that is already complete (the duplicate is made now)."""
        from .._engine.op import completed

        return self.Dup(), BridgedRequest(completed())

    def Idup_with_info(self, info):
        """As Idup."""
        return self.Idup()

    def Split(self, color: int = 0, key: int = 0):
        """A communicator per color, ranks ordered by key (COMM_NULL for MPI.UNDEFINED)."""
        core = _create.split(self._flush(), as_int(color, "color", "Split"),
                             as_int(key, "key", "Split"))
        return MPI.COMM_NULL if core is None else self._wrap(core, "")

    def Split_type(self, split_type: int, key: int = 0, info=None):
        """Split by what processes share (a node never spans the zipper)."""
        core = self._flush()
        if split_type == MPI.UNDEFINED:
            _create.all_here(core)  # as split_type does (see create, Rule 3)
            core.p2p.comm.Split_type(MPI.UNDEFINED, 0)
            return MPI.COMM_NULL
        new = _create.split_type(core, split_type, as_int(key, "key", "Split_type"), info)
        return MPI.COMM_NULL if new is None else self._wrap(new, "")

    def Create(self, group):
        """The communicator of `group` (every rank of this one calls; others get COMM_NULL)."""
        new = _create.create(self._flush(), _ranks_of_group(group, "Create"))
        return MPI.COMM_NULL if new is None else self._wrap(new, "")

    def Create_group(self, group, tag: int = 0):
        """The communicator of `group`; only its members call.

        Not a collective of this communicator: its pending collectives go on (they may need
        ranks that are not in the group), so they are not completed first.
        """
        core = self._core
        core.engine.check()
        new = _create.create_group(core, _ranks_of_group(group, "Create_group"),
                                   as_int(tag, "tag", "Create_group"))
        return self._wrap(new, "")

    def Free(self) -> None:
        """Release this communicator (after its pending operations)."""
        core = self._core
        if core.freed:
            return
        if core is core.engine.communicators[0]:  # as MPICH says it (MPI_ERR_COMM)
            raise CommError(f"Free on rank {core.rank}: MPI_COMM_WORLD is a permanent "
                            "communicator and cannot be freed (MPI_ERR_COMM)")
        core.free()

    def free(self) -> None:
        """Free the communicator if it is not null (mpi4py 4's safe form).

        As mpi4py's: `MPI.COMM_WORLD` itself stays as it is; a copy of it
        (`MPI.Intracomm(MPI.COMM_WORLD)`) becomes a null communicator, the world does not.
        """
        core = self._core
        if core.freed:
            return
        if core is core.engine.communicators[0]:
            if self is not getattr(sys.modules.get("mmpi.MPI"), "COMM_WORLD", None):
                self._core = copy.copy(core)  # this object alone: a freed view of the world
                self._core.freed = True
            return
        self.Free()

    def Disconnect(self) -> None:
        """As Free (a bridged communicator is an intracommunicator)."""
        self.Free()

    # -- attributes (kept on the point-to-point context's native communicator) ----------
    def Get_attr(self, keyval: int):
        """The attribute `keyval` (TAG_UB: the largest user tag)."""
        if keyval == MPI.TAG_UB:
            return self._tag_ub
        return self._core.p2p.comm.Get_attr(keyval)

    def Set_attr(self, keyval: int, attrval) -> None:
        """Cache `attrval` under `keyval` (copied by Dup as its keyval says)."""
        self._core.p2p.comm.Set_attr(keyval, attrval)

    def Delete_attr(self, keyval: int) -> None:
        """Delete the attribute `keyval`."""
        self._core.p2p.comm.Delete_attr(keyval)

    Create_keyval = _Comm.Create_keyval
    Free_keyval = _Comm.Free_keyval

    # -- intercommunicators --------------------------------------------------------------
    def Create_intercomm(self, local_leader, peer_comm, remote_leader, tag=0):
        """The intercommunicator between this group and the one led by `remote_leader`.

        `remote_leader` is a rank of `peer_comm`; every rank of this communicator calls.
        """
        core = self._flush()
        call = "Create_intercomm"
        local_leader = as_int(local_leader, "local leader", call)
        if not 0 <= local_leader < core.size:
            raise RankError(f"{call} on rank {core.rank}: local leader {local_leader} is out "
                            f"of range for a communicator of size {core.size}")
        peer = getattr(peer_comm, "_core", None)
        if core.rank == local_leader and peer is None:
            raise NotBridged(f"{call}: the peer communicator must be a bridged one (COMM_WORLD "
                             f"or one made from it), not {peer_comm!r}")
        inter = _inter.create(core, local_leader, peer, as_int(remote_leader, "remote leader",
                                                               call), as_int(tag, "tag", call))
        return self._wrap(inter, "")  # an intercommunicator object for an InterCore


def group_class():
    """The class that `MPI.Group` names under mmpi-run."""
    return Group


__all__ = ["CommunicatorMethods"]
