"""coll.c in bare mpi4py: the bridged collectives' floor for a Python relay and Python ranks.

The same roles, algorithms, messages and timing as coll.c (see its comment), with no mmpi:
a one-process relay job and two 2-process cluster jobs joined by Comm_connect, every process
polling with `sched_yield` every TESTS tests. The wire is coll.c's (port files, tags TO + r,
the relay re-tagging with the sender's local rank), so either side can be C and the other
Python: a C relay with Python ranks, or the reverse, tells which side the time goes to.

    python coll.py relay|low|high|native PORTDIR allreduce|bcast|alltoall|barrier ITERS BYTES

(`mpiexec -n 1` for the relay, `-n 2` for each cluster, `-n 4` for native: mpi4py's own
blocking collective, as mmpi-bench's native baseline calls it). Run by `run.sh coll` and
`run.sh bcast`. SETTLE=polled separates the timed calls as mmpi's Barrier would (see settle).
`barrier` (Python only; BYTES is ignored) times back-to-back barriers of mmpi's structure, as
`mmpi-bench barrier` times mmpi's, against mpi4py's own `Barrier` (run by `run.sh barrier`).
"""

import os
import sys
import time

import numpy as np
from mpi4py import MPI

WARMUP = 50
TO = 10  # a message for remote local rank r carries tag TO + r; the relay re-tags it
POOL = 16
TESTS = int(os.environ.get("TESTS", "10"))
SPLIT = int(os.environ.get("SPLIT", str(512 << 10)))
# How the calls are separated: "blocking" (coll.c's: MPI_Barrier, the leaders' swap, MPI_Barrier)
# or "polled" (mmpi's Barrier: the same steps as Ibarrier and waits that yield, see settle)
SETTLE = os.environ.get("SETTLE", "blocking")
_yield = os.sched_yield
_BYTE = MPI.BYTE


def wait(*reqs: MPI.Request) -> None:
    """Test `reqs` until all are done, yielding the CPU every TESTS tests (coll.c's wait)."""
    testall = MPI.Request.Testall
    reqs = list(reqs)
    while True:
        for _ in range(TESTS):
            if testall(reqs):
                return
        _yield()


def per_call(op: str, nbytes: int) -> int:
    """Messages one call and its settle() send across, both directions together."""
    if op == "allreduce":
        return (4 if nbytes >= SPLIT else 2) + 2
    if op == "bcast":
        return (2 if nbytes >= SPLIT else 1) + 2
    if op == "barrier":
        return 2  # timed back to back: no settle between
    return 8 + 2


def settle(me: int, w: MPI.Intracomm, x: MPI.Intercomm) -> None:
    """The untimed synchronisation between calls: the leaders swap a byte between barriers.

    MPICH's blocking Barrier spins without yielding; "polled" waits as mmpi's Barrier does.
    On oversubscribed cores the two can leave the clusters in a different order, and the
    rank that starts the next call first waits inside its timed call for the others.
    """
    if SETTLE == "polled":
        barrier(me, w, x)
        return
    w.Barrier()
    if me == 0:
        swap(x)
    w.Barrier()


def swap(x: MPI.Intercomm) -> None:
    """The leaders' exchange of a byte through the relay."""
    a, b = bytearray(1), bytearray(1)
    wait(x.Irecv([b, _BYTE], 0, MPI.ANY_TAG), x.Isend([a, _BYTE], 0, TO))


def barrier(me: int, w: MPI.Intracomm, x: MPI.Intercomm) -> None:
    """The steps of mmpi's Barrier, bare: Ibarrier, the leaders' swap, Ibarrier."""
    wait(w.Ibarrier())
    if me == 0:
        swap(x)
    wait(w.Ibarrier())


def relay(sides: tuple[MPI.Intercomm, MPI.Intercomm], count: int, nbytes: int) -> None:
    """Move `count` messages to the other side: Improbe, receive whole, send on (coll.c)."""
    bufs = [bytearray(max(nbytes, 1)) for _ in range(POOL)]
    sent = [MPI.REQUEST_NULL] * POOL
    st = MPI.Status()
    moved = nxt = 0
    while moved < count:
        did = False
        for s in (0, 1):
            m = sides[s].Improbe(MPI.ANY_SOURCE, MPI.ANY_TAG, st)
            if m is None:
                continue
            k, nxt = nxt, (nxt + 1) % POOL
            wait(sent[k])  # the pool is larger than what one call has in flight
            n = st.Get_count(_BYTE)
            m.Recv([bufs[k], n, _BYTE], st)
            sent[k] = sides[1 - s].Isend([bufs[k], n, _BYTE], st.Get_tag() - TO, st.Get_source())
            moved += 1
            did = True
        if not did:
            _yield()
    MPI.Request.Waitall(sent)


