"""The compiled backend: this folder's C files, built as the extension `_compiled`.

Built by `pip install .` where a C compiler and the MPI's headers were found (setup.py),
against the MPI mpi4py loads (the mpich wheel's, or Open MPI's); used only with that MPI
(`wire.compiled.load`). Communicators are passed to C as mpi4py's integer handles.

The C files, one concern each (each names the Python reference it follows):
  crank.c   the transport's hot loops: `send_eager` and its outbox (`reap`, `pending`),
            `drain` (a link's messages, plain eager ones into their posted receive),
            `wait_link`, `wait_ops` (python.PythonBackend and the engine's waits)
  cpost.c   the lanes `Sender` and `Receiver`: a communicator's common Isend/Irecv
            (_api/p2p_methods.py, _engine/p2p.py)
  ccoll.c   the lane `small_coll`: a small blocking Barrier, Allreduce, Bcast or Reduce in
            one call (_collectives/compiled.py, carried.py, reductions.py); ccoll.h its
            helpers shared with cfront.c and cdirect.c
  cfront.c  the lane `Front`: those calls' argument checks too, before any Python
  cdirect.c the lane `alltoall_blocks`: a blocking Alltoall of large blocks (_collectives/
            direct.py)
  cgate.c   `Gate`: the progress thread's gate (python.Gate)
  capi.c    `wrap_capi`: mpi4py's C API (PyMPIComm_Get, PyMPIComm_New) asking the bridge
            first, for C extensions handed a bridged communicator (_runtime/facade.py)
The wire's constants come from one header, mmpi/wire/mmpi_wire.h, held against
wire/protocol.py by tests/unit/test_wire_header.py.
"""

from __future__ import annotations

from .._startup.native import MPI
from ..wire import compiled as _loader

_ext, WHY_NOT = _loader.load("mmpi._backend._compiled", MPI.Get_library_version())


class CompiledBackend:
    """The compiled backend (see interface.Backend); its lanes are the extension itself."""

    name = "compiled"

    def __init__(self, ext) -> None:
        self.lanes = ext
        self.Gate = ext.Gate
        self.drain = ext.drain
        self.wait_link = ext.wait_link
        self.wait_ops = ext.wait_ops
        self.send_eager = ext.send_eager
        self.reap = ext.reap
        self.pending = ext.pending

    def link(self, comm) -> int:
        """A link is the intercommunicator's handle."""
        return comm.handle


def extension():
    """The extension module itself where it loads (its C API wrapper serves every backend)."""
    return _ext


def backend() -> CompiledBackend | None:
    """The compiled backend, or None where it was not built or does not load (WHY_NOT)."""
    return None if _ext is None else CompiledBackend(_ext)


__all__ = ["WHY_NOT", "CompiledBackend", "backend"]
