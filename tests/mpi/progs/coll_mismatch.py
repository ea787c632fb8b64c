"""Collectives called with mismatched arguments must fail loudly, never answer wrongly.

`python coll_mismatch.py CASE`; the job is expected to fail, with an error naming the problem.
"""

import sys

import numpy as np

from mmpi import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
case = sys.argv[1]
if case.startswith("after-barrier-"):  # the same once a good call has made the compiled front
    comm.Barrier()
    case = case[len("after-barrier-"):]
high0 = getattr(comm, "layout", None).low_size if hasattr(comm, "layout") else size // 2
in_high = rank >= high0

if case == "bcast-count":  # the far cluster expects a shorter message than the root sends
    buf = np.zeros(10 if not in_high else 5)
    comm.Bcast(buf, root=0)
elif case == "different-collectives":  # the clusters' leaders cross in different calls
    if in_high:
        comm.Allreduce(np.ones(1), np.zeros(1), op=MPI.SUM)
    else:
        comm.Barrier()
elif case == "different-collectives-plain":  # the same after a good call: Allreduce's short path
    comm.Allreduce(np.ones(1), np.zeros(1), op=MPI.SUM)
    if in_high:
        comm.Allreduce(np.ones(1), np.zeros(1), op=MPI.SUM)
    else:
        comm.Barrier()
elif case == "different-object-collectives":  # the pickle forms have a tag each
    if in_high:
        comm.bcast(rank, root=0)
    else:
        comm.allgather(rank)
elif case == "different-collectives-large":  # the low leader's part goes through the matcher
    if in_high:
        comm.allgather(rank)
    else:
        comm.Allgather(np.ones(5000), np.zeros(5000 * size))
elif case.startswith("eager-boundary-"):
    # One side's data fits a crossing message (30 KiB), the other's does not (40 KiB): the
    # two sides take different paths, and the one left waiting must fail, not hang.
    what, big_side = case.split("-")[2:4]
    n = (40 if in_high == (big_side == "high") else 30) * 128  # doubles: 40 or 30 KiB
    if what == "bcast":
        comm.Bcast(np.zeros(n), root=0)
    elif what == "allreduce":
        comm.Allreduce(np.ones(n), np.zeros(n), op=MPI.SUM)
    elif what == "gather":  # blocks of half that: each cluster's part is 30 or 40 KiB
        comm.Gather(np.ones(n // 2), np.zeros(size * n // 2) if rank == 0 else None, root=0)
    elif what == "scatter":
        comm.Scatter(np.ones(size * n // 2) if rank == 0 else None, np.zeros(n // 2), root=0)
    elif what == "allgather":
        comm.Allgather(np.ones(n // 2), np.zeros(size * n // 2))
    else:
        comm.Reduce(np.ones(n), np.zeros(n) if rank == 0 else None, op=MPI.SUM, root=0)
elif case == "bcast-vs-reduce-within":  # rank 3 calls Reduce, the others Bcast
    buf = np.zeros(4)
    if rank == 3:
        comm.Reduce(np.ones(4), None, op=MPI.SUM, root=0)
    else:
        comm.Bcast(buf, root=0)
elif case == "bcast-vs-reduce-across":  # the same with the odd one out in the low cluster
    buf = np.zeros(4)
    if rank == 1:
        comm.Reduce(np.ones(4), None, op=MPI.SUM, root=0)
    else:
        comm.Bcast(buf, root=0)
elif case == "bcast-roots":  # rank 3 broadcasts from root 2, the others from root 0
    comm.Bcast(np.zeros(4), root=2 if rank == 3 else 0)
elif case == "alltoallv-counts-within":  # two ranks of one cluster disagree on a block
    send = np.zeros(8, np.int32)
    recv = np.zeros(12, np.int32)
    counts = [2] * size
    if rank == 3:
        counts[2] = 3  # expects 3 from rank 2, which sends 2
    comm.Alltoallv([send, [2] * size], [recv, counts])
elif case == "bcast-count-longer":  # the far cluster expects a longer message: no silent gap
    buf = np.zeros(10 if not in_high else 12)
    comm.Bcast(buf, root=0)
elif case == "bcast-count-split":  # the same, where bcast crosses in shares
    buf = np.zeros(70000 if not in_high else 80000)
    comm.Bcast(buf, root=0)
elif case == "allreduce-count":  # one cluster reduces more elements than the other
    n = 6 if in_high else 4
    out = np.zeros(n)
    comm.Allreduce(np.ones(n), out, op=MPI.SUM)
elif case == "allreduce-count-plain":  # the same after a good call: plain arrays' short path
    comm.Allreduce(np.ones(4), np.zeros(4), op=MPI.SUM)
    n = 6 if in_high else 4
    out = np.zeros(n)
    comm.Allreduce(np.ones(n), out, op=MPI.SUM)
elif case == "allreduce-count-large":  # the same, above the size where allreduce segments
    n = 20000 if in_high else 16384
    out = np.zeros(n)
    comm.Allreduce(np.ones(n), out, op=MPI.SUM)
elif case == "allreduce-count-split":  # the same, where allreduce crosses in shares
    n = 80000 if in_high else 70000
    out = np.zeros(n)
    comm.Allreduce(np.ones(n), out, op=MPI.SUM)
elif case in ("alltoall-block-larger", "alltoall-block-smaller"):
    # the high cluster's blocks differ, above the size where blocks go straight to ranks
    k = 8192 if not in_high else (8200 if case.endswith("larger") else 8000)
    comm.Alltoall(np.ones(k * size), np.zeros(k * size))
elif case in ("alltoallv-counts", "alltoallv-counts-straight", "alltoallv-counts-leaders"):
    # rank 0 sends the last rank 3 items, which expects 2; or, either side of the size from
    # which blocks go straight to their ranks, 10000 items (40000 B) against 6000 or back
    a, b = {"alltoallv-counts": (3, 2), "alltoallv-counts-straight": (10000, 6000),
            "alltoallv-counts-leaders": (6000, 10000)}[case]
    sc = [1] * size
    rc = [1] * size
    if rank == 0:
        sc[size - 1] = a
    if rank == size - 1:
        rc[0] = b
    send = np.zeros(sum(sc), "i4")
    recv = np.zeros(sum(rc), "i4")
    comm.Alltoallv([send, sc], [recv, rc])
elif case == "gather-small-recvbuf":  # the root's receive buffer cannot hold every block
    comm.Gather(np.zeros(4), np.zeros(4 * size - 1) if rank == 0 else None, root=0)
else:
    raise SystemExit(f"unknown case {case}")
print(f"rank {rank}: NO ERROR", flush=True)
