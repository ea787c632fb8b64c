"""Collectives of picklable objects: bcast, reduce, allreduce, gather, scatter, alltoall, scan.

Inside a cluster, objects move as pickles through the native non-blocking buffer collectives,
waited on politely: mpi4py's own pickle collectives block inside MPI, and a rank blocked there
drains nothing from the forwarder, which can hang the relay (a large message on its way to
it holds the forwarder's chunk buffers). Across the zipper, the leaders swap one pickle.
Objects are placed by communicator rank, so these work for any membership.
"""

from __future__ import annotations

import functools
import pickle

from ..errors import UsageError
from .common import (
    BYTE,
    T_ALLGATHER_OBJ,
    T_ALLREDUCE_OBJ,
    T_ALLTOALL_OBJ,
    T_BCAST_OBJ,
    T_GATHER_OBJ,
    T_OBJ_REST,
    T_REDUCE_OBJ,
    T_SCATTER_OBJ,
    check_op,
    displs,
)
from .transport import Coll, dumps

# Pickles travel in slots of this size (an 8-byte length, then the pickle's first bytes), so a
# small object takes one native round, as in mpi4py; the rest of a longer pickle follows.
_SLOT = 1024
_HEAD = 8
_ROOM = _SLOT - _HEAD


def _slot(data: bytes) -> bytearray:
    slot = bytearray(_SLOT)
    slot[:_HEAD] = len(data).to_bytes(_HEAD, "little")
    part = data[:_ROOM]
    slot[_HEAD:_HEAD + len(part)] = part
    return slot


def _slot_size(slots, i: int) -> int:
    """Pickle length in slot i; the slot holds all of it if <= _ROOM."""
    return int.from_bytes(slots[i * _SLOT:i * _SLOT + _HEAD], "little")


def _slot_pickle(slots, i: int, rest=b"") -> bytes:
    n = _slot_size(slots, i)
    head = bytes(slots[i * _SLOT + _HEAD:i * _SLOT + _HEAD + min(n, _ROOM)])
    return head + bytes(rest)


def _objects(slots, n: int, rests: dict, own: int = -1, own_data: bytes = b"") -> list:
    """The n objects of `slots`, long ones completed by `rests` (index -> the rest's bytes).

    Slot `own`, if given, is this rank's own object, unpickled from `own_data`.
    """
    return [pickle.loads(own_data) if i == own else
            pickle.loads(_slot_pickle(slots, i, rests.get(i, b""))) for i in range(n)]


def _received(ops: dict) -> dict:
    """Completed `recv_sized` operations by index -> their bytes (copied; released)."""
    out = {i: bytes(Coll.received(op)) for i, op in ops.items()}
    for op in ops.values():
        Coll.release(op)
    return out


def _local_bcast(c: Coll, obj, root: int):
    """Local rank `root`'s `obj`, on every rank of this cluster."""
    data = dumps(obj) if c.lrank == root else b""
    slot = _slot(data) if c.lrank == root else bytearray(_SLOT)
    yield c.local.Ibcast([slot, BYTE], root)
    extra = _slot_size(slot, 0) - _ROOM
    if c.lrank == root:
        if extra > 0:
            yield c.local.Ibcast([data[_ROOM:], BYTE], root)
        return pickle.loads(data)  # a copy, as everywhere else (and as in mpi4py)
    rest = bytearray(max(extra, 0))
    if extra > 0:
        yield c.local.Ibcast([rest, BYTE], root)
    return pickle.loads(_slot_pickle(slot, 0, rest))


def _local_gather(c: Coll, obj, root: int):
    """Every local rank's `obj` (copies), by local rank, at local rank `root` (None elsewhere).

    One native round of slots; ranks whose pickle overflows its slot send the rest to the
    root on the collective context (the root learns who from the slots).
    """
    data = dumps(obj)
    at_root = c.lrank == root
    slots = bytearray(_SLOT * c.nmine) if at_root else None
    yield c.local.Igather([_slot(data), BYTE], [slots, BYTE] if at_root else None, root)
    if not at_root:
        if len(data) > _ROOM:
            yield c.send(memoryview(data)[_ROOM:], c.mine[root], T_OBJ_REST)
        return None
    rests = {i: c.recv_sized(c.mine[i], T_OBJ_REST) for i in range(c.nmine)
             if i != root and _slot_size(slots, i) > _ROOM}
    if rests:
        yield tuple(rests.values())
    return _objects(slots, c.nmine, _received(rests), root, data)


