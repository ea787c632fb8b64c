"""What every family of collectives shares: internal tags, ops, size checks, native helpers.

Rule 1: all ranks of a cluster issue the same native collectives in the same order, and the
        two leaders (or pairs of ranks) exchange internal messages on the communicator's
        collective context with a tag per collective kind, so consecutive collectives can
        never be confused.
Rule 2: cross-cluster reductions combine in rank order (the first block's partial op the
        second's) on both sides, so allreduce results are bit-identical on every rank; for
        commutative ops this is done in place, needing only one extra buffer.
"""

from __future__ import annotations

import itertools
import zlib

import numpy as np

from .._engine.buffers import Typed, Vector
from .._startup.native import MPI
from ..errors import UsageError
from ..wire.knobs import env_flag
from .transport import Coll

IN_PLACE = MPI.IN_PLACE
BYTE = MPI.BYTE
I64 = MPI.INT64_T

# Internal tags, one per collective kind (Rule 1).
T_BARRIER, T_BCAST, T_REDUCE, T_ALLREDUCE, T_ALLTOALL, T_ALLTOALLV = 1, 2, 3, 4, 5, 6
T_GATHER, T_GATHERV, T_SCATTER, T_SCATTERV, T_ALLGATHER, T_ALLGATHERV = 7, 8, 9, 10, 11, 12
T_RSB, T_SCAN, T_OBJ_REST = 13, 14, 16
# the pickle forms' own (a crossing of one is never taken for another's)
T_BCAST_OBJ, T_REDUCE_OBJ, T_ALLREDUCE_OBJ, T_GATHER_OBJ = 17, 18, 19, 20
T_SCATTER_OBJ, T_ALLGATHER_OBJ, T_ALLTOALL_OBJ = 21, 22, 23
T_ALLTOALLV_BLOCK = 24  # Alltoallv's large blocks, straight to their ranks
T_GENERIC = 25  # the generic algorithms' messages (see generic.py)
T_ALLTOALLW = 26  # Alltoallw's blocks, one message per pair of ranks

# mpi4py's predefined reduction ops live as long as the module, so their ids are never
# reused: the common case is one set lookup. All of them are commutative.
PREDEFINED_NAMES = ("SUM", "PROD", "MAX", "MIN", "LAND", "BAND", "LOR", "BOR", "LXOR", "BXOR",
                    "MAXLOC", "MINLOC")
PREDEFINED_OPS = frozenset(id(getattr(MPI, name)) for name in PREDEFINED_NAMES)


# Rule 3: every rank of a cluster shows the others what it calls (the collective, its root,
# its size) before the call's own steps: an allgather of three numbers. A mismatch is then
# an error on every rank of the cluster at once, naming who called what, where the native
# collectives would hang or mix the data (MMPI_CHECK_COLLECTIVES=0 turns it off).
CHECK = env_flag("MMPI_CHECK_COLLECTIVES")


def _kind(name: str) -> str:
    """The collective a call is, whether blocking or not (Ibcast matches Bcast here)."""
    if name[:1] == "I" and name[1:2].islower():
        return name[1].upper() + name[2:]
    return name


def checking(c: Coll) -> bool:
    """Whether this call's ranks in this cluster check each other first (Rule 3)."""
    return CHECK and c.nmine >= 2


def checked(c: Coll, steps, root: int = -1, nbytes: int = -1):
    """`steps`, after checking that this cluster's ranks all make this call (Rule 3).

    `root`: -1 for none; `nbytes`: this rank's size, -1 where sizes may differ.
    """
    if not checking(c):
        return steps
    return _checked(c, steps, root, nbytes)


_KINDS: dict[str, int] = {}

# Each rank's part of the check's allgather: the 3 numbers, then up to CARRY bytes of a small
# collective's data, which then needs no native step of its own (see carried.py).
WORDS = 3 + 8
CARRY = 8 * (WORDS - 3)


def kind_of(c: Coll) -> int:
    """The number that stands for this call's collective in the check."""
    return kind_named(c.name)


def kind_named(name: str) -> int:
    """The number that stands for collective call `name` in the check."""
    kind = _KINDS.get(name)
    if kind is None:
        kind = _KINDS[name] = zlib.crc32(_kind(name).encode())
    return kind


