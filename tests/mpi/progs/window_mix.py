"""Windows of receives from the other cluster, each mixing what a posted receive takes whole
in the link drain (plain eager messages) with what only Python completes (large messages, a
pickled object, a wildcard source, a receive posted after its message came): every Waitall
must give each receive its own message, in order.

usage: python window_mix.py SEED WINDOWS   (bridged, 1+1 or more: world rank 0 sends to the
first rank of the high cluster, the others wait in the closing Barrier)
"""

import random
import sys

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
seed, windows = int(sys.argv[1]), int(sys.argv[2])
rng = random.Random(seed)
me, high = comm.Get_rank(), comm.Get_size() // 2
SIZES = [8, 8, 8, 64, 100, 5000, 70000, 300000]  # above 64 KiB: large, through Python
checked = 0
for w in range(windows):
    n = rng.randint(1, 64)
    sizes = [rng.choice(SIZES) for _ in range(n)]
    late = rng.randrange(n)  # this one is posted only after the others have completed
    if me == 0:
        reqs = [comm.Isend(np.full(s, (w + i) % 251, np.uint8), high, 7) for i, s in
                enumerate(sizes)]
        MPI.Request.Waitall(reqs)
        comm.send(("window", w), high, 8)
        comm.Recv(np.zeros(1, np.uint8), high, 9)
    elif me == high:
        bufs = [np.zeros(s, np.uint8) for s in sizes]
        src = [0 if i % 3 else MPI.ANY_SOURCE for i in range(n)]
        reqs = [comm.Irecv(bufs[i], src[i], 7) for i in range(n) if i < late]
        reqs.append(comm.irecv(source=0, tag=8))  # a pickled one, after all of them
        MPI.Request.Waitall(reqs[:-1])
        rest = [comm.Irecv(bufs[i], src[i], 7) for i in range(late, n)]
        MPI.Request.Waitall(rest)
        for i, b in enumerate(bufs):
            assert (b == (w + i) % 251).all(), f"window {w}: receive {i} of {n} ({sizes[i]} " \
                f"B) holds {b[:4]}, not {(w + i) % 251}"
        assert reqs[-1].wait() == ("window", w)
        comm.Send(np.zeros(1, np.uint8), 0, 9)
        checked += n
comm.Barrier()
if me == high:
    print(f"rank {me}: window mix ok, {checked} messages in {windows} windows", flush=True)