def allreduce(s, r, theirs, me: int, w, x) -> None:
    """One bridged Allreduce (SUM): the leaders' swap, or shares from SPLIT on (coll.c)."""
    n = s.size
    if s.nbytes >= SPLIT:
        half = n // 2
        share = r[me * half:(me + 1) * half]
        wait(w.Ireduce_scatter(s, share, [half, half], MPI.SUM))
        wait(x.Irecv(theirs[:half], 0, MPI.ANY_TAG), x.Isend(share, 0, TO + me))
        share += theirs[:half]
        wait(w.Iallgather(MPI.IN_PLACE, r))
        return
    wait(w.Ireduce(s, r, MPI.SUM, 0))
    if me == 0:
        wait(x.Irecv(theirs, 0, MPI.ANY_TAG), x.Isend(r, 0, TO))
        r += theirs
    wait(w.Ibcast(r, 0))


def bcast(b, low: bool, me: int, w, x) -> None:
    """One bridged Bcast from low rank 0: shares to the high ranks from SPLIT on (coll.c)."""
    nbytes = b.nbytes
    split, half = nbytes >= SPLIT, nbytes // 2
    if low:
        sends = []
        if me == 0 and split:
            sends = [x.Isend(b[:half], 0, TO), x.Isend(b[half:], 0, TO + 1)]
        elif me == 0:
            sends = [x.Isend(b, 0, TO)]
        wait(w.Ibcast(b, 0))
        wait(*sends)
    elif split:
        wait(x.Irecv(b[me * half:(me + 1) * half], 0, MPI.ANY_TAG))
        wait(w.Iallgather(MPI.IN_PLACE, b))
    else:
        if me == 0:
            wait(x.Irecv(b, 0, MPI.ANY_TAG))
        wait(w.Ibcast(b, 0))


def alltoall(s, r, nbytes: int, low: bool, me: int, w, x) -> None:
    """One bridged Alltoall: remote blocks straight to their ranks via the relay (coll.c)."""
    mine, peer, far = (0 if low else 2) + me, (0 if low else 2) + 1 - me, 2 if low else 0
    blk = [slice(j * nbytes, (j + 1) * nbytes) for j in range(4)]
    reqs = [x.Irecv(r[blk[far + i]], 0, i) for i in range(2)]
    reqs.append(w.Irecv(r[blk[peer]], 1 - me, 0))
    reqs += [x.Isend(s[blk[far + i]], 0, TO + i) for i in range(2)]
    reqs.append(w.Isend(s[blk[peer]], 1 - me, 0))
    r[blk[mine]] = s[blk[mine]]
    wait(*reqs)


def connect(pdir: str, cluster: str) -> MPI.Intercomm:
    """A cluster's side: wait for the relay's port file, connect collectively (jobs.h)."""
    w = MPI.COMM_WORLD
    port = None
    if w.Get_rank() == 0:
        path = os.path.join(pdir, cluster)
        while not os.path.exists(path):
            time.sleep(0.001)
        port = open(path).read()
    return w.Connect(port, MPI.INFO_NULL, 0)


def accept(pdir: str) -> tuple[MPI.Intercomm, MPI.Intercomm]:
    """The relay's side: a port per cluster, its name in a file, accept low then high."""
    ports = []
    for name in ("low", "high"):
        port = MPI.Open_port()
        path = os.path.join(pdir, name)
        with open(path + ".tmp", "w") as f:
            f.write(port)
        os.rename(path + ".tmp", path)
        ports.append(port)
    return tuple(MPI.COMM_SELF.Accept(p, MPI.INFO_NULL, 0) for p in ports)


def barriers(role: str, pdir: str, w: MPI.Intracomm, iters: int) -> int:
    """Time `iters` back-to-back barriers after WARMUP: mpi4py's (native) or mmpi's structure."""
    me = w.Get_rank()
    x = None if role == "native" else connect(pdir, role)
    for i in range(WARMUP + iters):
        if i == WARMUP:
            t0 = MPI.Wtime()
        w.Barrier() if x is None else barrier(me, w, x)
    spent = w.reduce(MPI.Wtime() - t0, MPI.MAX, 0)
    if me == 0:
        if x is None:
            print(f"python native barrier 0 B on 4 ranks: {spent / iters * 1e6:.1f} us")
        else:
            print(f"python relayed barrier 0 B on 2+2 ranks, {role} cluster: "
                  f"{spent / iters * 1e6:.1f} us")
    if x is not None:
        x.Disconnect()
    return 0