def start_check(c: Coll, root: int, nbytes: int):
    """Fill in and start this rank's part of the check; (buffer of int64 words, request).

    The buffer holds this rank's WORDS words, then every rank's; its part's data words
    (bytes 24 on) are the caller's to fill before `req.Start()`.
    """
    both, req = c.check_request(WORDS)
    both[0], both[1], both[2] = kind_of(c), root, nbytes
    return both, req


def verify_check(c: Coll, both) -> None:
    """A UsageError naming who called what, unless this cluster's ranks all agree (Rule 3)."""
    flat = both.tolist()
    mine = flat[:3]
    for at in range(WORDS, len(flat), WORDS):
        if flat[at:at + 3] != mine:
            rows = [flat[i:i + 3] for i in range(WORDS, len(flat), WORDS)]
            raise UsageError(_mismatch(c, rows, mine[0]))


def _checked(c: Coll, steps, root: int, nbytes: int):
    # a persistent allgather, started anew for each call: cheaper than an Iallgather
    # (docs/performance.md, "Collective checks"); a communicator's calls run one at a time
    both, req = start_check(c, root, nbytes)
    req.Start()
    yield req
    verify_check(c, both)
    return (yield from steps)


def _mismatch(c: Coll, rows: list, kind: int) -> str:
    """Who called what: "rank 3 called Reduce while ranks 0-2 called Bcast", and so on."""
    names = {zlib.crc32(n.encode()): n for n in _NAMES}
    ranks = c.mine
    for field, _what in ((0, "called"), (1, "root"), (2, "size")):
        values = [r[field] for r in rows]
        if len(set(values)) == 1:
            continue
        # the most common value, ties going to the lowest rank's: the same on every rank
        common = max(values, key=lambda v: (values.count(v), -values.index(v)))
        odd = [ranks[i] for i, v in enumerate(values) if v != common]
        rest = [ranks[i] for i, v in enumerate(values) if v == common]
        if field == 0:
            return (f"{c.name} on rank {c.rank}: {_who(odd)} called "
                    f"{' or '.join(sorted({names.get(values[ranks.index(r)], '?') for r in odd}))}"
                    f" while {_who(rest)} called {names.get(common, '?')}: the ranks called "
                    "different collectives")
        label = "root" if field == 1 else "size (bytes)"
        shown = ", ".join(f"{label} {values[ranks.index(r)]} on rank {r}" for r in odd)
        return f"{c.name}: mismatched arguments: {shown}, {label} {common} elsewhere"
    return f"{c.name}: mismatched arguments between the ranks"


def _who(ranks: list[int]) -> str:
    if len(ranks) == 1:
        return f"rank {ranks[0]}"
    if ranks == list(range(ranks[0], ranks[-1] + 1)):
        return f"ranks {ranks[0]}-{ranks[-1]}"
    return "ranks " + ", ".join(map(str, ranks))


_NAMES = ("Barrier", "Bcast", "Reduce", "Allreduce", "Alltoall", "Alltoallv", "Gather",
          "Gatherv", "Scatter", "Scatterv", "Allgather", "Allgatherv", "Reduce_scatter_block",
          "Alltoallw",
          "Reduce_scatter", "Scan", "Exscan", "barrier", "bcast", "reduce", "allreduce",
          "gather", "scatter", "allgather", "alltoall", "scan", "exscan", "Neighbor_allgather",
          "Neighbor_allgatherv", "Neighbor_alltoall", "Neighbor_alltoallv", "Neighbor_alltoallw",
          "neighbor_allgather", "neighbor_alltoall")


def check_op(op, name: str) -> MPI.Op:
    """`op` if it is a usable MPI.Op, else a UsageError naming the call."""
    if id(op) in PREDEFINED_OPS:
        return op
    if not isinstance(op, MPI.Op) or op == MPI.OP_NULL:
        raise UsageError(f"{name}: expected an MPI.Op such as MPI.SUM, got {op!r}")
    return op


