"""mpi4py buffer specifications turned into flat byte views, read as mpi4py reads them.

A specification is a buffer, or `[buf, datatype]`, `[buf, count]`, `[buf, count, datatype]`,
`[buf, (count, displ), datatype]`, `[buf, count, displ, datatype]`; the datatype may be an
MPI datatype or a typecode string ('i', 'd', ...); the buffer anything exposing the buffer
protocol, `__array_interface__` or DLPack (host memory; device memory is not bridged). In a
collective with equal blocks, a count is per block, as in mpi4py.

mmpi moves bytes. A derived datatype (vector, indexed, struct, ...) is packed into a
contiguous copy before it is sent and unpacked after it is received (`unpacks`); reductions
need it to be made of one predefined type. Errors name the call and what was wrong.
"""

from __future__ import annotations

import operator

import numpy as np

from .._startup.native import MPI
from ..errors import BufferError_, NotBridged
from .foreign import foreign_view

_EMPTY = memoryview(bytearray(0))
PLAIN = (np.ndarray, bytearray)  # buffers as_view takes by their memoryview alone
_COMPLEX = {"Zf": "F", "Zd": "D", "Zg": "G"}  # buffer-protocol names of numpy's complex types
_TYPEDICT = MPI._typedict
_DATATYPE = MPI.Datatype


class Typed:
    """A contiguous run of `count` elements of datatype `dt` (`extent` bytes each).

    A plain slotted class: one is made per buffer argument of every call, on the critical
    path of small collectives.
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


# Unpacks owed by receive buffers of derived datatypes parsed since the caller last took them
# (`take_unpacks`): callables to run once the receive has completed.
unpacks: list = []


def _flat(raw: memoryview) -> memoryview:
    """`raw` as one run of bytes.

    An array with a zero in its shape has no bytes, and memoryview.cast refuses it.
    """
    if raw.format == "B" and raw.ndim == 1:
        return raw
    return raw.cast("B") if raw.nbytes else _EMPTY


def take_unpacks() -> list:
    """The unpacks that parsing the last call's buffers left (and forget them)."""
    out = unpacks[:]
    unpacks.clear()
    return out


# Checked datatypes: handle -> (extent, the predefined type it is made of or None, plain:
# predefined and contiguous). Worked out once per datatype.
KNOWN: dict[int, tuple[int, MPI.Datatype | None, bool]] = {}
_FORMATS: dict[str, MPI.Datatype] = {}
NDARRAYS: dict[np.dtype, tuple[MPI.Datatype, int]] = {}  # numpy dtype -> (datatype, extent)


def _base(dt: MPI.Datatype) -> MPI.Datatype | None:
    """The one predefined datatype `dt` is made of, or None (a mix, e.g. a struct)."""
    if dt.is_predefined:
        return dt
    try:
        old, kind, params = dt.decode()
    except Exception:  # noqa: BLE001 - an unusual type: moved as bytes, never reduced
        return None
    if kind != "STRUCT":
        return _base(old)
    bases = [_base(t) for t in params["datatypes"]]
    if any(b is None for b in bases) or len({b.handle for b in bases}) != 1:
        return None
    return bases[0]


def _datatype(dt, op: str) -> tuple[MPI.Datatype, int, MPI.Datatype | None, bool]:
    """(datatype, extent, its predefined base or None, plain) of a spec's datatype."""
    if isinstance(dt, str):
        try:
            dt = _TYPEDICT[dt]
        except KeyError:
            raise BufferError_(f"{op}: cannot map typecode {dt!r} to an MPI datatype") from None
    elif not isinstance(dt, MPI.Datatype):
        raise BufferError_(f"{op}: expected an MPI datatype or a typecode in the buffer spec, "
                           f"got {dt!r}")
    known = KNOWN.get(dt.handle)
    if known is None:
        if dt == MPI.DATATYPE_NULL:
            raise BufferError_(f"{op}: MPI.DATATYPE_NULL is not a usable datatype")
        lb, extent = dt.Get_extent()
        plain = dt.is_predefined and lb == 0  # laid out by its own extent: used as it is
        known = (extent, _base(dt), plain)
        if dt.is_predefined or dt.is_named:
            KNOWN[dt.handle] = known  # a user type's handle may be reused once it is freed
    return (dt, *known)


