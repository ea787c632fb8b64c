"""Native MPICH reductions inside one job: why mmpi reduces to one rank with Ireduce_scatter.

`mpiexec -n 2 python benchmarks/native_reduce.py 1048576` (and -n 4, other sizes in bytes).
Prints, per rank, the median time of: Ireduce to rank 0, Ireduce_scatter with every element
going to rank 0 (the same result), Ibcast, and Iallgatherv from rank 0, for float64 SUM.
"""

import statistics
import sys
import time

import numpy as np
from mpi4py import MPI

w = MPI.COMM_WORLD
n = int(sys.argv[1]) // 8 if len(sys.argv) > 1 else 1 << 17
sb, rb = np.ones(n), np.empty(n)
part = np.empty(n if w.rank == 0 else 0)
counts = [n] + [0] * (w.size - 1)


def median_us(call) -> float:
    """Median time of one started-and-waited call, after 5 warm-up calls."""
    times = []
    for _ in range(60):
        w.Barrier()
        t0 = time.perf_counter()
        MPI.Request.Wait(call())
        times.append(time.perf_counter() - t0)
    return statistics.median(times[5:]) * 1e6


res = {
    "Ireduce": median_us(lambda: w.Ireduce(sb, rb, MPI.SUM, 0)),
    "Ireduce_scatter to rank 0": median_us(lambda: w.Ireduce_scatter(sb, part, counts, MPI.SUM)),
    "Ibcast": median_us(lambda: w.Ibcast(rb, 0)),
    "Iallgatherv from rank 0": median_us(
        lambda: w.Iallgatherv(part, [rb, (counts, [0] * w.size)])),
}
print(f"rank {w.rank}, {n * 8} B, {w.size} ranks: "
      + ", ".join(f"{k} {v:.0f} us" for k, v in res.items()), flush=True)
