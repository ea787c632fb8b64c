"""The MMPIError hierarchy: every error mmpi raises names what was wrong and whose fault it is."""

from __future__ import annotations


class MMPIError(Exception):
    """Base class of every error raised by mmpi."""


class UsageError(MMPIError, ValueError):
    """The caller passed something MPI does not allow (rank, tag, buffer, datatype, root...)."""


class RankError(UsageError):
    """A rank argument is outside the communicator."""


class TagError(UsageError):
    """A tag argument is negative (other than ANY_TAG on receive) or above TAG_UB."""


class BufferError_(UsageError):
    """A buffer argument is unusable (not contiguous, read-only for a receive, unknown datatype)."""


class NotBridged(MMPIError, NotImplementedError):
    """The program called something the bridge does not provide (yet); the message names it."""


class TruncationError(MMPIError):
    """A message arrived that is larger than the receive buffer (MPI_ERR_TRUNCATE)."""


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
    "TagError",
    "BufferError_",
    "NotBridged",
    "TruncationError",
    "StateError",
    "RankGone",
    "BridgeError",
    "ForwarderLost",
    "ProtocolError",
]
