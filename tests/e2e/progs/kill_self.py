"""One rank (`python kill_self.py VRANK SIGNAL`) kills itself after a first Barrier."""

import os
import sys

from mmpi import MPI

comm = MPI.COMM_WORLD
comm.Barrier()
if comm.Get_rank() == int(sys.argv[1]):
    os.kill(os.getpid(), int(sys.argv[2]))
comm.Barrier()
