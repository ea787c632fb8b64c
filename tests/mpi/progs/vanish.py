"""A rank leaves while the others wait for it: `python vanish.py MODE VRANK WAIT MARKER`.

VRANK leaves with MODE while every other rank waits for it in WAIT (`recv`: a Recv from it;
`barrier`: a Barrier). Modes: os-exit (`os._exit(0)`, which MPI and Hydra do not report),
sigkill (SIGKILL itself), sys-exit (`sys.exit(0)` before the end), raise (an exception),
return (its program just ends). Before leaving it prints `FAULT <unix time>`.
"""

import os
import signal
import sys
import time

import numpy as np

from mmpi import MPI

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
mode, victim, wait = sys.argv[1], int(sys.argv[2]), sys.argv[3]
comm.Barrier()  # everybody is up
if rank == victim:
    time.sleep(0.5)  # the others are waiting by now
    print(f"FAULT {time.time():.3f}", flush=True)
    if mode == "os-exit":
        os._exit(0)
    elif mode == "sigkill":
        os.kill(os.getpid(), signal.SIGKILL)
    elif mode == "sys-exit":
        sys.exit(0)
    elif mode == "raise":
        raise RuntimeError(f"rank {rank} gives up")
    elif mode != "return":
        raise ValueError(mode)
else:
    if wait == "recv":
        comm.Recv(np.zeros(4), source=victim, tag=7)
    else:
        comm.Barrier()
    print(f"rank {rank}: got past the {wait} that rank {victim} never joined", flush=True)
