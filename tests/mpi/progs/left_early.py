"""A rank leaves while others still need it: `python left_early.py MODE VRANK MARKER`.

Modes:
  system-exit     VRANK runs `raise SystemExit(3)` (which no sys.exit hook sees) at once; the
                  others enter a Barrier. They must fail with RankGone instead of hanging.
  return          VRANK's program just ends after one Bcast; the others call a second Bcast.
  return-allreduce  the same with three small Allreduces of arrays, then a fourth (the short
                  path from the second on)
  recv            VRANK's program ends at once; vrank 1 (or 2) waits for a message from it.
  recv-any        every rank but 1 ends at once; vrank 1 waits for a message from anyone.
  probe           VRANK's program ends at once; vrank 1 (or 2) probes for a message from it.
  freed-return    a new communicator over every rank, one Barrier on it; VRANK frees it and
                  ends; the others call a second Barrier on it.
  finish-freed    correct program: every rank makes a new communicator; vrank 1 (or 2) starts
                  an Ibarrier on it and sleeps while VRANK finishes the barrier, frees the
                  communicator and ends; only then does vrank 1 wait. Must succeed.
  finish-early    correct program: VRANK sends one message to every other rank and ends; the
                  others receive it late, then talk among themselves by point-to-point and
                  end. Must succeed.
"""

import sys
import time

import numpy as np

from mmpi import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
mode, victim = sys.argv[1], int(sys.argv[2])
buf = np.zeros(4)

if mode == "system-exit":
    if rank == victim:
        raise SystemExit(3)
    comm.Barrier()
    print(f"rank {rank}: left a Barrier that rank {victim} never entered", flush=True)
elif mode == "return":
    comm.Bcast(buf, root=0)
    if rank != victim:
        comm.Bcast(buf, root=0)
        print(f"rank {rank}: finished a Bcast without rank {victim}", flush=True)
elif mode == "return-allreduce":
    out = np.zeros(4)
    for _ in range(3):  # the first makes the communicator's context; the others go short
        comm.Allreduce(buf, out)
    if rank != victim:
        comm.Allreduce(buf, out)
        print(f"rank {rank}: finished an Allreduce without rank {victim}", flush=True)
elif mode == "recv":
    waiter = 1 if victim != 1 else 2
    if rank == waiter:
        comm.Recv(buf, source=victim, tag=7)
        print(f"rank {rank}: received what rank {victim} never sent", flush=True)
elif mode == "probe":
    waiter = 1 if victim != 1 else 2
    if rank == waiter:
        comm.Probe(source=victim, tag=7)
        print(f"rank {rank}: received what rank {victim} never sent (probed)", flush=True)
elif mode == "recv-any":
    if rank == 1:
        st = MPI.Status()
        comm.Recv(buf, source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG, status=st)
        print(f"rank {rank}: received what nobody sent", flush=True)
elif mode == "freed-return":
    sub = comm.Split(0, rank)
    sub.Barrier()
    if rank == victim:
        sub.Free()
    else:
        sub.Barrier()
        print(f"rank {rank}: finished a Barrier without rank {victim}", flush=True)
elif mode == "finish-freed":
    waiter = 1 if victim != 1 else 2
    sub = comm.Split(0, rank)
    if rank == waiter:
        req = sub.Ibarrier()
        time.sleep(2.0)  # the victim leaves meanwhile: its notice comes before the barrier ends
        req.Wait()
    else:
        sub.Barrier()
    sub.Free()
    print(f"rank {rank}: finished after rank {victim}", flush=True)
elif mode == "finish-early":
    if rank == victim:
        for r in range(size):
            if r != victim:
                comm.Send(np.full(4, float(r)), r, 5)
    else:
        time.sleep(4.0)  # past the notice that `victim` has left and its grace period
        comm.Recv(buf, source=victim, tag=5)
        assert buf[0] == rank, buf
        others = [r for r in range(size) if r != victim]
        nxt = others[(others.index(rank) + 1) % len(others)]
        prv = others[(others.index(rank) - 1) % len(others)]
        comm.Sendrecv(np.full(4, float(rank)), nxt, 6, buf, prv, 6)
        assert buf[0] == prv, buf
        print(f"rank {rank}: finished after rank {victim}", flush=True)
