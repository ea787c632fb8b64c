"""How much of a bridged Barrier is the ranks' own Python: the library's against bare ones.

`mmpi-run --low 2 --high 2 -- python benchmarks/barrier_lean.py [ROUNDS] [CALLS]` alternates,
in one job, ways of making the same messages (native Ibarrier per cluster, one crossing each
way between the leaders, native Ibarrier again):

- `Barrier`: the library's call, wrapper (`comm._collective`) and all;
- `ctx body`: the library's body as it was before `Engine.cross_swap`, through
  `_collectives._Ctx`'s wait, send and receive of a crossing, no wrapper;
- `engine body`: the body as it is now, through the engine's calls (`wait_one`,
  `cross_swap`) directly, no wrapper;
- `lean`: the same messages with nothing of the library's around them: Test ten times then
  yield, pack a crossing, Isend, Improbe and yield until it comes. No liveness checks, no
  bridge draining, no kept crossings: a floor for a Python layer, not a usable barrier.

It prints the median time per call of each way and, for each pair of ways, in how many rounds
the first was the faster. Each round times CALLS calls (300 by default) of each way, in an
order that alternates from round to round. The ways must stay in step: every one counts the
call as a collective (the crossings carry the call's number) and takes exactly one crossing.
"""

import statistics
import sys

from _alternate import alternate  # benchmarks/, beside this script
from mpi4py import MPI as native

from mmpi import MPI
from mmpi import _collectives as C
from mmpi import protocol as P
from mmpi._backoff import yield_cpu

w = MPI.COMM_WORLD
c = C._Ctx.of(w, "barrier_lean")
e = c.e
rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 16
calls = int(sys.argv[2]) if len(sys.argv) > 2 else 300
_BYTE = native.BYTE
_TEN = range(10)


def ctx_body() -> None:
    """The library's Barrier body through _Ctx, as it was before `Engine.cross_swap`."""
    c.wait(c.L.Ibarrier())
    if c.leader:
        s = c.xsend(b"", c.peer, C.T_BARRIER)
        c.xrecv(c.peer, C.T_BARRIER)
        c.wait(s)
    c.wait(c.L.Ibarrier())
    e.colls += 1


def engine_body() -> None:
    """The same through the engine's calls directly."""
    L = c.L
    e.wait_one(L.Ibarrier())
    if c.leader:
        e.cross_swap(c.k, b"", c.peer, C.T_BARRIER, "Barrier")
    e.wait_one(L.Ibarrier())
    e.colls += 1


def _spin(req) -> None:
    test = req.Test
    while True:
        for _ in _TEN:
            if test():
                return
        yield_cpu()


link = e.links[P.route(e.vrank, c.peer, e.nfwd)][0] if c.leader else None
st = native.Status()


def lean() -> None:
    """The same messages, bare (see the module docstring)."""
    L = c.L
    _spin(L.Ibarrier())
    if c.leader:
        out = P.pack_crossing(e.vrank, c.peer, C.T_BARRIER, c.k.id, e.colls, b"")
        s = link.Isend([out, _BYTE], 0, P.T_COLL)
        while (msg := link.Improbe(0, P.T_COLL, st)) is None:
            yield_cpu()
        buf = bytearray(st.Get_count(_BYTE))
        msg.Recv([buf, _BYTE])
        src, _, tag, call = P.unpack_crossing(buf)
        if (src, tag, call) != (c.peer, C.T_BARRIER, e.colls):
            raise RuntimeError(f"lean barrier: unexpected crossing {src, tag, call}")
        _spin(s)
    _spin(L.Ibarrier())
    e.colls += 1


ways = {"Barrier": w.Barrier, "ctx body": ctx_body, "lean": lean}
if hasattr(e, "cross_swap"):  # the engine call this script was written to measure
    ways["engine body"] = engine_body
times = alternate(ways, rounds, calls=calls, warm=20, sync=w.Barrier)
# Each rank's own clock: report the slowest rank's figure per round, as a collective's time.
times = {name: [max(v) for v in zip(*w.allgather(t), strict=True)] for name, t in times.items()}
if w.Get_rank() == 0:
    print(f"us per call, median of {rounds} rounds: "
          + ", ".join(f"{name} {statistics.median(t):.1f}" for name, t in times.items()))
    names = list(ways)
    for a in names:
        for b in names:
            if a < b:
                wins = sum(x < y for x, y in zip(times[a], times[b], strict=True))
                print(f"  {a} faster than {b} in {wins} of {rounds} rounds")
    sys.stdout.flush()
