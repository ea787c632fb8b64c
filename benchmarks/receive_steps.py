"""What a receiving rank's Python costs per small forwarded message, phase by phase.

usage: mmpi-run --low 1 --high 1 python benchmarks/receive_steps.py [WINDOWS]   (default 400)

Inside a bridged job, the high rank times the three phases of a window of 64 receives of 8 B
from the low rank, with the messages made here (envelope and payload as a forwarder delivers
them) and handed to the engine as its link drain would: no other process, no wait, so the
figures are the interpreted work alone (the Python path's reading of the envelope included,
which the compiled path does in its drain), a few percent apart from run to run in a quiet
stretch of the machine. Every receive is checked to hold its message, in order.
- posted first: `Irecv` x 64, then the messages arrive, then `Waitall`;
- arrived first: the messages arrive, then `Irecv` x 64 (each finds its message), `Waitall`.
Prints the medians over the windows, in microseconds per message
(docs/performance.md, "The compiled rank path").
"""

from __future__ import annotations

import statistics
import sys
import time

import numpy as np
from mpi4py import MPI

from mmpi.wire import protocol as P

W = 64


def main() -> None:
    """Time the phases on the high rank; the low rank only waits at the end."""
    windows = int(sys.argv[1]) if len(sys.argv) > 1 else 400
    world = MPI.COMM_WORLD
    if world.Get_rank() == 1:
        phases = _phases(world, windows)
        print("per message (us): " + ", ".join(f"{name} {statistics.median(v) / W * 1e6:.2f}"
                                               for name, v in phases.items()), flush=True)
    world.Barrier()


def _phases(world, windows: int) -> dict[str, list[float]]:
    core = world._core  # the bridged communicator's state: its engine and context
    engine, ctx = core.engine, core.p2p
    sender = ctx.world_of[0]

    def messages() -> list[bytearray]:
        out = []
        for _ in range(W):
            buf = bytearray(P.ENVELOPE_SIZE + 8)
            P.pack_eager_into(buf, sender, engine.vrank, 1, ctx.id, 8, 0, 0)
            buf[P.ENVELOPE_SIZE:] = len(out).to_bytes(8, "little")
            out.append(buf)
        return out

    def arrive(bufs) -> None:
        for buf in bufs:
            engine.on_forwarded(0, buf, P.T_EAGER)

    into = [np.zeros(8, np.uint8) for _ in range(W)]

    def check() -> None:
        for i, b in enumerate(into):
            assert int.from_bytes(b.tobytes(), "little") == i, (i, b)
            b[:] = 0

    names = ("posted: Irecv", "arrival", "Waitall", "arrived: arrival", "Irecv", "Waitall ")
    phases: dict[str, list[float]] = {name: [] for name in names}
    clock = time.perf_counter
    for _ in range(windows):
        bufs = messages()
        t0 = clock()
        reqs = [world.Irecv(b, 0, 1) for b in into]
        t1 = clock()
        arrive(bufs)
        t2 = clock()
        MPI.Request.Waitall(reqs)
        t3 = clock()
        check()
        bufs = messages()
        t4 = clock()
        arrive(bufs)
        t5 = clock()
        reqs = [world.Irecv(b, 0, 1) for b in into]
        t6 = clock()
        MPI.Request.Waitall(reqs)
        t7 = clock()
        check()
        for name, dt in zip(names, (t1 - t0, t2 - t1, t3 - t2, t5 - t4, t6 - t5, t7 - t6),
                            strict=True):
            phases[name].append(dt)
    return phases


if __name__ == "__main__":
    main()
