"""Virtual ranks: which cluster runs each one, and as which of its local ranks. Pure, no MPI.

The default (thesis) layout puts the low cluster's ranks first: low holds 0..x-1, high
x..x+y-1. A rank map may place any virtual rank in either cluster; local ranks then follow the
virtual ranks' order within each cluster, so local rank i of a cluster is the i-th smallest
virtual rank it holds.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import RankError

CLUSTERS = ("low", "high")


class Layout:
    """The virtual-rank layout of a bridged job (immutable)."""

    __slots__ = ("owners", "_local", "_vranks")
    owners: tuple[str, ...]  # the cluster of each virtual rank
    _local: tuple[int, ...]  # the local rank of each virtual rank
    _vranks: dict[str, tuple[int, ...]]  # each cluster's virtual ranks, ascending

    def __init__(self, low_size: int, high_size: int, owners: Sequence[str] | None = None):
        if owners is None:
            owners = ("low",) * low_size + ("high",) * high_size
        owners = tuple(owners)
        for c in owners:
            if c not in CLUSTERS:
                raise ValueError(f"unknown cluster {c!r} in a layout (expected low or high)")
        vranks = {c: tuple(v for v, o in enumerate(owners) if o == c) for c in CLUSTERS}
        if (len(vranks["low"]), len(vranks["high"])) != (low_size, high_size):
            raise ValueError(f"a layout of {low_size}+{high_size} ranks cannot place "
                             f"{len(vranks['low'])} in low and {len(vranks['high'])} in high")
        if low_size < 1 or high_size < 1:
            raise ValueError(f"both clusters need at least one rank, got {low_size}+{high_size}")
        local = [0] * len(owners)
        for c in CLUSTERS:
            for i, v in enumerate(vranks[c]):
                local[v] = i
        object.__setattr__(self, "owners", owners)
        object.__setattr__(self, "_local", tuple(local))
        object.__setattr__(self, "_vranks", vranks)

    @classmethod
    def from_owners(cls, owners: Sequence[str]) -> Layout:
        """The layout that puts virtual rank v in cluster owners[v]."""
        owners = tuple(owners)
        return cls(owners.count("low"), owners.count("high"), owners)

    def __setattr__(self, name, value):
        raise AttributeError("a Layout is immutable")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Layout) and other.owners == self.owners

    def __hash__(self) -> int:
        return hash(self.owners)

    def __repr__(self) -> str:
        if self.is_blocks:
            return f"Layout(low={self.low_size}, high={self.high_size})"
        return f"Layout(owners={''.join(c[0] for c in self.owners)})"

    @property
    def low_size(self) -> int:
        """Number of ranks in the low cluster."""
        return len(self._vranks["low"])

    @property
    def high_size(self) -> int:
        """Number of ranks in the high cluster."""
        return len(self._vranks["high"])

    @property
    def size(self) -> int:
        """Number of ranks in the bridged world."""
        return len(self.owners)

    @property
    def is_blocks(self) -> bool:
        """Whether this is the default layout: low's ranks first, then high's."""
        return self.owners == ("low",) * self.low_size + ("high",) * self.high_size

    def cluster_size(self, cluster: str) -> int:
        """Number of ranks in `cluster`."""
        return len(self._vranks[cluster])

    def vranks(self, cluster: str) -> tuple[int, ...]:
        """Virtual ranks of `cluster`, by local rank."""
        return self._vranks[cluster]

    def vrank(self, cluster: str, local: int) -> int:
        """Virtual rank of `cluster`'s local rank `local`."""
        ranks = self._vranks[cluster]
        if not 0 <= local < len(ranks):
            raise RankError(f"local rank {local} is not in cluster {cluster!r}")
        return ranks[local]

    def locate(self, vrank: int) -> tuple[str, int]:
        """(cluster, local rank) of virtual rank `vrank`."""
        if not 0 <= vrank < len(self.owners):
            raise RankError(f"rank {vrank} is out of range for a world of size {self.size}")
        return self.owners[vrank], self._local[vrank]

    def cluster_of(self, vrank: int) -> str:
        """Name of the cluster holding `vrank`."""
        return self.locate(vrank)[0]


def other(cluster: str) -> str:
    """The cluster on the other side of the zipper."""
    return "high" if cluster == "low" else "low"
