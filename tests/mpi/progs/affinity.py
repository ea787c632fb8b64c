"""Print this rank's CPU affinity and the forwarder's: `python affinity.py` under mmpi-run."""

import os
from pathlib import Path

from mmpi import MPI

comm = MPI.COMM_WORLD
fwd = int((Path(os.environ["MMPI_RENDEZVOUS"]) / "forwarder.0.pid").read_text())
mine, theirs = sorted(os.sched_getaffinity(0)), sorted(os.sched_getaffinity(fwd))
print(f"vrank {comm.Get_rank()} cpus {mine} forwarder cpus {theirs}", flush=True)
comm.Barrier()
