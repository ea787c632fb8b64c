"""Turning mpi4py-style buffer arguments into flat byte views, with errors that say what is wrong.

mmpi moves bytes: locally through native MPI, across the zipper through the forwarder. So a
buffer must be contiguous and its datatype, when given, predefined; anything else is refused
with a clear error instead of being sent garbled. Reductions also need the element datatype,
which is taken from the spec or inferred from the buffer (numpy dtype / buffer format).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._native import MPI
from .errors import BufferError_

_EMPTY = memoryview(bytearray(0))
_COMPLEX = {"Zf": "F", "Zd": "D", "Zg": "G"}  # buffer-protocol names of numpy's complex types


class Typed:
    """A contiguous run of `count` elements of predefined datatype `dt` (extent bytes each).

    A plain slotted class, not a frozen dataclass: one is made per buffer argument of every
    call, and a frozen dataclass's __init__ alone costs 0.8 us here (0.2 us this way); on a
    bridged job's oversubscribed cores each rank's per-call Python time adds up on the
    critical path (see `as_typed`).
    """

    __slots__ = ("view", "count", "dt", "extent")

    def __init__(self, view: memoryview, count: int, dt: MPI.Datatype, extent: int) -> None:
        self.view = view  # exactly count * extent bytes, format 'B'
        self.count = count
        self.dt = dt
        self.extent = extent

    @property
    def nbytes(self) -> int:
        """Size in bytes."""
        return len(self.view)

    @property
    def spec(self) -> list:
        """The spec to hand to a native mpi4py call."""
        return [self.view, self.count, self.dt]

    def like(self, view: memoryview) -> list:
        """A native spec for another buffer of the same element type."""
        return [view, len(view) // self.extent if self.extent else 0, self.dt]


# Checked datatypes: handle -> extent, and buffer format -> (datatype, extent). Both depend
# only on the predefined datatype, so each is worked out once per process: `as_typed` on a
# numpy array took 3.3 us, most of it here, and a small bridged Allreduce makes two per rank
# (2+2 ranks on 2 cores: the call ran 30-60 us slower than its body; benchmarks/RESULTS.md,
# "Per-call Python").
_EXTENTS: dict[int, int] = {}
_FORMATS: dict[str, tuple[MPI.Datatype, int]] = {}
_NDARRAYS: dict[np.dtype, tuple[MPI.Datatype, int]] = {}  # numpy dtype -> the same


def _extent(dt, op: str) -> int:
    if isinstance(dt, MPI.Datatype):
        known = _EXTENTS.get(dt.handle)
        if known is not None:
            return known
    else:
        raise BufferError_(f"{op}: expected an MPI datatype in the buffer spec, got {dt!r}")
    if dt == MPI.DATATYPE_NULL:
        raise BufferError_(f"{op}: MPI.DATATYPE_NULL is not a usable datatype")
    lb, extent = dt.Get_extent()
    if not dt.is_predefined or lb != 0:
        raise BufferError_(
            f"{op}: unsupported datatype {dt.Get_name() or dt!r} "
            "(mmpi supports predefined datatypes only)"
        )
    _EXTENTS[dt.handle] = extent
    return extent


def _typed_format(raw: memoryview, op: str) -> tuple[MPI.Datatype, int]:
    """Datatype and extent of a buffer without a datatype in its spec."""
    known = _FORMATS.get(raw.format)
    if known is None:
        dt = _infer(raw, op)
        known = _FORMATS[raw.format] = (dt, _extent(dt, op))
    return known


def _bytes_of(obj, *, writable: bool, op: str) -> memoryview:
    try:
        view = memoryview(obj)
    except TypeError:
        raise BufferError_(
            f"{op}: {type(obj).__name__} does not expose a buffer "
            "(use a numpy array, bytes, bytearray or memoryview; lowercase methods take objects)"
        ) from None
    if not view.c_contiguous:
        raise BufferError_(f"{op}: buffer is not contiguous (pass a contiguous copy)")
    if writable and view.readonly:
        raise BufferError_(f"{op}: receive buffer is read-only")
    return view


def _infer(view: memoryview, op: str) -> MPI.Datatype:
    fmt = view.format
    if fmt == "c":
        return MPI.BYTE
    fmt = _COMPLEX.get(fmt.lstrip("<=@"), fmt)
    try:
        return MPI.Datatype.fromcode(np.dtype(fmt).char)
    except (TypeError, ValueError, KeyError):
        raise BufferError_(
            f"{op}: cannot tell the MPI datatype of a buffer of format {view.format!r}; "
            "pass [buffer, MPI.<TYPE>]"
        ) from None


def _whole_array(a, writable: bool) -> tuple[MPI.Datatype, int] | None:
    """(datatype, extent) of a numpy array that `as_typed` takes whole without parsing, else None.

    That is a C-contiguous array of a dtype worked out before (`_NDARRAYS`), writable if asked.
    """
    if type(a) is not np.ndarray:
        return None
    known = _NDARRAYS.get(a.dtype)
    if known is None:
        return None
    flags = a.flags
    return known if flags.c_contiguous and (flags.writeable or not writable) else None


def as_typed(spec, *, writable: bool, op: str) -> Typed:
    """Parse an mpi4py buffer spec into a Typed run.

    Accepted: ``buf``, ``[buf, dt]``, ``[buf, count, dt]``, ``[buf, (count, displ), dt]``,
    ``[buf, count]``.
    """
    known = _whole_array(spec, writable)  # the common case, without the general parsing
    if known is not None:
        return Typed(memoryview(spec).cast("B"), spec.size, known[0], known[1])
    if spec is None or spec is MPI.BOTTOM:
        return Typed(_EMPTY, 0, MPI.BYTE, 1)
    count = displ = dt = None
    obj = spec
    if isinstance(spec, (list, tuple)):
        if not 1 <= len(spec) <= 3:
            raise BufferError_(f"{op}: a buffer spec has 1 to 3 items, got {len(spec)}")
        obj = spec[0]
        rest = list(spec[1:])
        if rest and isinstance(rest[-1], MPI.Datatype):
            dt = rest.pop()
        if rest:
            cnt = rest.pop()
            if isinstance(cnt, (list, tuple)):
                if len(cnt) != 2:
                    raise BufferError_(f"{op}: expected (count, displacement), got {cnt!r}")
                count, displ = cnt
            else:
                count = cnt
            if not isinstance(count, (int, np.integer)) or count < 0:
                raise BufferError_(f"{op}: buffer count must be an integer >= 0, got {count!r}")
    raw = _bytes_of(obj, writable=writable, op=op)
    if dt is None:
        dt, extent = _typed_format(raw, op)
        if obj is spec and type(obj) is np.ndarray and extent == obj.itemsize:
            _NDARRAYS[obj.dtype] = (dt, extent)  # next time, the fast path above
    else:
        extent = _extent(dt, op)
    flat = raw.cast("B") if raw.format != "B" or raw.ndim != 1 else raw
    start = int(displ or 0) * extent
    if count is None:
        count = (len(flat) - start) // extent if extent else 0
    stop = start + int(count) * extent
    if stop > len(flat) or start > len(flat):
        raise BufferError_(
            f"{op}: buffer spec asks for bytes {start}..{stop} but the buffer holds {len(flat)}"
        )
    return Typed(flat[start:stop], int(count), dt, extent)


def plain_pair(sendbuf, recvbuf) -> MPI.Datatype | None:
    """The datatype of a send and a receive buffer that need no parsing, else None.

    That is two numpy arrays of one dtype that `as_typed` has already worked out, of the same
    size, C-contiguous, the receive one writable (or IN_PLACE and such a receive array). For
    them `as_typed` would give exactly each whole array and this datatype, and a small
    collective can hand the arrays to mpi4py as they are (see _collectives' `_allreduce_plain`
    for what that gains). None says nothing about the buffers: the general parsing decides.
    """
    known = _whole_array(recvbuf, True)
    if known is None:
        return None
    if sendbuf is not MPI.IN_PLACE and not (
            _whole_array(sendbuf, False) is not None and sendbuf.dtype == recvbuf.dtype
            and sendbuf.size == recvbuf.size):
        return None
    return known[0]


def as_view(spec, *, writable: bool, op: str) -> memoryview:
    """A 1-D unsigned-byte view of the bytes that `spec` describes."""
    if spec is None or spec is MPI.BOTTOM:
        return _EMPTY
    if not isinstance(spec, (list, tuple)):
        raw = _bytes_of(spec, writable=writable, op=op)
        return raw.cast("B") if raw.format != "B" or raw.ndim != 1 else raw
    return as_typed(spec, writable=writable, op=op).view


@dataclass(frozen=True, slots=True)
class Vector:
    """A vector-collective buffer: per-rank counts and displacements (in elements)."""

    base: memoryview  # the whole buffer, format 'B'
    counts: list[int]
    displs: list[int]
    dt: MPI.Datatype
    extent: int

    def block(self, i: int) -> memoryview:
        """Bytes of rank i's block."""
        start = self.displs[i] * self.extent
        return self.base[start:start + self.counts[i] * self.extent]

    def nbytes(self, i: int) -> int:
        """Size of rank i's block in bytes."""
        return self.counts[i] * self.extent


