"""One-sided operations at their target, pure: where a datatype's bytes lie, what they do.

No communication here (`Pack` and `Reduce_local` are local), as a wire protocol has none.

Rule 1: a target datatype travels as its runs, (offset, length) pairs of bytes from the target
        address, worked out at the origin by packing byte positions through the datatype: any
        datatype MPI can pack, derived ones included, with no datatype to rebuild at the
        target.
Rule 2: an accumulate applies `target = origin op target` element by element over the runs'
        bytes joined, in the one predefined type the datatype is made of; REPLACE writes,
        NO_OP only reads. The bytes it replaced are its result (Get_accumulate,
        Fetch_and_op).
"""

from __future__ import annotations

import numpy as np

from .._startup.native import MPI
from ..errors import UsageError

_RUNS: dict[tuple[int, int], list[tuple[int, int]]] = {}  # (predefined handle, count) -> runs


def runs(dt: MPI.Datatype, count: int) -> list[tuple[int, int]]:
    """Where `count` elements of `dt` lie, as (offset, length) runs from the target address."""
    if count == 0:
        return []
    if dt.is_predefined:
        key = (dt.handle, count)
        found = _RUNS.get(key)
        if found is None:
            found = _RUNS[key] = [(0, count * dt.Get_size())]
        return found
    lb, extent = dt.Get_extent()
    tlb, textent = dt.Get_true_extent()
    if tlb < 0 or lb < 0:
        raise ValueError("a target datatype that reaches below its address (negative lower "
                         "bound)")
    need = tlb + textent + (count - 1) * extent
    # Pack takes the element count from the buffer's length: one element of a type that
    # spans all `count` where their extents end before their bytes do
    one, span = (dt, count * extent) if count * extent >= need else (None, need)
    if one is None:
        many = dt.Create_contiguous(count)
        one = many.Create_resized(0, need).Commit()
        many.Free()
    where = np.arange(span, dtype=np.int64)
    spots = np.zeros(dt.Get_size() * count, np.int64)
    try:
        for k in range(4 if span < 1 << 32 else 8):  # each byte of the positions, packed
            out = np.empty(len(spots), np.uint8)
            one.Pack(((where >> (8 * k)) & 0xFF).astype(np.uint8), out, 0, MPI.COMM_SELF)
            spots |= out.astype(np.int64) << (8 * k)
    finally:
        if one is not dt:
            one.Free()
    cuts = np.flatnonzero(np.diff(spots) != 1) + 1
    starts = np.concatenate(([0], cuts))
    ends = np.concatenate((cuts, [len(spots)]))
    return [(int(spots[a]), int(b - a)) for a, b in zip(starts, ends, strict=True)]


def reach(at: int, found: list[tuple[int, int]]) -> tuple[int, int]:
    """The lowest and the highest byte (exclusive) the runs touch from address `at`."""
    if not found:
        return at, at
    return at + min(o for o, _ in found), at + max(o + n for o, n in found)


def put(mem: memoryview, at: int, found, data) -> None:
    """Write `data` over the runs."""
    pos = 0
    for off, n in found:
        mem[at + off:at + off + n] = data[pos:pos + n]
        pos += n


def get(mem: memoryview, at: int, found) -> bytes:
    """The bytes of the runs, joined."""
    if len(found) == 1:
        off, n = found[0]
        return bytes(mem[at + off:at + off + n])
    return b"".join(mem[at + off:at + off + n] for off, n in found)


def accumulate(mem: memoryview, at: int, found, data, op: MPI.Op,
               base: MPI.Datatype) -> bytes:
    """Combine `data` into the runs with `op` (Rule 2); the bytes they held before."""
    old = get(mem, at, found)
    if op == MPI.NO_OP or not old:  # nothing to combine (MPI allows a count of 0, of any type)
        return old
    if op == MPI.REPLACE:
        put(mem, at, found, data)
        return old
    new = bytearray(old)
    op.Reduce_local([data, base], [new, base])
    put(mem, at, found, new)
    return old


def compare_and_swap(mem: memoryview, at: int, size: int, compare, origin) -> bytes:
    """Write `origin` at `at` if the `size` bytes there equal `compare`; what they were."""
    old = bytes(mem[at:at + size])
    if old == bytes(compare):
        mem[at:at + size] = origin
    return old


def accumulating(op, name: str) -> MPI.Op:
    """`op` if an accumulate may use it: predefined ops only (MPI)."""
    if not isinstance(op, MPI.Op) or not (op.is_predefined or op in (MPI.REPLACE, MPI.NO_OP)):
        raise UsageError(f"Win.{name}: only predefined ops accumulate (MPI), got {op!r}")
    return op


def wire_type(dt: MPI.Datatype):
    """A datatype as an operation's message carries it: a predefined one by its handle.

    Pickling a datatype costs ~150 us; predefined handles are the same in both clusters.
    """
    return dt.py2f() if dt.is_predefined else dt


def from_wire(dt) -> MPI.Datatype:
    """The datatype `wire_type` sent."""
    return dt if isinstance(dt, MPI.Datatype) else MPI.Datatype.f2py(dt)


__all__ = ["runs", "reach", "put", "get", "accumulate", "compare_and_swap", "accumulating",
           "wire_type", "from_wire"]