def _local_scatter(c: Coll, objs, root: int):
    """A copy of object i of local rank `root`'s list `objs`, on local rank i."""
    mine = bytearray(_SLOT)
    if c.lrank != root:
        yield c.local.Iscatter(None, [mine, BYTE], root)
        rests = {}
        if _slot_size(mine, 0) > _ROOM:
            op = c.recv_sized(c.mine[root], T_OBJ_REST)
            yield op
            rests = _received({0: op})
        return _objects(mine, 1, rests)[0]
    parts = [dumps(o) for o in objs]
    yield c.local.Iscatter([b"".join(_slot(p) for p in parts), BYTE], [mine, BYTE], root)
    sends = [c.send(memoryview(p)[_ROOM:], c.mine[i], T_OBJ_REST)
             for i, p in enumerate(parts) if i != root and len(p) > _ROOM]
    if sends:
        yield tuple(sends)
    return pickle.loads(parts[root])


def _local_allgather(c: Coll, obj):
    """Every local rank's `obj`, by local rank, on every rank of this cluster."""
    data = dumps(obj)
    slots = bytearray(_SLOT * c.nmine)
    yield c.local.Iallgather([_slot(data), BYTE], [slots, BYTE])
    extra = [max(_slot_size(slots, i) - _ROOM, 0) for i in range(c.nmine)]
    rests = {}
    if any(extra):
        buf = bytearray(sum(extra))
        where = displs(extra)
        yield c.local.Iallgatherv([data[_ROOM:], BYTE], [buf, (extra, where), BYTE])
        rests = {i: buf[d:d + n] for i, (n, d) in enumerate(zip(extra, where, strict=True))}
    return _objects(slots, c.nmine, rests)


def _local_alltoall(c: Coll, objs: list):
    """A copy of object i of every local rank's list, by local rank, on local rank i."""
    parts = [dumps(o) for o in objs]
    slots = bytearray(_SLOT * c.nmine)
    yield c.local.Ialltoall([b"".join(_slot(p) for p in parts), BYTE], [slots, BYTE])
    sends = [c.send(memoryview(p)[_ROOM:], c.mine[j], T_OBJ_REST)
             for j, p in enumerate(parts) if j != c.lrank and len(p) > _ROOM]
    rests = {j: c.recv_sized(c.mine[j], T_OBJ_REST) for j in range(c.nmine)
             if j != c.lrank and _slot_size(slots, j) > _ROOM}
    if sends or rests:
        yield (*sends, *rests.values())
    return _objects(slots, c.nmine, _received(rests), c.lrank, parts[c.lrank])


def _in_order(c: Coll, mine: list, theirs: list) -> list:
    """One list by communicator rank of this cluster's items and the other's (by local rank)."""
    out = [None] * c.size
    for r, x in zip(c.mine, mine, strict=True):
        out[r] = x
    for r, x in zip(c.theirs, theirs, strict=True):
        out[r] = x
    return out


def _reduce_op(op):
    return op if callable(op) else check_op(op, "reduce")


def bcast(c: Coll, obj, root: int):
    if c.here(root):
        x = (c.send_obj(obj, c.peer, T_BCAST_OBJ),) if c.rank == root and c.nother else ()
        obj = yield from _local_bcast(c, obj, c.local_of(root))
        if x:
            yield x
        return obj
    if c.leader:
        obj = yield from c.recv_obj(root, T_BCAST_OBJ)
    return (yield from _local_bcast(c, obj, 0))


def _reduce_here(c: Coll, obj, op, root: int):
    """`op` over this cluster's objects at local rank `root`: in rank order if it must be."""
    items = yield from _local_gather(c, obj, root)
    if items is None:
        return None
    return functools.reduce(op, items)


