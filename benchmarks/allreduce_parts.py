"""Where a small bridged Allreduce's time goes: native parts, crossing, or the call around them.

`mmpi-run --low 2 --high 2 -- python benchmarks/allreduce_parts.py [ROUNDS]` alternates, in
one job, four ways of doing the same messages: the library's Barrier; the library's 8 B
Allreduce; that Allreduce's bare body (native reduce to the leader, the leaders' 8 B crossing,
native bcast: the library's internals with numpy buffers, no argument handling or checks); and
the bare body with `Ibarrier` in place of the reduce and the bcast. It prints the median time
per call of each. Body against Barrier shows the cost of an 8 B payload and its combine; call
against body, the cost of the library's argument handling on oversubscribed cores.
"""

import statistics
import sys

import numpy as np
from _alternate import alternate  # benchmarks/, beside this script
from mpi4py import MPI as native

from mmpi import MPI
from mmpi import _collectives as C

w = MPI.COMM_WORLD
c = C._Ctx.of(w, "allreduce_parts")
rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 12
x, y = np.ones(2, np.float32), np.empty(2, np.float32)
e = c.e


def body(reduce: bool) -> None:
    """The leader scheme of `_collectives.allreduce` (or the same with barriers), bare.

    The leaders swap their parts as the library's small collectives do: a crossing each way
    (engine Rule 5). The engine counts the call like a collective's, as the crossings carry
    the call's number, which the library's wrapper (`comm._collective`) counts.
    """
    L = c.L
    if c.leader:
        c.wait(L.Ireduce(x, y, native.SUM, 0) if reduce else L.Ibarrier())
        s = c.xsend(y, c.peer, C.T_ALLREDUCE)
        theirs = c.xrecv(c.peer, C.T_ALLREDUCE)
        c.wait(s)
        np.add(y, np.frombuffer(theirs, np.float32), out=y)
    else:
        c.wait(L.Ireduce(x, None, native.SUM, 0) if reduce else L.Ibarrier())
    c.wait(L.Ibcast(y, 0) if reduce else L.Ibarrier())
    e.colls += 1


ways = {
    "Barrier": w.Barrier,
    "Allreduce": lambda: w.Allreduce(x, y, MPI.SUM),
    "bare body": lambda: body(True),
    "bare body with barriers": lambda: body(False),
}
times = alternate(ways, rounds, calls=200, warm=10, sync=w.Barrier)
if w.Get_rank() == 0:
    print("us per call: " + ", ".join(f"{name} {statistics.median(t):.0f}"
                                      for name, t in times.items()), flush=True)
