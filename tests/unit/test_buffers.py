"""Buffer specs become flat byte views; unusable buffers get errors naming the problem."""

import numpy as np
import pytest
from mpi4py import MPI

from mmpi._engine.buffers import as_typed, as_vector, as_view
from mmpi.errors import BufferError_


def test_plain_numpy_array():
    a = np.arange(10, dtype="f8")
    v = as_view(a, writable=True, op="Recv")
    assert len(v) == 80 and v.format == "B"
    v[:8] = np.float64(42).tobytes()
    assert a[0] == 42


def test_count_and_datatype_specs():
    a = np.arange(10, dtype="i4")
    assert len(as_view([a, MPI.INT], writable=False, op="Send")) == 40
    assert len(as_view([a, 3, MPI.INT], writable=False, op="Send")) == 12
    v = as_view([a, (2, 4), MPI.INT], writable=False, op="Send")
    assert np.frombuffer(v, "i4").tolist() == [4, 5]
    assert len(as_view([a, 3], writable=False, op="Send")) == 12


def test_bytes_and_none():
    assert bytes(as_view(b"abc", writable=False, op="Send")) == b"abc"
    assert len(as_view(None, writable=True, op="Recv")) == 0


def test_array_with_a_zero_in_its_shape_is_empty():
    # memoryview.cast refuses such a view: a Gather into (n, 0) arrays failed
    for writable in (False, True):
        t = as_typed(np.full((3, 0), -1, "i"), writable=writable, op="Gather")
        assert t.count == 0 and t.nbytes == 0
        assert len(as_view(np.zeros((0, 2)), writable=writable, op="Bcast")) == 0


def test_non_contiguous_refused():
    a = np.arange(10)[::2]
    with pytest.raises(BufferError_, match="Send: buffer is not contiguous"):
        as_view(a, writable=False, op="Send")


def test_read_only_receive_refused():
    with pytest.raises(BufferError_, match="read-only"):
        as_view(b"abc", writable=True, op="Recv")


def test_too_large_count_refused():
    with pytest.raises(BufferError_, match="holds 40"):
        as_view([np.zeros(10, "i4"), 11, MPI.INT], writable=False, op="Send")


def test_derived_datatype_is_packed_for_sending():
    vec = MPI.DOUBLE.Create_vector(2, 1, 2).Commit()
    try:
        t = as_typed([np.arange(4.0), 1, vec], writable=False, op="Send")
        assert np.frombuffer(t.view, "d").tolist() == [0.0, 2.0]
        assert (t.count, t.dt) == (2, MPI.DOUBLE)  # reducible: made of doubles
    finally:
        vec.Free()


def test_derived_datatype_is_unpacked_after_receiving():
    from mmpi._engine import buffers as _buffers

    vec = MPI.DOUBLE.Create_vector(2, 1, 2).Commit()
    try:
        out = np.zeros(4)
        t = as_typed([out, 1, vec], writable=True, op="Recv")
        t.view[:] = np.array([7.0, 9.0]).tobytes()
        for unpack in _buffers.take_unpacks():
            unpack()
        assert out.tolist() == [7.0, 0.0, 9.0, 0.0]
    finally:
        vec.Free()


def test_struct_of_mixed_types_moves_as_bytes():
    st = MPI.Datatype.Create_struct([1, 1], [0, 8], [MPI.DOUBLE, MPI.INT]).Commit()
    try:
        t = as_typed([bytearray(16), 1, st], writable=False, op="Send")
        assert (t.dt, t.nbytes) == (MPI.BYTE, 12)
    finally:
        st.Free()


def test_typecode_strings_and_four_item_specs():
    a = np.arange(6, dtype="i")
    assert as_typed([a, "i"], writable=False, op="Send").count == 6
    t = as_typed([a, 2, 1, "i"], writable=False, op="Send")
    assert np.frombuffer(t.view, "i").tolist() == [1, 2]
    with pytest.raises(BufferError_, match="cannot map typecode 'zz'"):
        as_typed([a, "zz"], writable=False, op="Send")


def test_count_is_per_block_in_collectives():
    buf = np.zeros(8, "i")
    t = as_typed([buf, 2, MPI.INT], writable=True, op="Allgather", blocks=4)
    assert t.count == 8 and t.nbytes == 32


def test_dlpack_buffer_is_taken():
    class Capsule:
        def __init__(self, a):
            self.a = a

        def __dlpack__(self, **kw):
            return self.a.__dlpack__(**kw)

        def __dlpack_device__(self):
            return self.a.__dlpack_device__()

    a = np.arange(3, dtype="d")
    assert as_typed(Capsule(a), writable=False, op="Send").count == 3


