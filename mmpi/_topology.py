"""Virtual ranks: the low cluster holds 0..x-1, the high cluster x..x+y-1. Pure, no MPI."""

from __future__ import annotations

from dataclasses import dataclass

from .errors import RankError


@dataclass(frozen=True, slots=True)
class Layout:
    """The virtual-rank layout of a bridged job."""

    low_size: int
    high_size: int

    def __post_init__(self) -> None:
        if self.low_size < 1 or self.high_size < 1:
            raise ValueError(f"both clusters need at least one rank, got {self}")

    @property
    def size(self) -> int:
        """Number of ranks in the bridged world."""
        return self.low_size + self.high_size

    def offset(self, cluster: str) -> int:
        """Virtual rank of `cluster`'s local rank 0."""
        return 0 if cluster == "low" else self.low_size

    def cluster_size(self, cluster: str) -> int:
        """Number of ranks in `cluster`."""
        return self.low_size if cluster == "low" else self.high_size

    def vrank(self, cluster: str, local: int) -> int:
        """Virtual rank of `cluster`'s local rank `local`."""
        if not 0 <= local < self.cluster_size(cluster):
            raise RankError(f"local rank {local} is not in cluster {cluster!r}")
        return self.offset(cluster) + local

    def locate(self, vrank: int) -> tuple[str, int]:
        """(cluster, local rank) of virtual rank `vrank`."""
        if 0 <= vrank < self.low_size:
            return "low", vrank
        if self.low_size <= vrank < self.size:
            return "high", vrank - self.low_size
        raise RankError(f"rank {vrank} is out of range for a world of size {self.size}")

    def cluster_of(self, vrank: int) -> str:
        """Name of the cluster holding `vrank`."""
        return self.locate(vrank)[0]


def other(cluster: str) -> str:
    """The cluster on the other side of the zipper."""
    return "high" if cluster == "low" else "low"
