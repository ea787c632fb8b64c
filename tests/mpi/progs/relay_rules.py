"""The relay's rules over the fake link (tests/mpi/progs/fakelink.py), one job, no launcher.

`mpiexec -n N python relay_rules.py FORWARDERS LOW CHUNK STRIPE_MIN`: every rank of each
cluster sends every rank of the other a stream of messages of mixed sizes (eager, one chunk,
many chunks, striped) with per-message content, and receives them with ANY_SOURCE; order per
sender (MPI's non-overtaking rule) and every byte are checked. Then a few collectives. Each
cluster rank prints "ok <rank>" at the end; the forwarders print their summary.
"""

import sys

import fakelink
import numpy as np

from mmpi import MPI

forwarders, low, chunk, stripe_min = (int(a) for a in sys.argv[1:5])
SIZES = [0, 1, 100, 40_000, chunk, chunk + 1, 3 * chunk + 7]
if stripe_min < 1 << 24:  # else: no striping in this run
    SIZES += [stripe_min, stripe_min + 12_345]


def payload(src: int, dst: int, k: int, n: int) -> np.ndarray:
    return ((np.arange(n, dtype=np.int64) * 7 + src * 131 + dst * 17 + k) % 251).astype(np.uint8)


def main(comm):
    rank, size = comm.Get_rank(), comm.Get_size()
    mine = comm.cluster
    far = [r for r in range(size) if (r < low) != (rank < low)]
    reqs = []
    for dst in far:
        for k, n in enumerate(SIZES * 2):
            reqs.append(comm.Isend(payload(rank, dst, k, n), dst, tag=k))
    seen = {src: 0 for src in far}
    status = MPI.Status()
    for _ in range(len(far) * len(SIZES) * 2):
        comm.Probe(MPI.ANY_SOURCE, MPI.ANY_TAG, status)
        src, k, n = status.Get_source(), status.Get_tag(), status.Get_count(MPI.BYTE)
        assert k == seen[src], f"rank {rank}: from {src} got message {k}, expected {seen[src]}"
        buf = np.empty(n, np.uint8)
        comm.Recv(buf, src, k)
        assert n == (SIZES * 2)[k] and np.array_equal(buf, payload(src, rank, k, n)), (src, k)
        seen[src] += 1
    MPI.Request.Waitall(reqs)
    total = comm.allreduce(rank)
    assert total == size * (size - 1) // 2, total
    x = np.full(300_000, float(rank))
    y = np.empty_like(x)
    comm.Allreduce(x, y)
    assert (y == total).all()
    comm.Barrier()
    print(f"ok {rank} ({mine})", flush=True)


sys.exit(fakelink.run(main, low=low, forwarders=forwarders, chunk=chunk,
                      stripe_min=stripe_min))
