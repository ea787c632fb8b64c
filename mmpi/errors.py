"""The MMPIError hierarchy: every error mmpi raises names what was wrong and whose fault it is.

Each also answers as mpi4py's `MPI.Exception` does (`Get_error_class()`, ...), with the MPI
error class it stands for, and in a bridged program `except MPI.Exception` catches it (see
`_runtime.facade`), except where mpi4py raises a plain ValueError (`BufferError_`). This
module imports no MPI: the error classes' numbers are looked up when asked.
"""

from __future__ import annotations

import sys


def _mpi_constant(name: str) -> int:
    native = sys.modules.get("mmpi._startup.native")
    mpi = getattr(native, "MPI", None) or sys.modules.get("mpi4py.MPI")
    return getattr(mpi, name, getattr(mpi, "ERR_OTHER", 15)) if mpi is not None else 15


class MMPIError(Exception):
    """Base class of every error raised by mmpi."""

    mpi_error = "ERR_OTHER"  # the MPI error class this error stands for
    # Whether mpi4py would raise it as an MPI.Exception (an error MPI itself reports); the
    # argument errors mpi4py finds before MPI sees the call are plain ValueErrors there.
    mpi_exception = True
    # In a bridged rank, each class has a twin that is also an mpi4py MPI.Exception, and
    # errors are made as the twins (registered by `_runtime.facade.mpi_exceptions`).
    _twins: dict[type, type] = {}

    def __new__(cls, *args, **kwargs):
        """An instance of `cls`, or of its twin in a bridged rank."""
        twin = MMPIError._twins.get(cls)
        return super().__new__(twin or cls, *args, **kwargs)

    def Get_error_class(self) -> int:
        """The MPI error class (as mpi4py's MPI.Exception)."""
        return _mpi_constant(self.mpi_error)

    def Get_error_code(self) -> int:
        """The MPI error code: the error class."""
        return self.Get_error_class()

    def Get_error_string(self) -> str:
        """The error message."""
        return str(self)

    error_class = property(Get_error_class)
    error_code = property(Get_error_code)
    error_string = property(Get_error_string)


class UsageError(MMPIError, ValueError):
    """The caller passed something MPI does not allow (rank, tag, buffer, datatype, root...)."""

    mpi_error = "ERR_ARG"


class RankError(UsageError):
    """A rank argument is outside the communicator."""

    mpi_error = "ERR_RANK"


class RootError(RankError):
    """A collective's root is outside the communicator."""

    mpi_error = "ERR_ROOT"


class CommError(UsageError):
    """A communicator argument is not one (MPI.COMM_NULL, one freed), or not to be freed."""

    mpi_error = "ERR_COMM"


class TagError(UsageError):
    """A tag argument is negative (other than ANY_TAG on receive) or above TAG_UB."""

    mpi_error = "ERR_TAG"


class BufferError_(UsageError):
    """A buffer argument is unusable (not contiguous, read-only for a receive, unknown datatype).

    Also counts that do not fit the buffers (a send count that differs from the receive
    count, counts beyond a buffer). mpi4py checks these itself and raises ValueError, not
    MPI.Exception: so does this class, also in a bridged rank (it has no MPI.Exception twin).
    """

    mpi_error = "ERR_BUFFER"
    mpi_exception = False


class NotBridged(MMPIError, NotImplementedError):
    """The program called something the bridge does not provide (yet); the message names it."""

    mpi_error = "ERR_UNSUPPORTED_OPERATION"


class TruncationError(MMPIError):
    """A message arrived that is larger than the receive buffer (MPI_ERR_TRUNCATE)."""

    mpi_error = "ERR_TRUNCATE"


class FileSystemsApart(MMPIError, RuntimeError):
    """The two clusters do not see one file system where an MPI-IO file needs one."""

    mpi_error = "ERR_FILE"


class StateError(MMPIError, RuntimeError):
    """An operation was attempted in the wrong state (after Finalize, on a freed request...)."""


class RankGone(StateError):
    """A rank this operation needs has already finalized or exited: it can never complete."""


class BridgeError(MMPIError, RuntimeError):
    """The bridge itself failed: lost forwarder, lost cluster, start-up failure."""


class ForwarderLost(BridgeError):
    """The forwarder stopped answering; the job cannot continue."""


class ProtocolError(BridgeError):
    """A peer sent bytes that do not follow the mmpi wire protocol (RemoteProtocolError)."""


__all__ = [
    "MMPIError",
    "UsageError",
    "RankError",
    "RootError",
    "CommError",
    "TagError",
    "BufferError_",
    "NotBridged",
    "TruncationError",
    "FileSystemsApart",
    "StateError",
    "RankGone",
    "BridgeError",
    "ForwarderLost",
    "ProtocolError",
]