def _name(dt: MPI.Datatype) -> str:
    try:
        return dt.Get_name() or dt.decode()[1]
    except Exception:  # noqa: BLE001 - a name only for an error message
        return "a derived datatype"


def _bytes_of(obj, *, writable: bool, op: str) -> memoryview:
    try:
        view = memoryview(obj)
    except TypeError:
        view = foreign_view(obj, op)
    if not view.c_contiguous:
        if not view.f_contiguous:
            raise BufferError_(f"{op}: buffer is not contiguous (pass a contiguous copy, or a "
                               "datatype that describes its layout)")
        # Fortran order: its bytes in memory order, as mpi4py (and MPI) take them
        view = memoryview(np.asarray(view).ravel(order="K"))
    if writable and view.readonly:
        raise BufferError_(f"{op}: receive buffer is read-only")
    return view


def _infer(view: memoryview, op: str) -> MPI.Datatype:
    fmt = view.format
    known = _FORMATS.get(fmt)
    if known is not None:
        return known
    code = "B" if fmt in ("c", "B") else _COMPLEX.get(fmt.lstrip("<=@"), fmt.lstrip("<=@"))
    dt = _TYPEDICT.get(code)
    if dt is None:
        try:
            dt = MPI.Datatype.fromcode(np.dtype(code).char)
        except (TypeError, ValueError, KeyError):
            raise BufferError_(
                f"{op}: cannot tell the MPI datatype of a buffer of format {view.format!r}; "
                "pass [buffer, MPI.<TYPE>]"
            ) from None
    _FORMATS[fmt] = dt
    return dt


def _whole_array(a, writable: bool) -> tuple[MPI.Datatype, int] | None:
    """(datatype, extent) of a numpy array taken whole without parsing, else None."""
    if type(a) is not np.ndarray:
        return None
    known = NDARRAYS.get(a.dtype)
    if known is None:
        return None
    flags = a.flags
    return known if flags.c_contiguous and (flags.writeable or not writable) else None


def _array_and_type(a, dt, writable: bool) -> memoryview | None:
    """The bytes of `[a, dt]` when that needs no parsing, else None.

    That is a C-contiguous numpy array (writable if need be) and a predefined datatype
    already worked out, whose extent divides the array's size: the commonest spec of a
    message, whose general parsing costs a few microseconds on every send and receive.
    """
    if type(a) is not np.ndarray or type(dt) is not _DATATYPE:
        return None
    known = KNOWN.get(dt.handle)
    if known is None or not known[2] or not known[0]:
        return None
    flags = a.flags
    if not flags.c_contiguous or (writable and not flags.writeable) or a.nbytes % known[0]:
        return None
    return _flat(memoryview(a))


def _count(value, op: str, what: str = "count") -> int:
    try:
        n = operator.index(value)
    except TypeError:
        raise BufferError_(f"{op}: buffer {what} must be an integer >= 0, got {value!r}") \
            from None
    if n < 0:
        raise BufferError_(f"{op}: buffer {what} must be an integer >= 0, got {n}")
    return n


def _split(spec, op: str):
    """(buffer, count, displacement, datatype) of a simple spec (None where not given)."""
    if not isinstance(spec, (list, tuple)):
        return spec, None, None, None
    n = len(spec)
    count = displ = dt = None
    if n == 2:
        buf, second = spec
        if isinstance(second, (MPI.Datatype, str)):
            dt = second
        elif isinstance(second, (tuple, list)):
            count, displ = second
        else:
            count = second
    elif n == 3:
        buf, count, dt = spec
        if isinstance(count, (tuple, list)):
            if len(count) != 2:
                raise BufferError_(f"{op}: expected (count, displacement), got {count!r}")
            count, displ = count
    elif n == 4:
        buf, count, displ, dt = spec
    else:
        raise BufferError_(f"{op}: a buffer spec has 1 to 4 items, got {n}")
    return buf, count, displ, dt


