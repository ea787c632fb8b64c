"""MPI-IO files on a communicator across the zipper: a native file per cluster, one file system.

Rule 1: each cluster opens the file natively on its own communicator, the cluster of the
        communicator's rank 0 first, with the program's mode; the other cluster then opens
        what the first opened, without MODE_CREATE and MODE_EXCL (the file exists by then)
        and without MODE_DELETE_ON_CLOSE (the first cluster deletes it, once every rank has
        reached Close).
Rule 2: one file system, checked at the open: the second cluster must find the file, and its
        leader must see the same file (inode, size, modification time) as the first's leader
        saw; else every rank raises FileSystemsApart naming the path, and nothing stays open.
Rule 3: data calls go to the cluster's native file: individual file pointers and explicit
        offsets are each rank's own, and a collective data call is collective within each
        cluster, which MPI-IO's consistency rules allow (the two clusters' accesses meet
        only through Sync, a barrier and Sync, as any two processes' do).
Rule 4: what one cluster's file does must not undo the other's writes: ROMIO's collective
        buffering and data sieving fill the gaps of a strided write with what they read
        first, which would overwrite the other cluster's data written meanwhile, so both
        are off for writes (hints romio_cb_write, romio_ds_write); Set_size and Preallocate
        end with a barrier across the zipper, so no rank writes before both have truncated.
Rule 5: the shared file pointer is one number, held in a window of the file's communicator
        on its rank 0 (8 bytes there, none elsewhere; served as every window across the
        zipper is). An independent call on it (`Read_shared`, `Write_shared`, their `I`
        forms, `Get_position_shared`) takes its place with one Fetch_and_op, then reads or
        writes at an explicit offset. A collective one (`*_ordered`, `Seek_shared`;
        `Set_view` resets it): rank 0 gathers the ranks' counts, stores the new pointer and
        scatters their offsets, then a collective call at those offsets. MPI
        lets no independent call on the pointer run beside a collective one, so rank 0
        moves it only once every rank is in the call, before any leaves.
"""

from __future__ import annotations

import itertools
import os

import numpy as np

from .._engine.buffers import as_typed
from .._startup.native import MPI
from ..errors import FileSystemsApart

_NOT_AGAIN = MPI.MODE_CREATE | MPI.MODE_EXCL | MPI.MODE_DELETE_ON_CLOSE


def _stat(filename: str):
    """What identifies the file `filename` names here (ROMIO's "fs:" prefix aside), or None."""
    for name in (filename, filename.partition(":")[2]):
        try:
            st = os.stat(name)
        except (OSError, ValueError):
            continue
        return (st.st_ino, st.st_size, st.st_mtime_ns)
    return None


def _open(native_comm, filename: str, amode: int, info):
    """(the native file or None, the MPI error class or 0, the exception or None)."""
    hints = MPI.Info.Create() if info == MPI.INFO_NULL else info.Dup()
    hints.Set("romio_cb_write", "disable")  # Rule 4
    hints.Set("romio_ds_write", "disable")
    try:
        return MPI.File.Open(native_comm, filename, amode, hints), 0, None
    except MPI.Exception as exc:
        return None, exc.Get_error_class(), exc
    finally:
        hints.Free()


def open_across(comm, core, filename: str, amode: int, info, window) -> BridgedFile:
    """File.Open on `comm`, a bridged communicator across the zipper (`core`: its core).

    `window(comm, memory)` makes a window across the zipper (the shared pointer's, Rule 5).
    """
    d = comm.Dup()  # the file's own context for its few bridged steps
    dcore = d._core
    first = 0 in dcore.mine
    leader = dcore.rank == dcore.mine[0]
    native, code, exc = None, 0, None
    if first:
        native, code, exc = _open(dcore.coll.comm, filename, amode, info)
    seen = d.allgather((first, code, _stat(filename) if first and leader and not code else None))
    failed = [c for f, c, _ in seen if f and c]
    if failed:
        _give_up(d, native)
        raise exc if exc is not None else MPI.Exception(failed[0])
    theirs = next(s for f, c, s in seen if f and s is not None)
    if not first:
        native, code, exc = _open(dcore.coll.comm, filename, amode & ~_NOT_AGAIN, info)
    seen = d.allgather((first, code, _stat(filename) if not first and leader and not code
                        else None))
    apart = [c for f, c, _ in seen if not f and c]
    mine = next((s for f, c, s in seen if not f and s is not None), None)
    if apart or mine != theirs:
        _give_up(d, native)
        here = core.engine.cluster
        other = "high" if here == "low" else "low"
        opened, then = (here, other) if first else (other, here)
        why = "does not find it" if apart else "sees another file by that name"
        raise FileSystemsApart(
            f"File.Open({filename!r}) on a communicator across the zipper: the {opened} "
            f"cluster opened it but the {then} cluster {why}; both clusters must see "
            "one file system (run both in a shared directory, or open the file on each "
            "cluster's own communicator)")
    pointer = np.zeros(1 if d.Get_rank() == 0 else 0, np.int64)
    return BridgedFile(native, d, amode, window(d, memoryview(pointer).cast("B")), pointer)