def main() -> int:
    """Run one role; a cluster prints its slower rank's time per call."""
    if len(sys.argv) != 6 or sys.argv[1] not in ("relay", "low", "high", "native") or \
            sys.argv[3] not in ("allreduce", "bcast", "alltoall", "barrier"):
        print("usage: coll.py relay|low|high|native PORTDIR allreduce|bcast|alltoall|barrier "
              "ITERS BYTES", file=sys.stderr)
        return 2
    if SETTLE not in ("blocking", "polled"):
        print(f"coll.py: SETTLE={SETTLE!r}: expected blocking or polled", file=sys.stderr)
        return 2
    role, pdir, op = sys.argv[1:4]
    iters, nbytes = int(sys.argv[4]), int(sys.argv[5])
    total = iters + WARMUP
    w = MPI.COMM_WORLD
    me = w.Get_rank()
    if role == "relay":
        sides = accept(pdir)
        relay(sides, total * per_call(op, nbytes), nbytes)
        for c in sides:
            c.Disconnect()
        return 0
    if op == "barrier":
        return barriers(role, pdir, w, iters)
    f = np.full(nbytes // 4, 0.0, np.float32)
    if role == "native":
        s, r, b = f + 1, np.empty_like(f), np.zeros(4 * nbytes, np.uint8)
        a = np.empty_like(b)  # made once: a fresh array per call would be timed too
        spent = 0.0
        w.Barrier()
        for i in range(total):
            t0 = MPI.Wtime()
            if op == "allreduce":
                w.Allreduce(s, r, MPI.SUM)
            elif op == "bcast":
                w.Bcast(b[:nbytes], 0)
            else:
                w.Alltoall(b, a)
            if i >= WARMUP:
                spent += MPI.Wtime() - t0
            w.Barrier()
        most = w.reduce(spent, MPI.MAX, 0)
        if me == 0:
            print(f"python native {op} {nbytes} B on 4 ranks: {most / iters * 1e6:.1f} us")
        return 0
    low = role == "low"
    x = connect(pdir, role)
    world = (0 if low else 2) + me
    s = f + (2 * low + me + 1)  # 1, 2 | 3, 4: the sum is 10
    r, theirs = np.empty_like(s), np.empty_like(s)
    b = np.zeros(4 * nbytes, np.uint8)
    if low and me == 0:
        b[:nbytes] = 7
    if op == "alltoall":  # the block for rank j carries 16 * (sender) + j
        for j in range(4):
            b[j * nbytes:(j + 1) * nbytes] = 16 * world + j
    a = np.zeros_like(b)
    spent = 0.0
    for i in range(total):
        t0 = MPI.Wtime()
        if op == "allreduce":
            allreduce(s, r, theirs, me, w, x)
        elif op == "bcast":
            bcast(b[:nbytes], low, me, w, x)
        else:
            alltoall(b, a, nbytes, low, me, w, x)
        if i >= WARMUP:
            spent += MPI.Wtime() - t0
        settle(me, w, x)
    most = w.reduce(spent, MPI.MAX, 0)
    # the result is checked, so that a broken algorithm cannot pass for a fast one
    if op == "allreduce":
        bad = r.size > 0 and (r[0] != 10 or r[-1] != 10)
    elif op == "bcast":
        bad = b[0] != 7 or b[nbytes - 1] != 7
    else:
        bad = any(a[j * nbytes] != 16 * j + world or a[(j + 1) * nbytes - 1] != 16 * j + world
                  for j in range(4))
    if bad:
        print(f"coll.py {op} {nbytes}: wrong result on {role} rank {me}", file=sys.stderr)
        w.Abort(3)
    if me == 0:
        how = ", polled settle" if SETTLE == "polled" else ""
        print(f"python relayed {op} {nbytes} B on 2+2 ranks{how}, {role} cluster: "
              f"{most / iters * 1e6:.1f} us")
    x.Disconnect()
    return 0


if __name__ == "__main__":
    sys.exit(main())
