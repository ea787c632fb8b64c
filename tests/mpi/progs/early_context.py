"""A message on a new communicator that reaches a rank before it has registered the context.

A faster peer may leave Split and send on the new communicator while this rank still drains
its forwarder links inside the same Split. Here the last rank of the high cluster drains for a
while just before registering each new context, so the first rank's message (sent straight
after its Split returned) always comes early: it must be kept and delivered, in order, once
the context exists. `python early_context.py ROUNDS` on 2+2 ranks or more.
"""

import sys
import time

from mmpi import MPI

world = MPI.COMM_WORLD
rank, size = world.Get_rank(), world.Get_size()
rounds = int(sys.argv[1])
engine = world._core.engine
late = size - 1  # in the high cluster; rank 0 is in the low one
early = 0
_register = engine.register


def slow_register(ctx):
    """Drain the links for a while before the context exists, as a slow rank would."""
    global early
    end = time.monotonic() + 0.2
    while time.monotonic() < end:
        engine.progress()
        time.sleep(0.005)
    early += len(engine.p2p.early.get(ctx.id, ()))
    _register(ctx)


if rank == late:
    engine.register = slow_register
ok = True
for i in range(rounds):
    sub = world.Split(0, rank)
    if rank == 0:
        for k in range(3):
            sub.send((i, k), dest=late, tag=k)
    elif rank == late:
        got = [sub.recv(source=0, tag=k) for k in range(3)]
        ok &= got == [(i, 0), (i, 1), (i, 2)]
    sub.Barrier()
    sub.Free()
if rank == late:
    print(f"rank {rank}: early {early} ok {ok}", flush=True)
