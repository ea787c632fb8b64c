"""Where a small Allreduce's Python costs most: before its first message, bisected in one job.

`mmpi-run --low 2 --high 2 -- python benchmarks/allreduce_entry.py [ROUNDS [WAYS]]` times, in
one job, ways of making the same 8 B Allreduce (float32 SUM), each call alone with an untimed
Barrier after it as `mmpi-bench` times it, round by round in an order that reverses every
other round. WAYS is a comma-separated list (default `public,plain`) of:

  public     `comm.Allreduce(x, y)`: the collective wrapper, the argument checks, the call
  plain      `_collectives._allreduce_plain` called directly: no wrapper, no checks
  checks     `plain_pair` (the short path's check of the arrays), then `plain`
  busy       0.8 us of busy work, then `plain`
  internals  `plain`'s steps written out (no `_same_size`, objects bound once)

It prints, on vrank 0, each way's median time per call over the rounds (the slowest rank's
figure per round) and, for two ways, in how many rounds the second was faster. A way that
takes another's message or miscounts a call fails the job or hangs it; the result is checked.
"""

import statistics
import sys
import time

import numpy as np
from _alternate import alternate  # benchmarks/, beside this script
from mpi4py import MPI as native

from mmpi import MPI
from mmpi import _collectives as C

w = MPI.COMM_WORLD
rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 16
names = (sys.argv[2] if len(sys.argv) > 2 else "public,plain").split(",")
x, y = np.ones(2, np.float32), np.empty(2, np.float32)
w.Allreduce(x, y)  # the first call works out the dtype (`as_typed`): the short path from now on
c = C._Ctx.of(w, "Allreduce")
e = c.e
dt, op = native.FLOAT, native.SUM
now = time.perf_counter


def plain() -> None:
    """The short path's body, called as `allreduce` would call it."""
    C._allreduce_plain(C._Ctx.of(w, "Allreduce"), x, y, op, dt)
    e.colls += 1  # the crossings carry the call's number, which the wrapper would count


def checks() -> None:
    """`plain`, with the arrays checked first as the short path checks them."""
    C._allreduce_plain(C._Ctx.of(w, "Allreduce"), x, y, op, C.plain_pair(x, y))
    e.colls += 1


def busy() -> None:
    """`plain`, after 0.8 us of busy work: about what `plain_pair` takes on a loaded core."""
    t = now() + 0.8e-6
    while now() < t:
        pass
    plain()


def internals() -> None:
    """`plain`'s steps written out."""
    mine = [y, dt]
    if c.leader:
        c.wait(c.L.Ireduce([x, dt], mine, op, 0))
        op.Reduce_local([c.xswap(y, C.T_ALLREDUCE), dt], mine)
    else:
        c.wait(c.L.Ireduce([x, dt], None, op, 0))
    c.wait(c.L.Ibcast(mine, 0))
    e.colls += 1


WAYS = {"public": lambda: w.Allreduce(x, y), "plain": plain, "checks": checks, "busy": busy,
        "internals": internals}
unknown = [n for n in names if n not in WAYS]
if unknown:
    sys.exit(f"allreduce_entry.py: unknown way(s) {', '.join(unknown)}; one of {', '.join(WAYS)}")
times = alternate({n: WAYS[n] for n in names}, rounds, calls=300, warm=20, sync=w.Barrier,
                  between=w.Barrier)
if not (y == 4).all():  # 1 per rank, 2+2 ranks
    sys.exit(f"allreduce_entry.py: wrong result {y} on rank {w.Get_rank()}")
slowest = {n: [w.allreduce(t, op=MPI.MAX) for t in times[n]] for n in names}
if w.Get_rank() == 0:
    line = ", ".join(f"{n} {statistics.median(slowest[n]):.1f}" for n in names)
    if len(names) == 2:
        a, b = (slowest[n] for n in names)
        won = sum(q < p for p, q in zip(a, b, strict=True))
        line += f"; {names[1]} faster in {won} of {rounds} rounds"
    print(f"us per call, median of {rounds} rounds: {line}", flush=True)
