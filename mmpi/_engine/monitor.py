"""Communication monitoring on one rank: what it sent to each peer, by kind, size and phase.

Counted are the messages this rank sends (to virtual ranks): user point-to-point ("p2p"), and
those its collectives make ("coll"): the messages and crossings through the bridge as they are,
and the native collectives inside a cluster as the point-to-point data an ideal algorithm
would move (`Counting`). A peer in the other cluster means the bytes crossed the zipper.

Rule: when monitoring is off, the engine holds `monitor = None` and every hook is a single
`is not None` test; the collectives' native communicators are the plain ones (no `Counting`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence

from .._startup.native import MPI

BUCKETS = 48  # message sizes by power of two: bucket k holds 2**(k-1) < size <= 2**k


def bucket(nbytes: int) -> int:
    """The size bucket of a message of `nbytes` (0 for 0 or 1 byte)."""
    return min((nbytes - 1).bit_length(), BUCKETS - 1) if nbytes > 1 else 0


class Counters:
    """One phase's counters: per peer, messages, bytes and size histogram, by kind."""

    __slots__ = ("msgs", "bytes", "hist")

    def __init__(self, size: int) -> None:
        self.msgs = {"p2p": [0] * size, "coll": [0] * size}
        self.bytes = {"p2p": [0] * size, "coll": [0] * size}
        self.hist = {"p2p": [[0] * BUCKETS for _ in range(size)],
                     "coll": [[0] * BUCKETS for _ in range(size)]}

    def to_json(self, name: str) -> dict:
        return {"name": name, "p2p_msgs": self.msgs["p2p"], "p2p_bytes": self.bytes["p2p"],
                "coll_msgs": self.msgs["coll"], "coll_bytes": self.bytes["coll"],
                "hist_p2p": self.hist["p2p"], "hist_coll": self.hist["coll"]}


class Monitor:
    """The counters of this rank, phase by phase."""

    def __init__(self, rank: int, owners: Sequence[str]) -> None:
        self.rank = rank
        self.owners = tuple(owners)
        self.size = len(owners)
        self.phases: dict[str, Counters] = {"main": Counters(self.size)}
        self.current = self.phases["main"]
        self.current_name = "main"
        # Sends combined into dynamic broadcasts (fanout): counted above as the program sent
        # them; here, how many went as tickets, the crossings their bytes made instead, and
        # the bytes that therefore did not cross.
        self.combined = {"sends": 0, "crossings": 0, "bytes_not_crossed": 0}

    def count(self, kind: str, peer: int, nbytes: int) -> None:
        """One message of `nbytes` to world rank `peer` (kind: "p2p" or "coll")."""
        c = self.current
        c.msgs[kind][peer] += 1
        c.bytes[kind][peer] += nbytes
        c.hist[kind][peer][bucket(nbytes)] += 1

    def fanout(self, sends: int, crossings: int, kept: int) -> None:
        """`sends` sends went as tickets, their bytes in `crossings`, `kept` bytes fewer."""
        c = self.combined
        c["sends"] += sends
        c["crossings"] += crossings
        c["bytes_not_crossed"] += kept

    def phase(self, name: str) -> None:
        """Count into phase `name` from now on (a new one, or one seen before)."""
        counters = self.phases.get(name)
        if counters is None:
            counters = self.phases[name] = Counters(self.size)
        self.current, self.current_name = counters, name

    def reset(self) -> None:
        """Forget everything counted; back to phase "main"."""
        self.phases = {"main": Counters(self.size)}
        self.current, self.current_name = self.phases["main"], "main"
        self.combined = dict.fromkeys(self.combined, 0)

    def to_json(self, cluster: str) -> dict:
        return {"version": 1, "rank": self.rank, "size": self.size, "cluster": cluster,
                "layout": list(self.owners),
                "phases": [c.to_json(name) for name, c in self.phases.items()],
                "combined": dict(self.combined)}

    def save(self, directory: str, cluster: str) -> str:
        """Write this rank's file (`rank-<vrank>.json`, the format mmpi-monitor reads)."""
        os.makedirs(directory, exist_ok=True)
        path = os.path.join(directory, f"rank-{self.rank}.json")
        tmp = f"{path}.{os.getpid()}.tmp"
        # a fresh file, never one planted under that name nor through a link (mmpi-run's
        # launch/_monitoring.py Rule); the rename replaces a link, it does not follow it
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd, "w") as f:
            json.dump(self.to_json(cluster), f)
        os.replace(tmp, path)
        return path


def _nbytes(spec) -> int:
    """Bytes a native collective's buffer argument holds (0 for IN_PLACE or nothing)."""
    if spec is None or spec is MPI.IN_PLACE or spec is MPI.BOTTOM:
        return 0
    if isinstance(spec, (list, tuple)):
        buf = spec[0]
        if len(spec) == 3 and isinstance(spec[1], int):
            return spec[1] * spec[2].Get_size()
    else:
        buf = spec
    try:
        return memoryview(buf).nbytes
    except TypeError:
        return 0