def commutes(op: MPI.Op) -> bool:
    """Whether `op` is commutative (predefined ops are)."""
    return id(op) in PREDEFINED_OPS or op.Is_commutative()


def combine(op: MPI.Op, mine: Typed, theirs: memoryview, mine_first: bool) -> None:
    """Set mine := first op second, where `theirs` is the other cluster's partial (Rule 2)."""
    tspec = mine.like(theirs)
    if not mine_first or commutes(op):
        op.Reduce_local(tspec, mine.spec)  # theirs op mine
    else:
        op.Reduce_local(mine.spec, tspec)  # mine op theirs, into theirs ...
        mine.view[:] = theirs  # ... then back: non-commutative ops only


def same_size(c: Coll, what: str, mine: int, theirs: int) -> None:
    """A UsageError if the two clusters disagree on a size."""
    if mine != theirs:
        here = c.engine.cluster
        there = "high" if here == "low" else "low"
        raise UsageError(
            f"{c.name}: mismatched arguments: rank {c.rank} ({here} cluster) has {mine} bytes "
            f"of {what}, the {there} cluster has {theirs}"
        )


def displs(sizes) -> list[int]:
    """Where each of consecutive blocks of `sizes` starts."""
    return list(itertools.accumulate(sizes[:-1], initial=0)) if len(sizes) else []


def equal_blocks(view, n: int, count: int, dt, extent: int) -> Vector:
    """N blocks of `count` elements, one after the other, as a vector buffer."""
    return Vector(view, [count] * n, [i * count for i in range(n)], dt, extent)


def after_copy(c: Coll, slot: int, view, steps_of):
    """The steps `steps_of(copy)`, after copying `view` (an in-place call's input) to scratch.

    The copy is made when the call's steps start, not when it is called: the calls queued on
    a communicator share its scratch slots, and run one at a time (a generator).
    """
    copy = c.tmp(slot, len(view))
    copy[:] = view
    return (yield from steps_of(copy))


def pack(c: Coll, slot: int, blocks: list) -> memoryview:
    """Concatenate byte blocks into scratch buffer `slot`."""
    out = c.tmp(slot, sum(len(b) for b in blocks))
    pos = 0
    for b in blocks:
        out[pos:pos + len(b)] = b
        pos += len(b)
    return out


# From this size up, a native reduce goes through reduce-scatter to one rank: MPICH's own
# Ireduce is much slower for large buffers here (docs/performance.md, "Native reduce through
# reduce-scatter").
REDUCE_VIA_RS = 16 << 10
NOTHING = memoryview(bytearray(0))


def ireduce(c: Coll, send, recv, op: MPI.Op, root: int, like: Typed) -> MPI.Request:
    """Native reduce inside the cluster to local rank `root` (recv: its spec, else None).

    `send` may be IN_PLACE at the root; `like` describes the full-size buffer.
    """
    if like.nbytes < REDUCE_VIA_RS:
        return c.local.Ireduce(send, recv, op, root)
    counts = [0] * c.nmine
    counts[root] = like.count
    if c.lrank != root:
        recv = like.like(NOTHING)
    elif send is IN_PLACE:
        # MPICH's in-place reduce_scatter copies the result onto itself here (and asserts).
        tmp = c.tmp(2, like.nbytes)
        tmp[:] = like.view
        send = like.like(tmp)
    return c.local.Ireduce_scatter(send, recv, counts, op)


def sized_blocks(c: Coll, msg: memoryview, k: int,
                 carried=None) -> tuple[list[int], list[int], memoryview]:
    """Split a message of k int64 block sizes followed by the blocks: (sizes, carried, blocks).

    `carried(sizes)`, if given, gives the sizes of the blocks the message holds (others went
    another way); else it holds them all.
    """
    head = 8 * k
    sizes = np.frombuffer(msg[:head], np.int64).tolist() if len(msg) >= head else [0] * k
    held = carried(sizes) if carried else sizes
    data = msg[head:]
    if len(msg) < head or sum(held) != len(data):
        raise UsageError(f"{c.name}: mismatched arguments: rank {c.rank} received {len(msg)} "
                         f"bytes that do not hold {k} block sizes and their blocks")
    return sizes, held, data
