"""Alltoallv with blocks on both sides of the size from which blocks go straight to their
ranks (32 KiB), empty ones, and IN_PLACE; every block's contents checked. Prints "ok"."""

import numpy as np

from mmpi import MPI

comm = MPI.COMM_WORLD
rank, n = comm.Get_rank(), comm.Get_size()


def count(i: int, j: int, mode: int) -> int:
    """Doubles from rank i to rank j."""
    if mode == 0:  # all small
        return 3 + i + j
    if mode == 1:  # all large
        return 5000 + 100 * i + j
    if mode == 2:  # mixed
        return 5000 if (i + j) % 2 else 7 * i + j
    return 0 if (i * j) % 3 == 1 else 4096 * ((i + j) % 3)  # empty, exactly 32 KiB, 64 KiB


def displs(counts: list[int]) -> list[int]:
    return [int(x) for x in np.concatenate(([0], np.cumsum(counts)))[:-1]]


def blocks(src: int, counts: list[int]) -> np.ndarray:
    """What rank `src` sends: for rank d, counts[d] numbers that name src, d and the index."""
    return np.concatenate([src * 1e6 + d * 1e3 + np.arange(c) for d, c in enumerate(counts)])


for mode in range(4):
    for _ in range(3):
        sc = [count(rank, j, mode) for j in range(n)]
        rc = [count(i, rank, mode) for i in range(n)]
        recv = np.full(sum(rc), -1.0)
        comm.Alltoallv([blocks(rank, sc), (sc, displs(sc)), MPI.DOUBLE],
                       [recv, (rc, displs(rc)), MPI.DOUBLE])
        want = np.concatenate([i * 1e6 + rank * 1e3 + np.arange(rc[i]) for i in range(n)])
        assert (recv == want).all(), f"rank {rank}, mode {mode}: wrong blocks"
        sym = [count(min(rank, j), max(rank, j), mode) for j in range(n)]
        buf = blocks(rank, sym)
        comm.Alltoallv(MPI.IN_PLACE, [buf, (sym, displs(sym)), MPI.DOUBLE])
        want = np.concatenate([i * 1e6 + rank * 1e3 + np.arange(sym[i]) for i in range(n)])
        assert (buf == want).all(), f"rank {rank}, mode {mode}: wrong blocks in place"
print(f"rank {rank}: ok")