def _blocks(spec, n: int) -> list[int]:
    """Bytes per rank of a vector (or equal-block) buffer argument."""
    if isinstance(spec, (list, tuple)) and len(spec) >= 2 and isinstance(spec[1], tuple):
        counts = spec[1][0]
        size = spec[-1].Get_size() if isinstance(spec[-1], MPI.Datatype) else 1
        return [c * size for c in counts]
    total = _nbytes(spec)
    return [total // n] * n if n else []


class Counting:
    """A cluster's native communicator that counts its collectives' data (monitoring on).

    Each native collective is counted as the point-to-point data an ideal algorithm moves:
    a broadcast as the root's buffer to every other rank, a reduction as every rank's buffer
    to the root, and so on. `members` are the world ranks by native rank.
    """

    def __init__(self, native, members: Sequence[int], monitor: Monitor) -> None:
        self._native = native
        self._members = tuple(members)
        self._me = native.Get_rank()
        self._monitor = monitor

    def __getattr__(self, name):
        return getattr(self._native, name)

    def _to(self, local: int, nbytes: int) -> None:
        if local != self._me:
            self._monitor.count("coll", self._members[local], nbytes)

    def _to_all(self, nbytes: int) -> None:
        for j in range(len(self._members)):
            self._to(j, nbytes)

    def carried(self, nbytes: int, root: int = -1) -> None:
        """Count a small collective's data that rode in the collective check's allgather.

        `root`: the local rank whose data everyone took (a broadcast), else -1 (every rank's).
        """
        if root < 0 or root == self._me:
            self._to_all(nbytes)

    def carried_to(self, nbytes: int, root: int) -> None:
        """Count a small reduction's data that rode in the check: this rank's to `root`."""
        self._to(root, nbytes)

    def Ibcast(self, buf, root=0):
        if self._me == root:
            self._to_all(_nbytes(buf))
        return self._native.Ibcast(buf, root)

    def Ireduce(self, sendbuf, recvbuf, op=MPI.SUM, root=0):
        self._to(root, _nbytes(recvbuf if sendbuf is MPI.IN_PLACE else sendbuf))
        return self._native.Ireduce(sendbuf, recvbuf, op, root)

    def Iallreduce(self, sendbuf, recvbuf, op=MPI.SUM):
        self._to_all(_nbytes(recvbuf if sendbuf is MPI.IN_PLACE else sendbuf))
        return self._native.Iallreduce(sendbuf, recvbuf, op)

    def Ireduce_scatter(self, sendbuf, recvbuf, recvcounts=None, op=MPI.SUM):
        total = _nbytes(sendbuf) or _nbytes(recvbuf)
        counts = list(recvcounts or [])
        whole = sum(counts) or 1
        for j, c in enumerate(counts):
            self._to(j, total * c // whole)
        return self._native.Ireduce_scatter(sendbuf, recvbuf, recvcounts, op)

    def Igather(self, sendbuf, recvbuf, root=0):
        self._to(root, _nbytes(sendbuf))
        return self._native.Igather(sendbuf, recvbuf, root)

    def Igatherv(self, sendbuf, recvbuf, root=0):
        self._to(root, _nbytes(sendbuf))
        return self._native.Igatherv(sendbuf, recvbuf, root)

    def Iscatter(self, sendbuf, recvbuf, root=0):
        if self._me == root:
            for j, n in enumerate(_blocks(sendbuf, len(self._members))):
                self._to(j, n)
        return self._native.Iscatter(sendbuf, recvbuf, root)

    def Iscatterv(self, sendbuf, recvbuf, root=0):
        if self._me == root:
            for j, n in enumerate(_blocks(sendbuf, len(self._members))):
                self._to(j, n)
        return self._native.Iscatterv(sendbuf, recvbuf, root)

    def Iallgather(self, sendbuf, recvbuf):
        mine = _blocks(recvbuf, len(self._members))[self._me] if sendbuf is MPI.IN_PLACE \
            else _nbytes(sendbuf)
        self._to_all(mine)
        return self._native.Iallgather(sendbuf, recvbuf)

    def Iallgatherv(self, sendbuf, recvbuf):
        mine = _blocks(recvbuf, len(self._members))[self._me] if sendbuf is MPI.IN_PLACE \
            else _nbytes(sendbuf)
        self._to_all(mine)
        return self._native.Iallgatherv(sendbuf, recvbuf)

    def Ialltoall(self, sendbuf, recvbuf):
        for j, n in enumerate(_blocks(sendbuf, len(self._members))):
            self._to(j, n)
        return self._native.Ialltoall(sendbuf, recvbuf)

    def Ialltoallv(self, sendbuf, recvbuf):
        for j, n in enumerate(_blocks(sendbuf, len(self._members))):
            self._to(j, n)
        return self._native.Ialltoallv(sendbuf, recvbuf)

    def Iscan(self, sendbuf, recvbuf, op=MPI.SUM):
        if self._me + 1 < len(self._members):
            self._to(self._me + 1, _nbytes(recvbuf if sendbuf is MPI.IN_PLACE else sendbuf))
        return self._native.Iscan(sendbuf, recvbuf, op)

    def Iexscan(self, sendbuf, recvbuf, op=MPI.SUM):
        if self._me + 1 < len(self._members):
            self._to(self._me + 1, _nbytes(recvbuf if sendbuf is MPI.IN_PLACE else sendbuf))
        return self._native.Iexscan(sendbuf, recvbuf, op)


class Session:
    """The monitor of this process, if one was ever started (mmpi.monitor, mmpi-run)."""

    monitor: Monitor | None = None


__all__ = ["Monitor", "Counting", "Session", "bucket", "BUCKETS"]