def as_vector(spec, n: int, *, writable: bool, op: str) -> Vector:
    """Parse an mpi4py vector buffer spec for `n` ranks.

    Accepted: ``[buf, counts]``, ``[buf, (counts, displs)]``, ``[buf, counts, dt]``,
    ``[buf, (counts, displs), dt]``, ``[buf, counts, displs, dt]``.
    """
    if not isinstance(spec, (list, tuple)) or not 2 <= len(spec) <= 4:
        raise BufferError_(
            f"{op}: expected [buffer, counts, displacements, datatype] (or a shorter form), "
            f"got {type(spec).__name__}"
        )
    obj, rest = spec[0], list(spec[1:])
    dt = rest.pop() if rest and isinstance(rest[-1], MPI.Datatype) else None
    if len(rest) == 2:
        counts, displs = rest
    elif len(rest) == 1 and isinstance(rest[0], tuple) and len(rest[0]) == 2 and not \
            isinstance(rest[0][0], (int, np.integer)):
        counts, displs = rest[0]
    elif len(rest) == 1:
        counts, displs = rest[0], None
    else:
        raise BufferError_(f"{op}: cannot read counts/displacements from the buffer spec")
    counts = [int(c) for c in counts]
    if len(counts) != n:
        raise BufferError_(f"{op}: {len(counts)} counts given for a communicator of size {n}")
    if any(c < 0 for c in counts):
        raise BufferError_(f"{op}: negative count in {counts}")
    if displs is None:
        displs, acc = [], 0
        for c in counts:
            displs.append(acc)
            acc += c
    displs = [int(d) for d in displs]
    if len(displs) != n:
        raise BufferError_(f"{op}: {len(displs)} displacements given for size {n}")
    raw = _bytes_of(obj, writable=writable, op=op)
    if dt is None:
        dt, extent = _typed_format(raw, op)
    else:
        extent = _extent(dt, op)
    flat = raw.cast("B") if raw.format != "B" or raw.ndim != 1 else raw
    for i, (c, d) in enumerate(zip(counts, displs, strict=True)):
        if d < 0 or (d + c) * extent > len(flat):
            raise BufferError_(
                f"{op}: block of rank {i} (displacement {d}, count {c}) lies outside the "
                f"buffer of {len(flat)} bytes"
            )
    return Vector(flat, counts, displs, dt, extent)
