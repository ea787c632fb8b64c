"""Communicators made from communicators: Dup, Split, Create, Create_group, Split_type.

A new communicator is a group of world ranks plus two contexts (`core.Core`). The
ranks of its members in this cluster get a native communicator of their own (a native split
of the parent's, ordered by the new ranks), so their messages and collectives stay native.

Rule 1: a communicator that spans both clusters needs context ids that every member agrees
        on (the envelope names the context): each member tells the others which ids it uses,
        and all take the lowest pair none of them uses. The exchange rides on the call's own
        collective over the parent (an allgather that Split needs anyway).
Rule 2: a communicator inside one cluster never sees the forwarder: its contexts get ids of
        this process's own (negative), with no exchange.
Rule 3: a blocking native call (Comm_split, Comm_create_group, ...) is entered only once every
        rank that makes it is known to have come to this call (after the exchange, or a
        native barrier waited politely). Inside it this rank runs no Python, so it advances
        none of its pending bridged calls, which a rank still on its way might wait for
        (MPI's progress rule: a blocking call must not hold up the pending ones).
"""

from __future__ import annotations

import pickle

from .._collectives import objects
from .._engine.context import Context
from .._engine.crossings import CREATE_TAGS
from .._engine.engine import Engine
from .._startup.native import MPI
from ..errors import RankError, UsageError
from .core import Core

UNDEFINED = MPI.UNDEFINED
_T_CREATE_GROUP = CREATE_TAGS  # Create_group's messages on the parent's collective context:
#                                this + tag


