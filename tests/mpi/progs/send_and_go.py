"""Small sends complete at once (their bytes copied out): nothing may be lost at finalize.

`send_and_go.py N`: the first rank of the low cluster sends N small messages (Send, Isend,
and collective-sized ones of every length up to 64 bytes) to the last rank, which is in the
other cluster, and finalizes at once; the receiver sleeps first, then receives and checks
every one.
"""

import sys
import time

import numpy as np

from mmpi import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
n = int(sys.argv[1])
last = size - 1
if rank == 0:
    reqs = []
    for i in range(n):
        data = np.full(i % 65, i % 251, np.uint8)
        if i % 2:
            comm.Send(data, last, i % 100)
        else:
            reqs.append(comm.Isend(data, last, i % 100))
    MPI.Request.Waitall(reqs)
    print("SENT", flush=True)
elif rank == last:
    time.sleep(1.0)
    buf = np.empty(64, np.uint8)
    st = MPI.Status()
    for i in range(n):
        comm.Recv(buf, 0, i % 100, st)
        k = st.Get_count(MPI.BYTE)
        assert k == i % 65, (i, k)
        assert (buf[:k] == i % 251).all(), (i, buf[:k])
    print(f"RECEIVED {n}", flush=True)
