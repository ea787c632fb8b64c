"""Messages that nothing receives must not hang the job at its end (issue 32, item 7).

`unreceived.py self`: every rank sends itself a large and a small message and never receives
them (MPI calls this erroneous); `unreceived.py peer`: rank 0 sends rank size-1 messages that
it never receives. The job must end within seconds, each rank saying what was never received.
"""

import sys

import numpy as np

from mmpi import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
if sys.argv[1] == "self":
    comm.Isend(np.zeros(1 << 20, np.uint8), rank, 5)  # rendezvous-sized: waits for a receive
    comm.Isend(np.zeros(4, np.uint8), rank, 6)
elif rank == 0:
    comm.Isend(np.zeros(1 << 20, np.uint8), size - 1, 7)
    comm.Isend(np.zeros(8, np.uint8), size - 1, 8)
comm.Barrier()
print(f"rank {rank}: done", flush=True)
