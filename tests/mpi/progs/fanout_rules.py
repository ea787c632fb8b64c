"""The rules a dynamic broadcast must keep (mmpi/_engine/fanout.py), checked on every rank.

Rank 0 sends one 1 MiB buffer to every rank of the other cluster (the bytes must cross
once), then:
1. a plain send to one of them after the burst: received after the burst's message;
2. the last rank posts nothing for a while, and is the tree's first destination in one round:
   the others still get their bytes, it gets its own afterwards;
3. ANY_SOURCE/ANY_TAG receives report the sender, tag and size as without the fan-out;
4. persistent sends started together (Startall) and one object isend to each;
5. a receive too small for the burst's message fails with a truncation error, and the other
   destinations are not disturbed.
Prints `fanout rules ok` on rank 0. Run with MMPI_VERBOSE to see what was combined.
"""

import os
import time

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
N = 1 << 20
# the other cluster: the ranks after the low ones (FANOUT_LOW, the job's --low)
LOW = int(os.environ.get("FANOUT_LOW", "1"))
dests = list(range(LOW, size))


def data(k: int) -> np.ndarray:
    return ((np.arange(N, dtype=np.int64) * 3 + k) % 253).astype(np.uint8)


def check(ok: bool, what: str) -> None:
    if not ok:
        raise AssertionError(f"rank {rank}: {what}")


# 1 and 3: the burst, then a plain send to the last destination; ANY_SOURCE receives.
if rank == 0:
    one = data(1)
    reqs = [comm.Isend(one, d, tag=10 + d) for d in dests]
    reqs.append(comm.Isend(np.full(8, 42, "u1"), dests[-1], tag=7))
    MPI.Request.Waitall(reqs)
elif rank in dests:
    buf = np.empty(N, np.uint8)
    st = MPI.Status()
    comm.Recv(buf, MPI.ANY_SOURCE, MPI.ANY_TAG, st)
    check((st.Get_source(), st.Get_tag(), st.Get_count(MPI.BYTE)) == (0, 10 + rank, N),
          f"status {st.Get_source()} {st.Get_tag()} {st.Get_count(MPI.BYTE)}")
    check(np.array_equal(buf, data(1)), "burst bytes")
    if rank == dests[-1]:
        small = np.empty(8, "u1")
        comm.Recv(small, 0, MPI.ANY_TAG, st)
        check(st.Get_tag() == 7 and (small == 42).all(), "plain send after the burst")
comm.Barrier()

# 2: the last rank is the first destination and posts nothing for a while.
order = [dests[-1]] + dests[:-1]
if rank == 0:
    two = data(2)
    MPI.Request.Waitall([comm.Isend(two, d, tag=20) for d in order])
elif rank in dests:
    if rank == dests[-1]:
        time.sleep(0.5)
    buf = np.empty(N, np.uint8)
    comm.Recv(buf, 0, 20)
    check(np.array_equal(buf, data(2)), "late first destination's bytes")
comm.Barrier()

# 4: persistent sends started together, then one object to each.
if rank == 0:
    four = data(4)
    ps = [comm.Send_init(four, d, tag=40) for d in dests]
    for _ in range(2):
        MPI.Prequest.Startall(ps)
        MPI.Prequest.Waitall(ps)
    for p in ps:
        p.Free()
    obj = {"payload": data(5).tobytes(), "note": "same object"}
    MPI.Request.waitall([comm.isend(obj, d, tag=50) for d in dests])
elif rank in dests:
    for _ in range(2):
        buf = np.empty(N, np.uint8)
        comm.Recv(buf, 0, 40)
        check(np.array_equal(buf, data(4)), "persistent bytes")
    got = comm.recv(source=0, tag=50)
    check(got == {"payload": data(5).tobytes(), "note": "same object"}, "object")
comm.Barrier()

# 5: truncation on one destination only.
ERRORS = (MPI.Exception, ValueError, RuntimeError)
if rank == 0:
    six = data(6)
    MPI.Request.Waitall([comm.Isend(six, d, tag=60) for d in dests])
elif rank in dests:
    if rank == dests[0]:
        try:
            comm.Recv(np.empty(N // 2, np.uint8), 0, 60)
        except ERRORS as exc:
            check("trunc" in str(exc).lower(), f"message: {exc}")
        else:
            check(False, "truncation was not reported")
    else:
        buf = np.empty(N, np.uint8)
        comm.Recv(buf, 0, 60)
        check(np.array_equal(buf, data(6)), "bytes next to a truncated receive")
comm.Barrier()
if rank == 0:
    print("fanout rules ok", flush=True)
