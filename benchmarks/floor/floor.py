"""floor.c in Python: the same relayed paths with bare mpi4py, no mmpi (see floor.c's comment).

`mpiexec -n N python floor.py MODE ITERS [BYTES]`, MODE as in floor.c or `native-barrier`
(mpi4py's own Comm.Barrier: mmpi-bench's native baseline). THREADS=2 in the environment makes
the relay serve each direction from its own thread, as mmpi's forwarder does by default.
"""

import os
import sys
import threading

import mpi4py

mpi4py.rc.thread_level = "multiple"
import numpy as np  # noqa: E402
from mpi4py import MPI  # noqa: E402

TAG, WARMUP = 1, 100
comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
mode, iters = sys.argv[1], int(sys.argv[2])
total = iters + WARMUP
_yield = os.sched_yield


def wait_msg(buf, src):
    """Receive the next message from `src` into `buf`, yielding the CPU while none is there."""
    while (m := comm.improbe(src, TAG)) is None:
        _yield()
    m.Recv(buf)


def relay_loop(sources, peer, count, nbytes):
    """Move `count` messages from `sources` to their peer, two buffers in turn."""
    bufs = [np.empty(max(nbytes, 8), np.uint8) for _ in range(2)]
    sent = [MPI.REQUEST_NULL, MPI.REQUEST_NULL]
    st = MPI.Status()
    for i in range(count):
        k = i % 2
        while (m := comm.improbe(sources, TAG, st)) is None:
            _yield()
        while not sent[k].Test():
            _yield()
        n = st.Get_count(MPI.BYTE)
        m.Recv([bufs[k], n, MPI.BYTE])
        sent[k] = comm.Isend([bufs[k], n, MPI.BYTE], peer[st.Get_source()], TAG)
    MPI.Request.Waitall(sent)


def relay(a, b, count, nbytes):
    """Relay `count` messages between ranks a and b, from one thread or one per direction."""
    peer = {a: b, b: a}
    if os.environ.get("THREADS") == "2":
        ts = [threading.Thread(target=relay_loop, args=(s, peer, count // 2, nbytes))
              for s in (a, b)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    else:
        relay_loop(MPI.ANY_SOURCE, peer, count, nbytes)


comm.Barrier()
t = 0.0
if mode in ("pingpong", "direct"):
    buf = np.zeros(8, np.uint8)
    other = 1 if mode == "direct" and rank == 0 else 0 if mode == "direct" else None
    if mode == "pingpong" and rank == 1:
        relay(0, 2, 2 * total, 8)
    elif mode == "direct":
        for i in range(total):
            if i == WARMUP:
                t0 = MPI.Wtime()
            if rank == 0:
                comm.Send(buf, other, TAG)
                wait_msg(buf, other)
            else:
                wait_msg(buf, other)
                comm.Send(buf, other, TAG)
        t = (MPI.Wtime() - t0) / iters / 2
    else:
        for i in range(total):
            if i == WARMUP:
                t0 = MPI.Wtime()
            if rank == 0:
                comm.Send(buf, 1, TAG)
                wait_msg(buf, 1)
            else:
                wait_msg(buf, 1)
                comm.Send(buf, 1, TAG)
        t = (MPI.Wtime() - t0) / iters / 2
elif mode == "barrier":
    k, r = (size - 1) // 2, size - 1
    mine = 0 if rank < k else k
    b = np.zeros(1, np.uint8)
    if rank == r:
        relay(0, k, 2 * total, 1)
    else:
        for i in range(total):
            if i == WARMUP:
                t0 = MPI.Wtime()
            if rank == mine:
                for j in range(1, k):
                    wait_msg(b, mine + j)
                comm.Send(b, r, TAG)
                wait_msg(b, r)
                for j in range(1, k):
                    comm.Send(b, mine + j, TAG)
            else:
                comm.Send(b, mine, TAG)
                wait_msg(b, mine)
        t = (MPI.Wtime() - t0) / iters
elif mode == "native-barrier":
    for i in range(total):
        if i == WARMUP:
            t0 = MPI.Wtime()
        comm.Barrier()
    t = (MPI.Wtime() - t0) / iters
elif mode == "exchange":
    nbytes = int(sys.argv[3])
    if rank == 1:
        relay(0, 2, 2 * total, nbytes)
    else:
        s, rb = np.zeros(nbytes, np.uint8), np.empty(nbytes, np.uint8)
        for i in range(total):
            if i == WARMUP:
                t0 = MPI.Wtime()
            q = comm.Isend(s, 1, TAG)
            wait_msg(rb, 1)
            while not q.Test():
                _yield()
        t = (MPI.Wtime() - t0) / iters
if rank == 0:
    relayed = mode in ("pingpong", "barrier", "exchange")
    how = f" (relay threads {os.environ.get('THREADS', '1')})" if relayed else ""
    print(f"python {mode} on {size} processes{how}: {t * 1e6:.2f} us", flush=True)
comm.Barrier()
