"""MPI 4's persistent collectives and partitioned point-to-point calls, bridged.

`Bcast_init`, `Allreduce_init`, ... and `Psend_init`, `Precv_init` on a bridged communicator.

Rule 1: a persistent collective is its non-blocking call made again at every `Start`, with
        the arguments given at init (the buffers are read at each start, as MPI says). Its
        arguments are checked against the call's signature at init; what only the call can
        check (counts, roots) is checked at each start, where the native library checks it
        at init.
Rule 2: a partitioned transfer moves as one message: the send goes once every partition has
        been marked ready, and the receive's partitions all arrive together (`Parrived` is
        true for all of them at once). Partition counts may differ between the two sides,
        as MPI allows. The message travels as a standard send on the communicator with the
        given tag, so a plain receive posted for the same source and tag could match it; a
        program that mixes the two on one tag should not rely on which one does.
"""

from __future__ import annotations

import inspect

from .._startup.native import MPI
from ..errors import UsageError
from .coll_methods import CollectiveMethods
from .p2p_methods import as_int
from .prequest import Prequest

ANY_SOURCE, ANY_TAG = MPI.ANY_SOURCE, MPI.ANY_TAG

# the persistent collective -> the non-blocking call each Start makes
_COLLECTIVES = {
    "Barrier_init": "Ibarrier", "Bcast_init": "Ibcast", "Gather_init": "Igather",
    "Gatherv_init": "Igatherv", "Scatter_init": "Iscatter", "Scatterv_init": "Iscatterv",
    "Allgather_init": "Iallgather", "Allgatherv_init": "Iallgatherv",
    "Alltoall_init": "Ialltoall", "Alltoallv_init": "Ialltoallv",
    "Alltoallw_init": "Ialltoallw", "Reduce_init": "Ireduce", "Allreduce_init": "Iallreduce",
    "Reduce_scatter_block_init": "Ireduce_scatter_block",
    "Reduce_scatter_init": "Ireduce_scatter", "Scan_init": "Iscan", "Exscan_init": "Iexscan",
}
_NEIGHBOR = {
    "Neighbor_allgather_init": "Ineighbor_allgather",
    "Neighbor_allgatherv_init": "Ineighbor_allgatherv",
    "Neighbor_alltoall_init": "Ineighbor_alltoall",
    "Neighbor_alltoallv_init": "Ineighbor_alltoallv",
    "Neighbor_alltoallw_init": "Ineighbor_alltoallw",
}


def _persistent(name: str, start: str, owner: type):
    """`name`: a persistent version of `owner.start` (one more, last argument: info)."""
    sig = inspect.signature(getattr(owner, start))
    params = [p for p in sig.parameters.values() if p.name != "self"]

    def init(self, *args, **kwargs):
        self._core.check_live(name)
        kwargs.pop("info", None)  # hints only; none applies to the bridge
        if len(args) == len(params) + 1:  # the info argument, given by position
            args = args[:-1]
        try:
            sig.bind(self, *args, **kwargs)
        except TypeError as exc:
            raise TypeError(f"{name}: {exc}") from None
        call = getattr(self, start)
        return Prequest.made(lambda: call(*args, **kwargs)._op, self._core)

    init.__name__ = init.__qualname__ = name
    info = inspect.Parameter("info", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None)
    init.__signature__ = sig.replace(parameters=[*sig.parameters.values(), info])
    init.__doc__ = f"A persistent {start[1:]}: every Start makes the {start} call (MPI 4)."
    return init


def add_persistent(cls: type, neighbor: bool = False, skip: tuple[str, ...] = ()) -> None:
    """Give `cls` the persistent versions of its non-blocking collectives (or neighbour ones).

    None for the non-blocking calls named in `skip`.
    """
    for name, start in (_NEIGHBOR if neighbor else _COLLECTIVES).items():
        if start not in skip:
            setattr(cls, name, _persistent(name, start, cls))


class PersistentMethods:
    """Persistent collectives and partitioned point-to-point calls of a communicator."""

    __slots__ = ()

    def _p_count(self, partitions, call: str) -> int:
        n = as_int(partitions, "partition count", call)
        if n < 1:
            raise UsageError(f"{call} on rank {self._core.rank}: partition count {n} is "
                             "invalid (must be at least 1)")
        return n

    def Psend_init(self, buf, partitions, dest, tag=0, info=None):
        """A partitioned send: it goes once `Pready` has marked every partition (MPI 4)."""
        self._core.check_live("Psend_init")
        n = self._p_count(partitions, "Psend_init")
        self._dest(dest, "Psend_init")
        self._send_tag(tag, "Psend_init")
        return Prequest.made(lambda: self._send_op(buf, dest, tag, "Psend_init"), self._core,
                             n, sending=True)

    def Precv_init(self, buf, partitions, source=None, tag=None, info=None):
        """A partitioned receive: its partitions arrive together (MPI 4, see Rule 2)."""
        source = ANY_SOURCE if source is None else source
        tag = ANY_TAG if tag is None else tag
        self._core.check_live("Precv_init")
        n = self._p_count(partitions, "Precv_init")
        self._source(source, "Precv_init")
        self._recv_tag(tag, "Precv_init")
        return Prequest.made(lambda: self._irecv(buf, source, tag, "Precv_init")._op,
                             self._core, n)


for _name, _start in _COLLECTIVES.items():
    setattr(PersistentMethods, _name, _persistent(_name, _start, CollectiveMethods))
del _name, _start

__all__ = ["PersistentMethods", "add_persistent"]
