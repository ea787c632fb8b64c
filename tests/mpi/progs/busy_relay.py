"""A forwarder busy relaying, or a rank busy inside a wait, is no lost forwarder.

argv: CASE [NBYTES]. Run with MMPI_FORWARDER_TIMEOUT=2 (its least). Cases:
  stream  the first rank sends NBYTES to the last one, which sends them back, in the chunks
          MMPI_CHUNK says: thousands of chunks keep the forwarder busy for seconds
  step    each rank spends 3 s in a step of its own inside a wait (as posting the chunk
          receives of a large message in small chunks does), with the forwarder's heartbeats
          queuing unread; then the wait's liveness check runs (white-box: the engine's own)
Each rank prints `rank R: CASE ok`.
"""

import sys
import time

import numpy as np

from mmpi import MPI

world = MPI.COMM_WORLD
rank, size = world.Get_rank(), world.Get_size()
case = sys.argv[1]
if case == "stream":
    n = int(sys.argv[2])
    data = np.arange(n, dtype=np.uint8)
    got = np.zeros(n, dtype=np.uint8)
    if rank == 0:
        world.Send(data, size - 1, 1)
        world.Recv(got, size - 1, 2)
        assert np.array_equal(got, data)
    elif rank == size - 1:
        world.Recv(got, 0, 1)
        world.Send(got, 0, 2)
else:
    engine = world._core.engine
    since = time.monotonic()  # a wait begins...
    t0 = time.monotonic()
    while time.monotonic() - t0 < 3:
        pass  # ...and this rank is busy with a step of its own, longer than the timeout
    engine.alive(since)  # ForwarderLost here would take a live forwarder for dead
world.Barrier()
print(f"rank {rank}: {case} ok", flush=True)