def as_typed(spec, *, writable: bool, op: str, blocks: int = 1) -> Typed:
    """Parse an mpi4py buffer spec into a Typed run.

    `blocks`: the spec holds that many equal blocks (a collective's), and a count given in
    it is per block, as in mpi4py.
    """
    known = _whole_array(spec, writable)  # the common case, without the general parsing
    if known is not None:
        return Typed(_flat(memoryview(spec)), spec.size, known[0], known[1])
    if spec is None or spec is MPI.BOTTOM:
        return Typed(_EMPTY, 0, MPI.BYTE, 1)
    buf, count, displ, dt = _split(spec, op)
    if buf is None or buf is MPI.BOTTOM:
        if count not in (None, 0):
            raise BufferError_(f"{op}: buffer is None but count is {count}")
        if dt is None:
            return Typed(_EMPTY, 0, MPI.BYTE, 1)
        dt, extent, _, _ = _datatype(dt, op)  # kept: a reduction checks its op against it
        return Typed(_EMPTY, 0, dt, extent)
    raw = _bytes_of(buf, writable=writable, op=op)
    if dt is None:
        dt = _infer(raw, op)
    dt, extent, base, plain = _datatype(dt, op)
    flat = _flat(raw)
    start = _count(displ, op, "displacement") * extent if displ is not None else 0
    if start > len(flat):
        raise BufferError_(f"{op}: displacement {displ} lies outside the buffer of "
                           f"{len(flat)} bytes")
    if count is None:
        length = len(flat) - start
        if extent and length % extent:
            raise BufferError_(f"{op}: cannot infer count: buffer length {length} is not a "
                               f"multiple of datatype extent {extent}")
        count = length // extent if extent else 0
    else:
        count = _count(count, op) * blocks
    if not plain:
        return _derived(flat[start:], count, dt, base, writable, op)
    stop = start + count * extent
    if stop > len(flat):
        raise BufferError_(f"{op}: buffer spec asks for bytes {start}..{stop} but the buffer "
                           f"holds {len(flat)}")
    if buf is spec and type(buf) is np.ndarray and extent == buf.itemsize:
        NDARRAYS[buf.dtype] = (dt, extent)  # next time, the fast path above
    return Typed(flat[start:stop], count, dt, extent)


