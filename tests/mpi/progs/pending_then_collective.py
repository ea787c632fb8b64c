"""Large messages wait for a rank that sits in a collective's native part: nothing may hang.

Both high ranks send two 4 MiB messages each to low rank 1 and do not wait; then every rank
makes Allreduces of 256 KiB, whose leaders cross through the forwarder while rank 1 waits in
the native reduce and bcast; only then does rank 1 receive the four messages. In MPI this
cannot deadlock. Through the bridge, the pending messages hold the forwarder's chunk buffers
for that direction until rank 1 takes them in, which it does only if its native waits keep
draining the forwarder link. `python pending_then_collective.py CALLS [KIND]` (2+2 ranks;
KIND: buffer, the default, for Allreduce; object for the pickle-based allreduce).
"""

import sys

import numpy as np

from mmpi import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
calls = int(sys.argv[1])
kind = sys.argv[2] if len(sys.argv) > 2 else "buffer"
big = 4 << 20
sends = []
if rank >= 2:
    for k in range(2):
        data = np.full(big, 10 * rank + k, np.uint8)
        sends.append((comm.Isend(data, 1, 100 + k), data))
x = np.full(1 << 16, rank + 1, np.float32)  # 256 KiB
y = np.empty_like(x)
for _ in range(calls):
    if kind == "buffer":
        comm.Allreduce(x, y, MPI.SUM)
    else:
        y = comm.allreduce(x, MPI.SUM)
    assert np.all(y == sum(range(1, size + 1))), y[:4]
if rank == 1:
    buf = np.empty(big, np.uint8)
    for src in (2, 3):
        for k in range(2):
            comm.Recv(buf, src, 100 + k)
            assert np.all(buf == 10 * src + k), (src, k, buf[:4])
MPI.Request.Waitall([r for r, _ in sends])
comm.Barrier()
print(f"rank {rank}: ok", flush=True)
