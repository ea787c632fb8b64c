"""Print where this rank runs: its virtual rank and the CPUs it is bound to."""

import os

from mmpi import MPI

comm = MPI.COMM_WORLD
print(f"WHERE {comm.Get_rank()} {','.join(map(str, sorted(os.sched_getaffinity(0))))}", flush=True)
comm.Barrier()
