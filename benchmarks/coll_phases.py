"""Where a bridged collective's time goes: its steps timed one by one, on every rank.

`mmpi-run --low 2 --high 2 -- python benchmarks/coll_phases.py [barrier|allreduce|alltoall]
[BYTES]` repeats the steps of mmpi's barrier, allreduce (the leader scheme, or from
`_collectives._SPLIT` on the shares) or alltoall (the leader scheme, or from
`_collectives._DIRECT_BLOCK` each block straight to its rank) with the library's own internals,
and prints per rank the median time of each step next to the median time of the real call.
Steps that a rank does not take show as 0.
"""

import statistics
import sys
import time

import numpy as np

from mmpi import MPI
from mmpi import _collectives as C

what = sys.argv[1] if len(sys.argv) > 1 else "barrier"
nbytes = int(sys.argv[2]) if len(sys.argv) > 2 else (1 << 20 if what == "allreduce" else 65536)
w = MPI.COMM_WORLD
c = C._Ctx.of(w, "phases")
now = time.perf_counter


def exchange(mine, theirs, tag: int) -> None:
    """The leaders' crossing: one message each way, both at once."""
    if c.leader:
        c.wait(c.recv(theirs, c.peer, tag, "phases"), c.send(mine, c.peer, tag))


def then_real(t: list[float], call) -> list[float]:
    """After the steps timed in `t`: a Barrier (untimed), then the real call, timed."""
    w.Barrier()
    t0 = now()
    call()
    return [*np.diff(t).tolist(), now() - t0]


def barrier_steps() -> list[float]:
    """Native barrier, token exchange, native barrier, then the real Barrier."""
    t = [now()]
    c.wait(c.L.Ibarrier())
    t.append(now())
    exchange(b"", bytearray(0), 101)
    t.append(now())
    c.wait(c.L.Ibarrier())
    t.append(now())
    w.Barrier()
    t.append(now())
    return np.diff(t).tolist()


x = np.ones(max(1, nbytes // 8))
y, z = np.empty_like(x), np.empty_like(x)


def allreduce_share_steps() -> list[float]:
    """Reduce-scatter, the k pairs' swap of shares, allgather, then the real Allreduce."""
    k = min(c.nl, c.no)
    counts, displs = C._shares(x.size, k, c.nl)
    n = counts[c.lrank]
    share, other = y[displs[c.lrank]:displs[c.lrank] + n], z[:n]
    t = [now()]
    c.wait(c.L.Ireduce_scatter(x, share, counts, MPI.SUM))
    t.append(now())
    if c.lrank < k:
        c.wait(c.recv(other, c.oo + c.lrank, 104, "phases"), c.send(share, c.oo + c.lrank, 104))
    t.append(now())
    c.wait(c.L.Iallgatherv(MPI.IN_PLACE, [y, counts, displs, MPI.DOUBLE]))
    t.append(now())
    return then_real(t, lambda: w.Allreduce(x, y, MPI.SUM))


def allreduce_steps() -> list[float]:
    """Reduce to the leader, exchange, bcast, then the real Allreduce."""
    like = C.as_typed(y, writable=True, op="phases")
    t = [now()]
    c.wait(C._ireduce(c, x, like.spec if c.leader else None, MPI.SUM, 0, like))
    t.append(now())
    exchange(y, z, 102)
    t.append(now())
    c.wait(c.L.Ibcast(y, 0))
    t.append(now())
    return then_real(t, lambda: w.Allreduce(x, y, MPI.SUM))


blk = nbytes
sb = np.ones(blk * c.n, np.uint8)
rb = np.empty_like(sb)
out, inn = sb[c.oo * blk:(c.oo + c.no) * blk], rb[c.oo * blk:(c.oo + c.no) * blk]
mine = np.empty(c.nl * c.no * blk, np.uint8)
theirs = np.empty_like(mine)


def alltoall_direct_steps() -> list[float]:
    """Local blocks, each cross block straight to its rank, then the real Alltoall."""
    local = ([blk] * c.nl, [(c.o + j) * blk for j in range(c.nl)])
    t = [now()]
    c.wait(c.L.Ialltoallv([sb, local, MPI.BYTE], [rb, local, MPI.BYTE]))
    t.append(now())
    rs = [c.recv(inn[j * blk:(j + 1) * blk], c.oo + j, 103, "phases") for j in range(c.no)]
    c.wait(*rs, *[c.send(out[j * blk:(j + 1) * blk], c.oo + j, 103) for j in range(c.no)])
    t.append(now())
    return then_real(t, lambda: w.Alltoall(sb, rb))


def alltoall_steps() -> list[float]:
    """Gather the crossing blocks at the leader, exchange, scatter, then the real Alltoall."""
    t = [now()]
    c.wait(c.L.Igather(out, mine if c.leader else None, 0))
    t.append(now())
    exchange(mine, theirs, 103)
    t.append(now())
    c.wait(c.L.Iscatter(theirs if c.leader else None, inn, 0))
    t.append(now())
    return then_real(t, lambda: w.Alltoall(sb, rb))


steps, names = {
    "barrier": (barrier_steps, ["native barrier", "crossing", "native barrier", "Barrier"]),
    "allreduce": (allreduce_steps, ["reduce to leader", "crossing", "bcast", "Allreduce"])
    if nbytes < C._SPLIT or min(c.nl, c.no) < 2 else
    (allreduce_share_steps, ["reduce-scatter", "crossing in shares", "allgather", "Allreduce"]),
    "alltoall": (alltoall_steps, ["gather at leader", "crossing", "scatter", "Alltoall"])
    if blk < C._DIRECT_BLOCK else
    (alltoall_direct_steps, ["local blocks", "crossing straight to the ranks", "Alltoall"]),
}[what]
rows = []
for i in range(300 if what == "barrier" else 60):
    w.Barrier()
    r = steps()
    if i >= 10:
        rows.append(r)
med = [statistics.median(col) * 1e6 for col in zip(*rows, strict=True)]
print(f"rank {w.Get_rank()} {what} {nbytes if what != 'barrier' else ''} B: "
      + ", ".join(f"{n} {v:.0f} us" for n, v in zip(names, med, strict=True)), flush=True)