def _used(engine: Engine) -> int:
    """The context pairs this process uses, as a bit mask (pair k: ids 2k and 2k+1)."""
    mask = 0
    for cid in engine.contexts:
        if cid >= 0:
            mask |= 1 << (cid // 2)
    return mask


def _free_pair(masks) -> int:
    used = 0
    for m in masks:
        used |= m
    k = 1
    while used >> k & 1:
        k += 1
    return k


def _local_ids(engine: Engine) -> tuple[int, int]:
    """Two context ids of this process's own, for a communicator inside one cluster."""
    low = min([cid for cid in engine.contexts if cid < 0], default=0)
    return low - 1, low - 2


def _build(parent: Core, members: tuple[int, ...], native: MPI.Intracomm,
           pair: int | None) -> Core:
    """The core of the communicator of parent ranks `members` (in new-rank order).

    `native` holds its members in this cluster, ordered by new rank; `pair` is the agreed
    context pair of a spanning communicator (None: inside one cluster).
    """
    engine = parent.engine
    world = tuple(parent.members[r] for r in members)
    here = tuple(i for i, r in enumerate(members) if parent.p2p.local_of[r] >= 0)
    if native.Get_size() != len(here):
        raise UsageError(f"communicator creation on rank {parent.rank}: the native "
                         f"communicator has {native.Get_size()} ranks, expected {len(here)}")
    ids = context_ids(engine, pair)
    p2p = Context(ids[0], native, world, here)
    # a Split, not a Dup: the program's attribute copy callbacks run once per communicator
    coll = Context(ids[1], native.Split(0, native.Get_rank()), world, here, "coll")
    engine.register(p2p)
    engine.register(coll)
    return Core(engine, world, members.index(parent.rank), p2p, coll)


def _spans(parent: Core, members) -> bool:
    local = parent.p2p.local_of
    inside = [local[r] >= 0 for r in members]
    return any(inside) and not all(inside)


def _exchange(parent: Core, name: str, mine):
    """Every parent rank's `mine`, by parent rank: one collective call on the parent."""
    return parent.run(name, objects.allgather(parent.collective, mine))


def dup(parent: Core) -> Core:
    """The same group with new contexts.

    Attributes are copied natively: they live on the point-to-point context's native
    communicator, which is duplicated.
    """
    # the native Dup first: its attribute copy callbacks may make communicators themselves;
    # non-blocking, and waited for politely (Rule 3)
    native, req = parent.p2p.comm.Idup()
    parent.engine.wait_one(req)
    masks = _exchange(parent, "Dup", _used(parent.engine)) if parent.spans else None
    pair = _free_pair(masks) if masks else None
    return _build(parent, tuple(range(parent.size)), native, pair)


def split(parent: Core, color: int, key: int) -> Core | None:
    """The communicator of the parent ranks that gave the same `color`, ordered by `key`."""
    if color != UNDEFINED and color < 0:
        raise UsageError(f"Split on rank {parent.rank}: color {color} must be >= 0 or "
                         "MPI.UNDEFINED")
    info = _exchange(parent, "Split", (color, key, _used(parent.engine)))
    if color == UNDEFINED:
        parent.p2p.comm.Split(UNDEFINED, 0)
        return None
    members = tuple(r for _, r in sorted((k, r) for r, (c, k, _) in enumerate(info)
                                         if c == color))
    pair = _free_pair(info[r][2] for r in members) if _spans(parent, members) else None
    # One native split for all the new communicators of this cluster: a group is named by
    # its first member, which no other group has.
    native = parent.p2p.comm.Split(min(members), members.index(parent.rank))
    return _build(parent, members, native, pair)


def create(parent: Core, world_ranks: tuple[int, ...]) -> Core | None:
    """The communicator of the group `world_ranks` (collective over the whole parent)."""
    members = _members(parent, world_ranks, "Create")
    masks = _exchange(parent, "Create", _used(parent.engine))
    if parent.rank not in members:
        parent.p2p.comm.Split(UNDEFINED, 0)
        return None
    pair = _free_pair(masks[r] for r in members) if _spans(parent, members) else None
    # MPI 2.2: disjoint groups, each rank passing its own, make one communicator each; a
    # group is named by its first member, which no other group has
    native = parent.p2p.comm.Split(min(members), members.index(parent.rank))
    return _build(parent, members, native, pair)


def create_group(parent: Core, world_ranks: tuple[int, ...], tag: int) -> Core:
    """The communicator of the group `world_ranks`; only its members call."""
    members, native, pair = group_parts(parent, world_ranks, tag, "Create_group")
    return _build(parent, members, native, pair)


def group_parts(parent: Core, world_ranks: tuple[int, ...], tag: int, call: str):
    """(members, native communicator, context pair) of the communicator of `world_ranks`.

    Only its members make it (Create_group; intercommunicators).
    """
    members = _members(parent, world_ranks, call)
    if parent.rank not in members:
        raise UsageError(f"{call} on rank {parent.rank}: only the group's members "
                         "call it, and this rank is not one")
    # the members' agreement also tells each that the others have come (Rule 3)
    pair = _agree(parent, members, _T_CREATE_GROUP + tag) if len(members) > 1 else None
    if not _spans(parent, members):
        pair = None
    natives = [parent.p2p.local_of[r] for r in members if parent.p2p.local_of[r] >= 0]
    group = parent.p2p.comm.Get_group().Incl(natives)
    # on the engine's maker, a superset that nothing probes (Engine.maker)
    native = parent.engine.maker.Create_group(group, tag)
    group.Free()
    return members, native, pair


def context_ids(engine: Engine, pair: int | None) -> tuple[int, int]:
    """The two context ids of agreed pair `pair` (None: two of this process's own)."""
    return (2 * pair, 2 * pair + 1) if pair is not None else _local_ids(engine)


def _agree(parent: Core, members: tuple[int, ...], tag: int) -> int:
    """A context pair the `members` agree on, by messages among them alone (Rule 1)."""
    p2p, engine = parent.engine.p2p, parent.engine
    first = members[0]
    mine = memoryview(pickle.dumps(_used(engine)))
    if parent.rank == first:
        ops = [p2p.irecv(parent.coll, None, r, tag, "Create_group") for r in members[1:]]
        engine.wait_for(lambda: all([op.poll() for op in ops]))
        masks = [_used(engine)] + [pickle.loads(op.obj) for op in ops]
        pair = _free_pair(masks)
        reply = memoryview(pickle.dumps(pair))
        sends = [p2p.isend(parent.coll, reply, r, tag) for r in members[1:]]
        engine.wait_for(lambda: all([op.poll() for op in sends]))
        return pair
    send = p2p.isend(parent.coll, mine, first, tag)
    op = p2p.irecv(parent.coll, None, first, tag, "Create_group")
    engine.wait_for(lambda: send.poll() and op.poll())
    return pickle.loads(op.obj)


def split_type(parent: Core, split_type: int, key: int, info=None) -> Core | None:
    """Split by what processes share (a node): never across the zipper (Rule 2)."""
    all_here(parent)
    native = parent.p2p.comm.Split_type(split_type, key, info or MPI.INFO_NULL)
    if native == MPI.COMM_NULL:
        return None
    members = tuple(native.allgather(parent.rank))  # by native rank, which follows the key
    return _build(parent, members, native, None)


def all_here(parent: Core) -> None:
    """Wait, the bridge progressing, until every rank of this cluster in `parent` is here."""
    parent.engine.wait_one(parent.p2p.comm.Ibarrier())


def _members(parent: Core, world_ranks, call: str) -> tuple[int, ...]:
    out = []
    for w in world_ranks:
        r = parent.p2p.from_world.get(w)
        if r is None:
            raise RankError(f"{call} on rank {parent.rank}: the group holds world rank {w}, "
                            "which is not in this communicator")
        out.append(r)
    return tuple(out)


__all__ = ["dup", "split", "create", "create_group", "group_parts", "context_ids",
           "split_type", "all_here"]
