"""Tight barrier: no rank leaves a Barrier before every rank of both clusters has entered it.

Ranks enter at staggered, random times; each records its entry and exit wall-clock times
(all ranks share this machine's clock). Rank 0 collects them with point-to-point messages and
checks max(entry) <= min(exit) for every round.
"""

import random
import sys
import time

import numpy as np

from mmpi import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 10
rng = random.Random(rank * 31 + 7)
times = np.zeros((rounds, 2))
for r in range(rounds):
    # one rank per round is late by a clear margin, in either cluster
    late = r % size
    time.sleep(0.05 if rank == late else rng.random() * 0.01)
    times[r, 0] = time.time()
    comm.Barrier()
    times[r, 1] = time.time()
if rank == 0:
    allt = [times]
    for src in range(1, size):
        buf = np.empty_like(times)
        comm.Recv(buf, src, 99)
        allt.append(buf)
    allt = np.array(allt)  # (size, rounds, 2)
    for r in range(rounds):
        last_in = allt[:, r, 0].max()
        first_out = allt[:, r, 1].min()
        if first_out < last_in:
            raise AssertionError(
                f"round {r}: rank {int(allt[:, r, 1].argmin())} left at {first_out:.6f} before "
                f"rank {int(allt[:, r, 0].argmax())} entered at {last_in:.6f}")
    print(f"tight barrier OK over {rounds} rounds", flush=True)
else:
    comm.Send(times, 0, 99)
