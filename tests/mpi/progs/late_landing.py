"""A large message that comes before its receive: straight into the receive's buffer, or a spare.

Run bridged on 1+1 with MMPI_LATE_US=100000 (0.1 s). Phase 1: the receiver takes the
message's envelope while it waits for a small one sent after it, then receives it: its chunks
waited at the forwarder and land in the receive's buffer, so no spare buffer is ever taken.
Phase 2: the receiver waits in MPI for another message for longer than that: the chunks land
in a spare meanwhile (one is kept afterwards for reuse). Both receive the right bytes.
Prints "late landing: direct N spare M" (bytes kept in spares after each phase).
"""

import time

import numpy as np
from mpi4py import MPI

world = MPI.COMM_WORLD
rank = world.Get_rank()
spares = world._core.engine.p2p.spares
N = 300_000


def data(k: int) -> np.ndarray:
    return ((np.arange(N, dtype=np.int64) * 7 + k) % 251).astype(np.uint8)


if rank == 0:
    world.Send(data(1), 1, 1)
    world.Send(np.zeros(1, np.uint8), 1, 3)
    world.Barrier()
    world.Send(data(2), 1, 2)
    time.sleep(0.4)
    world.Send(np.zeros(1, np.uint8), 1, 3)
else:
    # phase 1: the large message's envelope comes first, in the receive of the small one sent
    # after it; its receive follows at once
    world.Recv(np.empty(1, np.uint8), 0, 3)
    got = np.empty(N, np.uint8)
    world.Recv(got, 0, 1)
    ok = np.array_equal(got, data(1))
    direct = spares.held()
    world.Barrier()
    world.Recv(np.empty(1, np.uint8), 0, 3)  # phase 2: 0.4 s in MPI before message 2's receive
    world.Recv(got, 0, 2)
    ok = ok and np.array_equal(got, data(2))
    print(f"late landing: direct {direct} spare {spares.held()} {'ok' if ok else 'WRONG'}",
          flush=True)
world.Barrier()
