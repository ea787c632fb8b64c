"""Turning mpi4py-style buffer arguments into flat byte views, with errors that say what is wrong.

mmpi moves bytes: locally through native MPI with MPI.BYTE, across the zipper through the
forwarder. So a buffer must be contiguous and its datatype, when given, predefined and
contiguous; anything else is refused with a clear error instead of being sent garbled.
"""

from __future__ import annotations

from mpi4py import MPI

from .errors import BufferError_

_EMPTY = memoryview(bytearray(0))


def _datatype_size(dt, op: str) -> int:
    if not isinstance(dt, MPI.Datatype):
        raise BufferError_(f"{op}: expected an MPI datatype in the buffer spec, got {dt!r}")
    if dt == MPI.DATATYPE_NULL:
        raise BufferError_(f"{op}: MPI.DATATYPE_NULL is not a usable datatype")
    size = dt.Get_size()
    lb, extent = dt.Get_extent()
    if not dt.is_predefined or lb != 0 or extent != size:
        raise BufferError_(
            f"{op}: unsupported datatype {dt.Get_name() or dt!r} "
            "(mmpi supports predefined contiguous datatypes only)"
        )
    return size


def as_view(spec, *, writable: bool, op: str) -> memoryview:
    """Return a 1-D unsigned-byte view of the bytes that `spec` describes.

    `spec` is what mpi4py accepts: a buffer-like object, or ``[buf, datatype]``,
    ``[buf, count, datatype]``, ``[buf, (count, displ), datatype]`` or ``[buf, count]``.
    """
    if spec is None or spec is MPI.BOTTOM:
        return _EMPTY
    count = displ = itemsize = None
    obj = spec
    if isinstance(spec, (list, tuple)):
        if not 1 <= len(spec) <= 3:
            raise BufferError_(f"{op}: a buffer spec has 1 to 3 items, got {len(spec)}")
        obj = spec[0]
        rest = list(spec[1:])
        if rest and isinstance(rest[-1], MPI.Datatype):
            itemsize = _datatype_size(rest.pop(), op)
        if rest:
            cnt = rest.pop()
            if isinstance(cnt, (list, tuple)):
                if len(cnt) != 2:
                    raise BufferError_(f"{op}: expected (count, displacement), got {cnt!r}")
                count, displ = cnt
            else:
                count = cnt
            if not isinstance(count, int) or count < 0:
                raise BufferError_(f"{op}: buffer count must be an integer >= 0, got {count!r}")
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
    view = view.cast("B") if view.format != "B" or view.ndim != 1 else view
    if itemsize is None:
        itemsize = 1 if count is None else max(1, _itemsize_of(obj))
    start = (displ or 0) * itemsize
    stop = len(view) if count is None else start + count * itemsize
    if stop > len(view) or start > len(view):
        raise BufferError_(
            f"{op}: buffer spec asks for bytes {start}..{stop} but the buffer holds {len(view)}"
        )
    return view[start:stop]


def _itemsize_of(obj) -> int:
    try:
        return memoryview(obj).itemsize
    except TypeError:
        return 1