def _give_up(d, native) -> None:
    if native is not None:
        native.Close()
    d.Free()


class BridgedFile(MPI.File):
    """An MPI.File opened across the zipper: this cluster's native file, and the whole group.

    Calls not written out here go to the native file (Rule 3), made below.
    """

    def __new__(cls, *args, **kwargs):
        return super().__new__(cls)

    def __init__(self, native, comm, amode: int, win, pointer) -> None:
        self._native = native
        self._comm = comm  # the bridged communicator (a Dup of the one it was opened on)
        self._amode = amode
        self._win = win  # the shared file pointer's window, in etypes of the view (Rule 5)
        self._pointer = pointer  # its memory here: one int64 on rank 0, none elsewhere
        self._etype = 1  # bytes of the view's etype

    def _file(self) -> MPI.File:
        if self._native is None:
            raise MPI.Exception(MPI.ERR_FILE)
        return self._native

    def __reduce__(self):
        raise ValueError("cannot serialize 'mpi4py.MPI.File' instance")

    def __bool__(self) -> bool:
        return self._native is not None

    def __eq__(self, other) -> bool:
        if other is self:
            return True
        return self._native is None and isinstance(other, MPI.File) and not other

    def __ne__(self, other) -> bool:
        return not self == other

    __hash__ = object.__hash__

    def Close(self) -> None:
        """Close the file: collective over the whole communicator it was opened on."""
        native = self._file()
        self._win.Free()  # collective: nobody still uses it when the first cluster deletes it
        native.Close()
        self._native = None
        self._comm.Free()

    free = Close

    def Set_size(self, size: int) -> None:
        """Resize the file; every rank returns once both clusters have (Rule 4)."""
        self._file().Set_size(size)
        self._comm.Barrier()

    def Preallocate(self, size: int) -> None:
        """Preallocate space; every rank returns once both clusters have (Rule 4)."""
        self._file().Preallocate(size)
        self._comm.Barrier()

    def Set_view(self, disp=0, etype=None, filetype=None, datarep="native",
                 info=MPI.INFO_NULL) -> None:
        """Set the view (see mpi4py); the shared file pointer goes back to zero (Rule 5)."""
        self._file().Set_view(disp, etype, filetype, datarep, info)
        self._etype = (MPI.BYTE if etype is None else etype).Get_size()
        self._comm.Barrier()  # every rank's calls before are done (Rule 5) ...
        self._pointer[:] = 0  # rank 0 only: the others have none
        self._comm.Barrier()  # ... and none after starts before the pointer is reset

    def _count(self, buf, name: str) -> int:
        return as_typed(buf, writable=False, op=f"File.{name}").nbytes // max(self._etype, 1)

    def _ordered(self, buf, name: str) -> int:
        """The offset of this rank's part of an ordered call on `buf`; moves the pointer."""
        # to rank 0 and back: it stores the new pointer before any rank leaves (Rule 5)
        counts = self._comm.gather(self._count(buf, name), root=0)
        starts = None
        if counts is not None:
            starts = list(itertools.accumulate(counts[:-1], initial=int(self._pointer[0])))
            self._pointer[:] = starts[-1] + counts[-1]
        return self._comm.scatter(starts, root=0)

    def _take(self, n: int) -> int:
        """Take `n` etypes at the shared pointer (independent): where they start."""
        self._file()
        old = np.zeros(1, np.int64)
        self._win.Lock(0, MPI.LOCK_SHARED)
        self._win.Fetch_and_op(np.array([n], np.int64), old, 0, 0,
                               MPI.SUM if n else MPI.NO_OP)
        self._win.Unlock(0)
        return int(old[0])

    def Read_shared(self, buf, status=None) -> None:
        """Read at the shared file pointer, moving it (independent)."""
        self._file().Read_at(self._take(self._count(buf, "Read_shared")), buf, status)

    def Write_shared(self, buf, status=None) -> None:
        """Write at the shared file pointer, moving it (independent)."""
        self._file().Write_at(self._take(self._count(buf, "Write_shared")), buf, status)

    def Iread_shared(self, buf):
        """Start a read at the shared file pointer, moving it now (independent)."""
        return self._file().Iread_at(self._take(self._count(buf, "Iread_shared")), buf)

    def Iwrite_shared(self, buf):
        """Start a write at the shared file pointer, moving it now (independent)."""
        return self._file().Iwrite_at(self._take(self._count(buf, "Iwrite_shared")), buf)

    def Write_ordered(self, buf, status=None) -> None:
        """Write at the shared file pointer, in rank order (collective)."""
        self._file().Write_at_all(self._ordered(buf, "Write_ordered"), buf, status)

    def Read_ordered(self, buf, status=None) -> None:
        """Read at the shared file pointer, in rank order (collective)."""
        self._file().Read_at_all(self._ordered(buf, "Read_ordered"), buf, status)

    def Write_ordered_begin(self, buf) -> None:
        """Start an ordered write (split collective)."""
        self._file().Write_at_all_begin(self._ordered(buf, "Write_ordered_begin"), buf)

    def Write_ordered_end(self, buf, status=None) -> None:
        """Finish an ordered write."""
        self._file().Write_at_all_end(buf, status)

    def Read_ordered_begin(self, buf) -> None:
        """Start an ordered read (split collective)."""
        self._file().Read_at_all_begin(self._ordered(buf, "Read_ordered_begin"), buf)

    def Read_ordered_end(self, buf, status=None) -> None:
        """Finish an ordered read."""
        self._file().Read_at_all_end(buf, status)

    def Seek_shared(self, offset: int, whence: int = MPI.SEEK_SET) -> None:
        """Move the shared file pointer (collective; the same arguments on every rank)."""
        f = self._file()
        self._comm.Barrier()  # every rank's calls before are done (Rule 5)
        at = None
        if self._comm.Get_rank() == 0:  # it holds the pointer
            if whence == MPI.SEEK_SET:
                at = offset
            elif whence == MPI.SEEK_CUR:
                at = int(self._pointer[0]) + offset
            else:  # from the end of the file, in the view's etypes, as the individual pointer
                mine = f.Get_position()
                f.Seek(offset, whence)
                at = f.Get_position()
                f.Seek(mine, MPI.SEEK_SET)
            if at >= 0:
                self._pointer[:] = at
        if self._comm.bcast(at, root=0) < 0:  # and no rank goes on before it is stored
            raise MPI.Exception(MPI.ERR_ARG)

    def Get_position_shared(self) -> int:
        """The shared file pointer, in etypes of the view."""
        return self._take(0)

    def Get_amode(self) -> int:
        """The access mode the file was opened with."""
        self._file()
        return self._amode

    def Get_group(self):
        """The group of the communicator the file was opened on (both clusters)."""
        self._file()
        return self._comm.Get_group()

    amode = property(Get_amode)
    group = property(Get_group)
    group_size = property(lambda self: self._comm.Get_size())
    group_rank = property(lambda self: self._comm.Get_rank())
    atomicity = property(lambda self: self._file().Get_atomicity(),
                         lambda self, flag: self._file().Set_atomicity(flag))
    info = property(lambda self: self._file().Get_info(),
                    lambda self, info: self._file().Set_info(info))
    size = property(lambda self: self._file().Get_size())
    handle = property(lambda self: self._file().handle)


def _to_native(name: str):
    def call(self, *args, **kwargs):
        return getattr(self._file(), name)(*args, **kwargs)

    call.__name__ = name
    call.__doc__ = f"{name} on this cluster's native file (see mpi4py's MPI.File.{name})."
    return call


for _name in dir(MPI.File):
    if _name.startswith("_") or _name in BridgedFile.__dict__:
        continue
    _raw = MPI.File.__dict__.get(_name)
    if callable(_raw) and not isinstance(_raw, (classmethod, staticmethod)):
        setattr(BridgedFile, _name, _to_native(_name))

__all__ = ["BridgedFile", "open_across"]
