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
Then, with real messages: the low rank sends windows of 64 x 8 B, the high rank naps until
they are there and times its `Irecv`s and `Waitall` (which takes them off the forwarder link:
in C on the compiled path, completing the posted receives there).
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
    """Time the phases on the high rank; the low rank sends the real windows."""
    windows = int(sys.argv[1]) if len(sys.argv) > 1 else 400
    world = MPI.COMM_WORLD
    if world.Get_rank() == 1:
        phases = _phases(world, windows)
        print("per message (us): " + ", ".join(f"{name} {statistics.median(v) / W * 1e6:.2f}"
                                               for name, v in phases.items()), flush=True)
    world.Barrier()
    real = _real(world, max(windows // 4, 1))
    if world.Get_rank() == 1:
        print("real messages, per message (us): " + ", ".join(
            f"{name} {statistics.median(v) / W * 1e6:.2f}" for name, v in real.items()),
            flush=True)


def _real(world, windows: int) -> dict[str, list[float]]:
    """Windows of the low rank, arrived (a nap) before the high rank posts its receives.

    The high rank times `Irecv` x 64, then `Waitall`, which takes them off the forwarder link.
    """
    into = [np.zeros(8, np.uint8) for _ in range(W)]
    ack = np.zeros(1, np.uint8)
    times: dict[str, list[float]] = {"Irecv": [], "Waitall": []}
    clock = time.perf_counter
    for _ in range(windows):
        if world.Get_rank() == 0:
            MPI.Request.Waitall([world.Isend(np.full(8, i, np.uint8), 1, 1) for i in range(W)])
            world.Recv(ack, 1, 2)
            continue
        time.sleep(0.002)
        t0 = clock()
        reqs = [world.Irecv(b, 0, 1) for b in into]
        t1 = clock()
        MPI.Request.Waitall(reqs)
        t2 = clock()
        assert all(b[0] == i for i, b in enumerate(into)), [b[0] for b in into]
        times["Irecv"].append(t1 - t0)
        times["Waitall"].append(t2 - t1)
        world.Send(ack, 0, 2)
    return times


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
