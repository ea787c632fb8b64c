"""Write this rank's pid and the forwarder's to DIR, then hang (`python hang.py DIR`, bridged)."""

import os
import sys
import time
from pathlib import Path

from mmpi import MPI

comm = MPI.COMM_WORLD
out = Path(sys.argv[1])
fwd = (Path(os.environ["MMPI_RENDEZVOUS"]) / "forwarder.0.pid").read_text().split()[0]
(out / f"rank{comm.Get_rank()}.pid").write_text(f"{os.getpid()}\n")
(out / "forwarder.pid").write_text(f"{fwd}\n")
comm.Barrier()
time.sleep(600)