def test_dlpack_complex_as_two_float_lanes_counts_complex_elements():
    # How a complex long double travels in DLPack (its 256 bits do not fit the 8-bit field):
    # float lanes of half its size, two per element, as mpi4py reads it. Taken as bytes, a
    # count of elements became a count of bytes and the data came short, silently.
    import ctypes

    class DLDataType(ctypes.Structure):
        _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8),
                    ("lanes", ctypes.c_uint16)]

    class DLTensor(ctypes.Structure):
        _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int32),
                    ("device_id", ctypes.c_int32), ("ndim", ctypes.c_int32),
                    ("dtype", DLDataType)]

    class TwoLanes:
        def __init__(self, a):
            self.a = a

        def __dlpack__(self, **kw):
            capsule = self.a.__dlpack__(**kw)
            # a versioned capsule (asked for by max_version) holds the tensor after a version,
            # two pointers and flags
            name, offset = (b"dltensor_versioned", 32) if kw.get("max_version") else \
                (b"dltensor", 0)
            get = ctypes.pythonapi.PyCapsule_GetPointer
            get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
            t = DLTensor.from_address(get(capsule, name) + offset)
            t.dtype.code, t.dtype.bits, t.dtype.lanes = 2, 64, 2  # float64 x 2 = complex128
            return capsule

        def __dlpack_device__(self):
            return self.a.__dlpack_device__()

    a = np.full(4, -1, dtype="D")
    t = as_typed([TwoLanes(a), 2], writable=True, op="Recv")
    assert t.count == 2 and t.nbytes == 32 and t.dt == MPI.C_DOUBLE_COMPLEX



def test_host_cuda_array_interface_counts_elements():
    class HostCAI:  # a device-array stand-in whose memory is this process's
        def __init__(self, a):
            self.a = a
            self.__cuda_array_interface__ = {
                "shape": a.shape, "typestr": a.dtype.str, "version": 3, "strides": None,
                "data": (a.__array_interface__["data"][0], False)}

    g = np.full(4, -1, dtype="g")  # long double has no memoryview cast: counted all the same
    t = as_typed([HostCAI(g), 2], writable=True, op="Recv")
    assert t.count == 2 and t.nbytes == 2 * g.itemsize
    t.view[:] = np.arange(4, dtype="g").tobytes()[:t.nbytes]
    assert g.tolist() == [0, 1, -1, -1]


def test_vector_spec_forms_follow_mpi4py():
    buf = np.zeros(6, "i")
    v = as_vector([buf, 2, "i"], 3, writable=True, op="Gatherv")  # an integer count: every block
    assert v.counts == [2, 2, 2] and v.displs == [0, 2, 4]
    v = as_vector([buf, (1, 2), "i"], 3, writable=True, op="Gatherv")  # integer displ: a stride
    assert v.counts == [1, 1, 1] and v.displs == [0, 2, 4]
    v = as_vector(buf, 4, writable=True, op="Gatherv")  # no counts: split evenly
    assert v.counts == [2, 2, 1, 1]


def test_object_without_buffer_refused():
    with pytest.raises(BufferError_, match="does not expose a buffer"):
        as_view([1, 2, 3], writable=False, op="Send")


def test_plain_pair_only_for_what_as_typed_would_take_whole(monkeypatch):
    import mmpi._engine.buffers
    from mmpi._engine.buffers import as_typed, plain_pair

    monkeypatch.setattr(mmpi._engine.buffers, "NDARRAYS", {})  # as in a fresh process
    a, b = np.ones(3, np.float32), np.zeros(3, np.float32)
    assert plain_pair(a, b) is None  # dtype not worked out yet by as_typed: general path
    t = as_typed(b, writable=True, op="x")
    assert plain_pair(a, b) == t.dt == MPI.FLOAT
    assert plain_pair(MPI.IN_PLACE, b) == MPI.FLOAT
    assert plain_pair(a, b.reshape(1, 3)) == MPI.FLOAT  # shape does not matter, size does
    assert plain_pair(a, np.zeros(4, np.float32)) is None  # sizes differ
    assert plain_pair(a, np.zeros(3, np.float64)) is None  # dtypes differ
    assert plain_pair(a, np.zeros(6, np.float32)[::2]) is None  # not contiguous
    assert plain_pair(np.ones(6, np.float32)[::2], b) is None
    ro = np.zeros(3, np.float32)
    ro.flags.writeable = False
    assert plain_pair(a, ro) is None  # the receive array is read-only
    assert plain_pair(a, [b, MPI.FLOAT]) is None  # a spec: parsed in full
    assert plain_pair([a, MPI.FLOAT], b) is None
    assert plain_pair(bytearray(12), b) is None