def _derived(region: memoryview, count: int, dt: MPI.Datatype, base, writable: bool,
             op: str) -> Typed:
    """A contiguous packed copy of `count` elements of derived datatype `dt` at `region`.

    For a receive buffer, the copy is unpacked into `region` by the callable left in
    `unpacks` (the caller runs it once the data is in).
    """
    size = dt.Get_size() * count
    lb, extent = dt.Get_extent()
    tlb, textent = dt.Get_true_extent()
    need = tlb + textent + (count - 1) * extent if count else 0
    if need > len(region):
        raise BufferError_(f"{op}: {count} elements of {_name(dt)} span {need} bytes but the "
                           f"buffer holds {len(region)}")
    packed = bytearray(size)
    if base is not None:
        b_extent = base.Get_size()
        inner = Typed(memoryview(packed), size // b_extent if b_extent else 0, base, b_extent)
    else:  # a mix of types: fine to move, not to reduce
        inner = Typed(memoryview(packed), size, MPI.BYTE, 1)
    if writable:
        # MPI lets the program free the datatype while the receive is pending: unpack
        # through a duplicate of our own, freed once done
        own, elem = dt.Dup(), max(dt.Get_size(), 1)

        def unpack(received: int = -1) -> None:
            n = count if received < 0 else min(count, received // elem)
            try:
                _through(own, n, extent, region, lambda t, buf: t.Unpack(packed, 0, buf,
                                                                         MPI.COMM_SELF))
            finally:
                own.Free()

        unpacks.append(unpack)
    else:
        _through(dt, count, extent, region, lambda t, buf: t.Pack(buf, packed, 0,
                                                                  MPI.COMM_SELF))
    return inner


def _through(dt: MPI.Datatype, count: int, extent: int, region: memoryview, pack) -> None:
    """pack(datatype, buffer) for `count` elements of `dt` at `region`.

    mpi4py's Pack/Unpack take the element count from the buffer's length; a region that
    ends before the last element's extent does is handed over as one element of a type
    that covers exactly `count` of them.
    """
    if count == 0:
        return
    if len(region) >= count * extent:
        pack(dt, region[:count * extent])
        return
    tlb, textent = dt.Get_true_extent()
    need = tlb + textent + (count - 1) * extent
    many = dt.Create_contiguous(count)
    one = many.Create_resized(0, need).Commit()
    try:
        pack(one, region[:need])
    finally:
        one.Free()
        many.Free()


def plain_pair(sendbuf, recvbuf) -> MPI.Datatype | None:
    """The datatype of a send and a receive buffer that need no parsing, else None.

    That is two numpy arrays of one dtype that `as_typed` has already worked out, of the same
    size, C-contiguous, the receive one writable (or IN_PLACE and such a receive array). For
    them `as_typed` would give exactly each whole array and this datatype, and a small
    collective can hand the arrays to mpi4py as they are.
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
    """A 1-D unsigned-byte view of the bytes that `spec` describes (packed if derived)."""
    if type(spec) in PLAIN:  # the commonest, in one step: a whole array, a bytearray
        raw = memoryview(spec)
        if raw.c_contiguous and not (writable and raw.readonly):
            return raw if raw.format == "B" and raw.ndim == 1 else _flat(raw)
    if type(spec) is list and len(spec) == 2:
        view = _array_and_type(spec[0], spec[1], writable)
        if view is not None:
            return view
    if spec is None or spec is MPI.BOTTOM:
        return _EMPTY
    if not isinstance(spec, (list, tuple)):
        raw = _bytes_of(spec, writable=writable, op=op)
        return _flat(raw)
    return as_typed(spec, writable=writable, op=op).view


class Vector:
    """A vector-collective buffer: per-rank counts and displacements (in elements)."""

    __slots__ = ("base", "counts", "displs", "dt", "extent")

    def __init__(self, base: memoryview, counts: list[int], displs: list[int],
                 dt: MPI.Datatype, extent: int) -> None:
        self.base = base  # the whole buffer, format 'B'
        self.counts = counts
        self.displs = displs
        self.dt = dt
        self.extent = extent

    def block(self, i: int) -> memoryview:
        """Bytes of rank i's block."""
        start = self.displs[i] * self.extent
        return self.base[start:start + self.counts[i] * self.extent]

    def nbytes(self, i: int) -> int:
        """Size of rank i's block in bytes."""
        return self.counts[i] * self.extent


def as_vector(spec, n: int, *, writable: bool, op: str) -> Vector:
    """Parse an mpi4py vector buffer spec for `n` ranks.

    mpi4py's rules: no counts split the buffer evenly, an integer count is every block's,
    an integer displacement a stride.
    """
    counts = displs = dt = None
    if isinstance(spec, (list, tuple)):
        if len(spec) == 2:
            obj, counts = spec
            if isinstance(counts, (MPI.Datatype, str)):
                counts, dt = None, counts
            elif isinstance(counts, tuple):
                counts, displs = counts
        elif len(spec) == 3:
            obj, counts, dt = spec
            if isinstance(counts, tuple):
                counts, displs = counts
        elif len(spec) == 4:
            obj, counts, displs, dt = spec
        else:
            raise BufferError_(f"{op}: a buffer spec has 1 to 4 items, got {len(spec)}")
    else:
        obj = spec
    raw = _bytes_of(obj, writable=writable, op=op) if obj is not None else _EMPTY
    if dt is None:
        dt = _infer(raw, op) if obj is not None else MPI.BYTE
    dt, extent, _, plain = _datatype(dt, op)
    if not plain:
        raise NotBridged(f"{op}: v-collectives with the derived datatype {_name(dt)} are not "
                         "bridged yet (pack the data, or use a predefined datatype)")
    flat = _flat(raw)
    if counts is None:
        total = len(flat) // extent if extent else 0
        counts = [total // n + (total % n > i) for i in range(n)]
    elif isinstance(counts, (int, np.integer)):
        counts = [_count(counts, op)] * n
    else:
        counts = [_count(c, op) for c in counts]
    if len(counts) != n:
        raise BufferError_(f"{op}: {len(counts)} counts given for a communicator of size {n}")
    if displs is None:
        displs, acc = [], 0
        for c in counts:
            displs.append(acc)
            acc += c
    elif isinstance(displs, (int, np.integer)):
        displs = [int(displs) * i for i in range(n)]
    else:
        displs = [int(d) for d in displs]
    if len(displs) != n:
        raise BufferError_(f"{op}: {len(displs)} displacements given for size {n}")
    for i, (c, d) in enumerate(zip(counts, displs, strict=True)):
        if d < 0 or (d + c) * extent > len(flat):
            raise BufferError_(
                f"{op}: block of rank {i} (displacement {d}, count {c}) lies outside the "
                f"buffer of {len(flat)} bytes"
            )
    return Vector(flat, counts, displs, dt, extent)
