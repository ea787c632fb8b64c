"""What a microsecond of per-call Python on every rank costs a bridged collective.

`mmpi-run --low 2 --high 2 -- python benchmarks/busy_slope.py [ROUNDS]` times the bare body of
mmpi's small Allreduce (native reduce to the leader, the leaders' crossing, native bcast; the
library's internals, no argument parsing) with 0, 10, 20 and 40 us of busy work added before it
on every rank, the four variants alternated in one job, and prints the median call time of
each and the slope (added call time per added microsecond); every rank also prints its own CPU
time per call (polling included). On a machine with fewer cores than
processes, a slope well above 1 means the ranks' own Python is multiplied on the critical path,
so cutting it pays more than its CPU time.
"""

import statistics
import sys
import time

import numpy as np

from mmpi import MPI
from mmpi import _collectives as C

w = MPI.COMM_WORLD
c = C._Ctx.of(w, "busy_slope")
now = time.perf_counter
rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 40
x, y = np.ones(1), np.empty(1)
sb = C.as_typed(x, writable=False, op="busy_slope")
rb = C.as_typed(y, writable=True, op="busy_slope")


def body() -> None:
    """The leader scheme of `_collectives.allreduce`, without its checks."""
    if c.leader:
        c.wait(c.L.Ireduce(sb.spec, rb.spec, MPI.SUM, 0))
        theirs = c.tmp(1, rb.nbytes)
        c.wait(c.recv(theirs, c.peer, 106, "busy_slope"), c.send(rb.view, c.peer, 106))
        C._combine(MPI.SUM, rb, theirs, c.me == "low")
    else:
        c.wait(c.L.Ireduce(sb.spec, None, MPI.SUM, 0))
    c.wait(c.L.Ibcast(rb.spec, 0))


def with_busy(us: float):
    """The body after `us` microseconds of busy work."""

    def call() -> None:
        end = now() + us * 1e-6
        while now() < end:
            pass
        body()
    return call


added = [0, 10, 20, 40]
calls = {us: with_busy(us) for us in added}
times: dict[int, list[float]] = {us: [] for us in added}
cpu: dict[int, list[float]] = {us: [] for us in added}
for i in range(rounds):
    for us in added[i % 4:] + added[:i % 4]:  # every variant in every position in turn
        w.Barrier()
        t0, c0 = now(), time.process_time()
        for _ in range(20):
            calls[us]()
        times[us].append((now() - t0) / 20 * 1e6)
        cpu[us].append((time.process_time() - c0) / 20 * 1e6)
med = {us: statistics.median(v) for us, v in times.items()}
slope = np.polyfit(added, [med[us] for us in added], 1)[0]
# CPU time of this process per call (polling included): with every rank's figure next to the
# call time, it shows whether the cores were saturated.
print(f"rank {w.Get_rank()} cpu us per call: "
      + ", ".join(f"{us}: {statistics.median(v):.0f}" for us, v in cpu.items()), flush=True)
w.Barrier()
if w.Get_rank() == 0:
    print("busy us per rank -> call us: "
          + ", ".join(f"{us}: {t:.0f}" for us, t in med.items())
          + f"; slope {slope:.1f}", flush=True)
