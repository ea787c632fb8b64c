"""Ping-pong latency, windowed bandwidth and bidirectional bandwidth between two ranks.

The first and the last rank: one in each cluster when bridged. Same file natively:
`mpiexec -n 2 python ...`.
"""

import sys

import numpy as np

from mmpi import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
a, b = 0, size - 1
me = "a" if rank == a else "b" if rank == b else None
WINDOW = 16


def latency(n, iters):
    """One-way time of an n-byte ping-pong, in seconds."""
    buf = np.zeros(n, np.uint8)
    comm.Barrier()
    for i in range(iters + 20):
        if i == 20:
            t0 = MPI.Wtime()
        if me == "a":
            comm.Send(buf, b, 1)
            comm.Recv(buf, b, 1)
        elif me == "b":
            comm.Recv(buf, a, 1)
            comm.Send(buf, a, 1)
    return (MPI.Wtime() - t0) / iters / 2 * 1e6


def bandwidth(n, iters, both=False):
    """Bytes per second of windows of n-byte sends (both ways at once if `both`)."""
    sbuf = [np.ones(n, np.uint8) for _ in range(WINDOW)]
    rbuf = [np.empty(n, np.uint8) for _ in range(WINDOW)]
    ack = np.zeros(1, np.uint8)
    comm.Barrier()
    for i in range(iters + 2):
        if i == 2:
            t0 = MPI.Wtime()
        if me == "a":
            reqs = [comm.Isend(s, b, 2) for s in sbuf]
            if both:
                reqs += [comm.Irecv(r, b, 2) for r in rbuf]
            MPI.Request.Waitall(reqs)
            comm.Recv(ack, b, 3)
        elif me == "b":
            reqs = [comm.Irecv(r, a, 2) for r in rbuf]
            if both:
                reqs += [comm.Isend(s, a, 2) for s in sbuf]
            MPI.Request.Waitall(reqs)
            comm.Send(ack, a, 3)
    t = MPI.Wtime() - t0
    return n * WINDOW * iters * (2 if both else 1) / t / 1e9


if __name__ == "__main__":
    iters = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    res = {}
    res["lat8_us"] = latency(8, iters)
    res["lat1k_us"] = latency(1024, iters // 2)
    res["lat64k_us"] = latency(65536, iters // 4)
    res["bw1m_GBs"] = bandwidth(1 << 20, 20)
    res["bw4m_GBs"] = bandwidth(4 << 20, 10)
    res["bibw4m_GBs"] = bandwidth(4 << 20, 10, both=True)
    if rank == 0:
        mode = "bridged" if getattr(MPI, "BRIDGED", False) else "native"
        print(mode, " ".join(f"{k}={v:.2f}" for k, v in res.items()), flush=True)
