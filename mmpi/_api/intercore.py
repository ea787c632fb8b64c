"""Intercommunicators between bridged groups: how they are made, duplicated and merged.

An intercommunicator here is a local and a remote group of world ranks (`InterCore`).

Rule 1: its two contexts address the remote group: a destination rank and a source rank are
        remote-group ranks, as MPI says, so the point-to-point methods of an intracommunicator
        work on it unchanged. Their native communicator holds the members of both groups in
        this cluster (the group of the one with the lowest world rank first).
Rule 2: its collective calls are a collective on a private duplicate of the local group's
        communicator (`local`) plus messages between the two groups' leaders (local rank
        0) on its collective context (intercomm.py).
Rule 3: making one: each group knows the other's world ranks (Create_intercomm: the leaders
        swap them over the peer communicator, on its collective context with a tag of their
        own, then each tells its group; Create_from_groups: given), then the members of both
        agree on a context pair and make their native communicator as Create_group does,
        with COMM_WORLD, which holds every rank, as the parent.
"""

from __future__ import annotations

import pickle
import zlib

from .._collectives import objects
from .._engine.context import Context
from .._engine.crossings import CREATE_TAGS
from ..errors import RankError
from . import create as _create
from .core import Core

_TAGS = 1 << 20  # user tags are folded into this many (the ranges below must stay apart)
_T_SWAP = CREATE_TAGS + _TAGS  # the leaders' swap on the peer communicator: this + tag
_T_UNION = 2 * _TAGS  # Create_group tags of the union's communicators: this + tag


class InterCore(Core):
    """An intercommunicator on this rank: `members` are the remote group's world ranks."""

    def __init__(self, engine, local_members: tuple[int, ...], remote: tuple[int, ...],
                 rank: int, p2p: Context, coll: Context, local: Core, tag: int) -> None:
        super().__init__(engine, remote, rank, p2p, coll)
        self.local_members = local_members
        self.local = local  # a private duplicate of the local group's communicator (Rule 2)
        self.local_comm = None  # the bridged object over `local`, made by intercomm.py
        self.tag = tag  # folded into _TAGS: Dup and Merge make their unions with it

    def start(self, name: str) -> None:
        """A collective call `name` starts: its steps need no `Coll` (intercomm.py)."""
        self.call_name = name

    def free(self) -> None:
        super().free()
        self.local.free()


def world_of(engine) -> Core:
    """The core of COMM_WORLD, which holds every rank (the parent of Rule 3)."""
    return engine.communicators[0]


def fold(tag) -> int:
    """A user tag (or Create_from_groups' string tag) as an int below _TAGS."""
    if isinstance(tag, str):
        return zlib.crc32(tag.encode()) % _TAGS
    return int(tag) % _TAGS


def create(local: Core, local_leader: int, peer: Core, remote_leader: int,
           tag: int) -> InterCore:
    """Create_intercomm on every rank of `local` (Rule 3)."""
    engine = local.engine
    tag = fold(tag)
    remote = None
    if local.rank == local_leader:
        p2p = engine.p2p
        if not 0 <= remote_leader < peer.size:
            raise RankError(f"Create_intercomm on rank {local.rank}: remote leader "
                            f"{remote_leader} is out of range for the peer communicator of "
                            f"size {peer.size}")
        mine = memoryview(pickle.dumps(local.members))
        send = p2p.isend(peer.coll, mine, remote_leader, _T_SWAP + tag)
        recv = p2p.irecv(peer.coll, None, remote_leader, _T_SWAP + tag, "Create_intercomm")
        engine.wait_for(lambda: send.poll() and recv.poll())
        remote = pickle.loads(recv.obj)
        recv.release()
    remote = local.run("Create_intercomm",
                       objects.bcast(local.collective, remote, local_leader))
    return build(_create.dup(local), local.members, tuple(remote), tag)


def from_groups(engine, local_world: tuple[int, ...], remote_world: tuple[int, ...],
                tag) -> InterCore:
    """Intercomm.Create_from_groups on every rank of the local group (Rule 3)."""
    tag = fold(tag)
    local = _create.create_group(world_of(engine), local_world, _T_UNION + tag)
    return build(local, local_world, remote_world, tag)


def build(local: Core, local_world: tuple[int, ...], remote: tuple[int, ...],
          tag: int) -> InterCore:
    """The intercommunicator of `local` and the `remote` group; both groups' members call.

    `local` is a private communicator of the local group (Rule 2).
    """
    engine = local.engine
    world = world_of(engine)
    union = union_of(local_world, remote)
    members, native, pair = _create.group_parts(world, union, _T_UNION + tag,
                                                "Create_intercomm")
    ids = _create.context_ids(engine, pair)
    # native rank -> remote-group rank of the members in this cluster (-1: the local group)
    where = {w: i for i, w in enumerate(remote)}
    here = tuple(where.get(world.members[r], -1) for r in members
                 if world.p2p.local_of[r] >= 0)
    p2p = Context(ids[0], native, remote, here)
    coll = Context(ids[1], native.Split(0, native.Get_rank()), remote, here, "coll")
    engine.register(p2p)
    engine.register(coll)
    rank = local_world.index(engine.vrank)
    return InterCore(engine, local_world, remote, rank, p2p, coll, local, tag)


def union_of(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    """Both groups' world ranks, the group of the lowest world rank first.

    The same on every member of either group.
    """
    return a + b if min(a) < min(b) else b + a


def dup(inter: InterCore) -> InterCore:
    """A new intercommunicator of the same groups."""
    return build(_create.dup(inter.local), inter.local_members, inter.members, inter.tag)


def split(inter: InterCore, mine: list, theirs: list, color: int, key: int) -> InterCore | None:
    """Split: the ranks of both groups that gave `color`, each group ordered by key.

    `mine` and `theirs`: every (color, key) of the local and of the remote group, by rank.
    None (COMM_NULL) for MPI.UNDEFINED or where the remote side would be empty.
    """
    def chosen(pairs, members):
        return tuple(members[r] for _, r in sorted((k, r) for r, (c, k) in enumerate(pairs)
                                                   if c == color))

    local = _create.split(inter.local, color, key)  # None for MPI.UNDEFINED
    if local is None:
        return None
    there = chosen(theirs, inter.members)
    if not there:
        local.free()
        return None
    return build(local, chosen(mine, inter.local_members), there, inter.tag)


def merge(inter: InterCore, order: tuple[int, ...]) -> Core:
    """The intracommunicator of both groups' ranks in `order` (world ranks)."""
    return _create.create_group(world_of(inter.engine), order, _T_UNION + inter.tag)


__all__ = ["InterCore", "create", "from_groups", "dup", "split", "merge", "fold", "union_of"]
