"""Fault injection: `python faults.py MODE VRANK` makes one rank (or the forwarder) fail.

Modes: raise (an exception), kill (SIGKILL itself), exit (sys.exit(3)), kill-forwarder (the
given rank SIGKILLs the forwarder mid-transfer; its pid is in the rendezvous directory),
kill-forwarder-in-native-wait (the same in a loop of Barriers, 2+2 ranks, while both leaders
compute outside MPI for 40 s: the other ranks wait in the Barrier's native part, and only
that wait can notice the loss).
All ranks keep exchanging messages across the zipper, so a failure hits traffic in flight.
"""

import os
import signal
import sys
import time
from pathlib import Path

import numpy as np

from mmpi import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
mode, victim = sys.argv[1], int(sys.argv[2])
peer = (rank + size // 2) % size
buf = np.zeros(1 << 18)
out = np.ones(1 << 18)
t0 = time.monotonic()
for it in range(10**9):
    if it == 20 and rank == victim:
        print(f"rank {rank}: injecting {mode}", flush=True)
        if mode == "raise":
            raise RuntimeError(f"injected failure on rank {rank}")
        if mode == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        if mode == "exit":
            sys.exit(3)
        if mode.startswith("kill-forwarder"):
            which = os.environ.get("MMPI_TEST_FORWARDER", "0")
            pid = int((Path(os.environ["MMPI_RENDEZVOUS"]) / f"forwarder.{which}.pid").read_text())
            os.kill(pid, signal.SIGKILL)
    if mode.endswith("-in-native-wait"):
        if it == 20 and rank in (0, size // 2):
            time.sleep(40)  # the leaders, computing
        comm.Barrier()
    else:
        comm.Sendrecv(out, peer, 1, buf, MPI.ANY_SOURCE, 1)
    if time.monotonic() - t0 > 60:
        break
print(f"rank {rank}: survived", flush=True)
