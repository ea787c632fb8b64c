"""Where mpi4py's own tests and demos found the bridge unlike mpi4py: the same answers natively.

Run on 4 ranks natively and 2+2 bridged (the ranks 0, 1 of a 2+2 job are one cluster). Each
rank prints `rank R: <check> <value>` lines, gathered and printed by rank 0. Checks: the class
of requests (`type(req) is MPI.Prequest`), `free()` of the predefined communicators, pickling
sessions, the error class of `COMM_WORLD.Free()` and of a count mismatch, the docstrings of the
namespace (mpi4py's test_doc), and the native handle of communicators: of one inside a cluster
through `handle`, `fromhandle`, libmpi called with ctypes and mpi4py's C API (as its wrap-c and
wrap-ctypes demos do); of COMM_WORLD, which spans both clusters bridged, where the bridge must
say NotBridged instead of handing C MPI_COMM_NULL.
"""

import ctypes
import pickle
import textwrap

import numpy as np
from mpi4py import MPI

world = MPI.COMM_WORLD
rank, size = world.Get_rank(), world.Get_size()
lines = []


def say(check, value):
    lines.append(f"rank {rank}: {check} {value}")


def outcome(fn):
    """What `fn()` gives, or the kind of error it raises (NotBridged by name)."""
    try:
        return fn()
    except NotImplementedError as exc:
        return type(exc).__name__ if type(exc).__name__ == "NotBridged" else "NotImplemented"
    except MPI.Exception as exc:
        return f"MPI.Exception class {exc.Get_error_class()}"
    except ValueError:
        return "ValueError"


# -- the class of requests ------------------------------------------------------------
buf = np.zeros(4, "i")
peer = (rank + size // 2) % size  # across the zipper when bridged
req = world.Isend(np.arange(4, dtype="i"), peer, 3)
say("type Isend is MPI.Request", type(req) is MPI.Request)
world.Recv(buf, peer, 3)
req.Wait()
preq = world.Send_init(b"", MPI.PROC_NULL, 0)
say("type Send_init is MPI.Prequest", type(preq) is MPI.Prequest)
dupe = MPI.Prequest(preq)
say("MPI.Prequest(preq)", (type(dupe) is MPI.Prequest, dupe == preq))
preq.Start()
preq.Wait()
preq.Free()
rinit = world.Recv_init(buf, MPI.PROC_NULL)
say("type Recv_init is MPI.Prequest", type(rinit) is MPI.Prequest)
rinit.Free()
part = world.Precv_init(buf, 2, rank, tag=9)
say("type Precv_init is MPI.Prequest", type(part) is MPI.Prequest)
part.Free()
got = bytearray(1)
self_req = MPI.COMM_SELF.Isend(b"x", 0, 1)
say("MPI.Request(native request)", type(MPI.Request(self_req)) is MPI.Request)
MPI.COMM_SELF.Recv(got, 0, 1)
self_req.Wait()
say("MPI.Request() null", (type(MPI.Request()) is MPI.Request, MPI.Request() == MPI.REQUEST_NULL))

# -- free() of the predefined communicators -------------------------------------------
for _ in range(3):
    MPI.COMM_SELF.free()
say("COMM_SELF.free()", (bool(MPI.COMM_SELF), MPI.COMM_SELF == MPI.COMM_NULL))
back = MPI.COMM_SELF.Irecv(got, 0, 2)
MPI.COMM_SELF.Send(b"y", 0, 2)
back.Wait()
say("COMM_SELF after free", bytes(got))
for _ in range(3):
    world.free()
copy = MPI.Intracomm(world)
copy.free()
say("COMM_WORLD.free()", (bool(world), bool(copy), copy == MPI.COMM_NULL, world.Get_size()))
say("COMM_WORLD.Free()", outcome(world.Free))
say("COMM_WORLD.Free() is MPI.ERR_COMM", outcome(lambda: world.Free()) ==
    f"MPI.Exception class {MPI.ERR_COMM}")

# -- pickling sessions ------------------------------------------------------------------
null = MPI.SESSION_NULL
say("pickle SESSION_NULL", pickle.loads(pickle.dumps(null)) is null)
again = pickle.loads(pickle.dumps(type(null)(null)))
say("pickle a copy of SESSION_NULL", (type(again) is type(null), again == null))
session = MPI.Session.Init()
say("pickle a session", outcome(lambda: pickle.dumps(session)))
session.Finalize()

# -- a count mismatch: mpi4py's ValueError, not an MPI.Exception ------------------------
try:
    world.Allreduce([np.zeros(4, "i"), 3, MPI.INT], [np.zeros(4, "i"), 4, MPI.INT])
except Exception as exc:  # noqa: BLE001 - its class is the check
    say("count mismatch", (isinstance(exc, ValueError), isinstance(exc, MPI.Exception)))


# -- docstrings, as mpi4py's test_doc reads them -----------------------------------------
def undocumented():
    kinds = (type(MPI.Init), type(MPI.Comm.Get_rank), type(MPI.Comm.rank),
             type(MPI.Comm.Get_parent), type(MPI.buffer.allocate))
    bad = []

    def walk(obj, prefix):
        name = getattr(obj, "__name__", None)
        if name is None or name in ("builtins", "py2f", "f2py"):
            return
        name = f"{prefix}.{name}" if prefix else name
        doc = getattr(obj, "__doc__", None)
        if type(obj) in (type(MPI), type(MPI.Comm)):
            for value in vars(obj).values():
                if isinstance(value, (classmethod, staticmethod)):
                    value = value.__get__(obj)
                walk(value, name)
        elif type(obj) in kinds and doc is not None:
            doc = doc.partition("\n")[2]
            doc = textwrap.dedent(doc[1:]) if doc.startswith("\n") else doc
        elif type(obj) not in kinds:
            return
        leaf = name.rsplit(".", 1)[-1]
        if not doc or not doc.strip():
            if not leaf.startswith("_"):
                bad.append(name)
            return
        doc = doc.strip()
        if doc[0] == doc[0].lower() or not doc.endswith(".") or \
                not doc.partition("\n")[0].endswith("."):
            bad.append(name)

    walk(MPI, "")
    return bad


say("undocumented names", undocumented()[:5])


# -- native handles: of a communicator inside one cluster (ranks 0, 1 of a 2+2 job) -------
def libmpi():
    with open("/proc/self/maps") as maps:
        path = next(line.split()[-1] for line in maps if "/libmpi.so" in line)
    return ctypes.CDLL(path)


COMM_T = ctypes.c_uint if MPI._sizeof(MPI.Comm) == ctypes.sizeof(ctypes.c_uint) else \
    ctypes.c_void_p


def c_size_rank(handle):
    """MPI_Comm_size and MPI_Comm_rank called from C (ctypes), as wrap-ctypes does."""
    lib, out = libmpi(), (ctypes.c_int(), ctypes.c_int())
    lib.MPI_Comm_size(COMM_T(handle), ctypes.byref(out[0]))
    lib.MPI_Comm_rank(COMM_T(handle), ctypes.byref(out[1]))
    return out[0].value, out[1].value


def capi_handle(comm):
    """The handle mpi4py's C API gives C code for `comm` (PyMPIComm_Get), as wrap-c does."""
    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    get_pointer.restype = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object)
    get = get_pointer(MPI.__pyx_capi__["PyMPIComm_Get"], b"MPI_Comm *(PyObject *)")
    return COMM_T.from_address(get(comm)).value