def reduce(c: Coll, obj, op, root: int):
    op = _reduce_op(op)
    if not c.contiguous:
        items = yield from gather(c, obj, root)
        return None if items is None else functools.reduce(op, items)
    if c.here(root):
        part = yield from _reduce_here(c, obj, op, c.local_of(root))
        if c.rank != root or not c.nother:
            return part
        theirs = yield from c.recv_obj(c.peer, T_REDUCE_OBJ)
        return op(part, theirs) if c.first else op(theirs, part)
    part = yield from _reduce_here(c, obj, op, 0)
    if c.leader:
        yield c.send_obj(part, root, T_REDUCE_OBJ)
    return None


def allreduce(c: Coll, obj, op):
    op = _reduce_op(op)
    if not c.contiguous:
        items = yield from allgather(c, obj)
        return functools.reduce(op, items)
    part = yield from _reduce_here(c, obj, op, 0)
    if c.leader and c.nother:
        theirs = yield from c.swap_obj(part, T_ALLREDUCE_OBJ)
        part = op(part, theirs) if c.first else op(theirs, part)
    return (yield from _local_bcast(c, part, 0))


def gather(c: Coll, obj, root: int):
    if c.here(root):
        part = yield from _local_gather(c, obj, c.local_of(root))
        if c.rank != root:
            return None
        theirs = (yield from c.recv_obj(c.peer, T_GATHER_OBJ)) if c.nother else []
        return _in_order(c, part, theirs)
    part = yield from _local_gather(c, obj, 0)
    if c.leader:
        yield c.send_obj(part, root, T_GATHER_OBJ)
    return None


def scatter(c: Coll, objs, root: int):
    if c.here(root):
        mine = None
        if c.rank == root:
            objs = [None] * c.size if objs is None else list(objs)  # None: None for each
            if len(objs) != c.size:
                raise UsageError(f"scatter: root {root} passed {len(objs)} objects for "
                                 f"{c.size} ranks")
            if c.nother:
                yield c.send_obj([objs[r] for r in c.theirs], c.peer, T_SCATTER_OBJ)
            mine = [objs[r] for r in c.mine]
        return (yield from _local_scatter(c, mine, c.local_of(root)))
    part = (yield from c.recv_obj(root, T_SCATTER_OBJ)) if c.leader else None
    return (yield from _local_scatter(c, part, 0))


def allgather(c: Coll, obj):
    part = yield from _local_allgather(c, obj)
    theirs = None
    if c.leader and c.nother:
        theirs = yield from c.swap_obj(part, T_ALLGATHER_OBJ)
    theirs = (yield from _local_bcast(c, theirs, 0)) if c.nother else []
    return _in_order(c, part, theirs)


def alltoall(c: Coll, objs):
    objs = [None] * c.size if objs is None else list(objs)  # None: None to everyone (mpi4py)
    if len(objs) != c.size:
        raise UsageError(f"alltoall: rank {c.rank} passed {len(objs)} objects for {c.size} "
                         "ranks")
    local = yield from _local_alltoall(c, [objs[r] for r in c.mine])
    if not c.nother:
        return _in_order(c, local, [])
    out = [objs[r] for r in c.theirs]
    gathered = yield from _local_gather(c, out, 0)
    if c.leader:
        theirs = yield from c.swap_obj(gathered, T_ALLTOALL_OBJ)  # [their j][my i]
        mine = yield from _local_scatter(
            c, [[theirs[j][i] for j in range(c.nother)] for i in range(c.nmine)], 0)
    else:
        mine = yield from _local_scatter(c, None, 0)
    return _in_order(c, local, mine)


def scan(c: Coll, obj, op, exclusive: bool):
    """Prefix reduction of objects in rank order (`exclusive`: rank 0 gets None)."""
    op = _reduce_op(op)
    items = yield from allgather(c, obj)
    upto = items[:c.rank] if exclusive else items[:c.rank + 1]
    return functools.reduce(op, upto) if upto else None


def barrier(c: Coll):
    """A barrier through the object machinery (for communicators the buffer one cannot do)."""
    yield from allgather(c, None)
