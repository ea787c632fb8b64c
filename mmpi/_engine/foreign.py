"""Buffers that do not speak Python's buffer protocol: DLPack, the array interfaces.

mpi4py reads them itself (`MPI.buffer`), but as bytes; the element type is read here too, so
that counts count elements as they do natively. Device memory is refused by name: the
forwarders move host memory.
"""

from __future__ import annotations

import numpy as np

from .._startup.native import MPI
from ..errors import BufferError_, NotBridged


def foreign_view(obj, op: str) -> memoryview:
    """A view of a buffer given through an array interface or DLPack (host memory only)."""
    cai = getattr(obj, "__cuda_array_interface__", None)
    if cai is not None:
        if _host_memory(cai):  # e.g. managed memory, or a stand-in on the host
            return _typed(memoryview(MPI.buffer(obj)), np.dtype(cai["typestr"]).char)
        raise NotBridged(f"{op}: device (GPU) buffers are not bridged: the forwarders move host "
                         "memory; copy the data to the host first")
    if hasattr(obj, "__dlpack_device__") and obj.__dlpack_device__()[0] not in (1, 3):
        raise NotBridged(f"{op}: device (GPU) buffers are not bridged: the forwarders move host "
                         "memory; copy the data to the host first")
    if hasattr(obj, "__dlpack__") or hasattr(obj, "__array_interface__"):
        try:
            # mpi4py's own reading of DLPack and array interfaces, as its calls would do;
            # the bytes come without a format, so the element type is read as well
            raw = memoryview(MPI.buffer(obj))
            fmt = _foreign_format(obj)
        except (TypeError, ValueError, BufferError) as exc:
            raise BufferError_(f"{op}: cannot use the buffer of a {type(obj).__name__}: "
                               f"{exc}") from None
        return _typed(raw, fmt)
    raise BufferError_(
        f"{op}: {type(obj).__name__} does not expose a buffer (use a numpy array, bytes, "
        "bytearray, memoryview or an object with DLPack; lowercase methods take objects)"
    )


def _typed(raw: memoryview, fmt: str | None) -> memoryview:
    """`raw` bytes viewed as elements of `fmt`, so that counts count elements."""
    if not fmt or raw.nbytes % np.dtype(fmt).itemsize:
        return raw
    try:
        return raw.cast(fmt)
    except (TypeError, ValueError):  # formats memoryview cannot cast to, such as 'g'
        return memoryview(np.frombuffer(raw, dtype=fmt))


def _host_memory(cai: dict) -> bool:
    """Whether a CUDA array interface's data lies in this process's host memory map."""
    pointer = cai.get("data", (0,))[0]
    if not pointer:
        return True  # nothing to read
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                low, high = (int(x, 16) for x in line.split(None, 1)[0].split("-"))
                if low <= pointer < high:
                    return True
    except OSError:
        pass
    return False


_DL_CODES = {0: "i", 1: "u", 2: "f", 5: "c", 6: "b"}  # DLPack type codes -> numpy kinds


def _foreign_format(obj) -> str | None:
    """The struct format of a DLPack or array-interface object's elements (None: unknown)."""
    iface = getattr(obj, "__array_interface__", None)
    if iface is not None:
        return np.dtype(iface["typestr"]).char
    import ctypes

    class DLDataType(ctypes.Structure):
        _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8),
                    ("lanes", ctypes.c_uint16)]

    class DLTensor(ctypes.Structure):
        _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int32),
                    ("device_id", ctypes.c_int32), ("ndim", ctypes.c_int32),
                    ("dtype", DLDataType)]

    capsule = obj.__dlpack__()  # unversioned: a DLManagedTensor whose first field is the tensor
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    pointer = get(capsule, b"dltensor")
    dtype = ctypes.cast(pointer, ctypes.POINTER(DLTensor)).contents.dtype
    kind = _DL_CODES.get(dtype.code)
    del capsule  # never consumed: its own destructor gives it back to the producer
    if kind == "f" and dtype.lanes == 2:
        # a complex number as two float lanes: how a long double complex (256 bits, more
        # than the 8-bit field holds) travels in DLPack, and how mpi4py reads it
        return np.dtype(f"c{dtype.bits // 4}").char
    if kind is None or dtype.lanes != 1:
        return None
    if kind == "b":
        return "?"
    return np.dtype(f"{kind}{dtype.bits // 8}").char


__all__ = ["foreign_view"]