def capi_new(handle):
    """The communicator mpi4py's C API makes of a handle (PyMPIComm_New)."""
    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    get_pointer.restype = ctypes.PYFUNCTYPE(ctypes.py_object, COMM_T)
    return get_pointer(MPI.__pyx_capi__["PyMPIComm_New"], b"PyObject *(MPI_Comm)")(handle)


half = world.Split(rank // (size // 2), rank)
say("half handle", outcome(lambda: (half.handle == MPI._handleof(half),
                                    COMM_T(half.handle).value == capi_handle(half))))
say("half from C", outcome(lambda: c_size_rank(half.handle) == (half.size, half.rank)))
say("half fromhandle", outcome(lambda: (MPI.Comm.fromhandle(half.handle) == half,
                                        type(half).fromhandle(half.handle) == half,
                                        MPI.Comm.f2py(half.py2f()) == half,
                                        capi_new(half.handle) == half)))
say("half from C sums", outcome(lambda: MPI.Comm.fromhandle(half.handle).allreduce(rank)))
say("COMM_SELF through the C API", outcome(
    lambda: type(capi_new(capi_handle(MPI.COMM_SELF))) is type(MPI.COMM_SELF)))
half.Free()
say("freed handle", half.handle == MPI.COMM_NULL.handle)

# -- of COMM_WORLD: bridged, it spans both clusters: no native handle, loudly -------------
say("world handle", outcome(lambda: world.handle >= 0))
say("world _handleof", outcome(lambda: MPI._handleof(world) >= 0))
say("world _addressof", outcome(lambda: MPI._addressof(world) > 0))
say("world py2f", outcome(lambda: world.py2f() != 0))
say("world C API", outcome(lambda: c_size_rank(capi_handle(world)) == (size, rank)))

every = world.gather(lines, root=0)
if rank == 0:
    print("\n".join(line for got in every for line in got), flush=True)
