"""A whole bridged job inside one mpiexec job: forwarders and both clusters, no launcher, no DPM.

The first F ranks are forwarders, the next L the low cluster, the rest the high cluster.
`Split` makes the three groups and `Create_intercomm` joins each cluster to each forwarder, in
place of Open_port/Accept/Connect; then the real `forwarder.Forwarder.serve` relays and the
real rank-side engine runs over those intercommunicators. `run(main, low=, forwarders=)`
calls `main(comm)` on every rank of both clusters with the bridged world and returns on the
forwarders with their exit status.
"""

from __future__ import annotations

import os
import sys

from mpi4py import MPI

from forwarder._relay import Link
from forwarder.daemon import Forwarder
from mmpi._runtime import bootstrap as _bootstrap

_TAG = 4242


def run(main, *, low: int, forwarders: int = 1, chunk: int = 1 << 20,
        eager_max: int = 32 << 10, stripe_min: int = 4 << 20) -> int:
    world = MPI.COMM_WORLD
    rank, size = world.Get_rank(), world.Get_size()
    high = size - forwarders - low
    assert low >= 1 and high >= 1, "need a rank in each cluster"
    first = {"low": forwarders, "high": forwarders + low}  # world rank of each cluster's rank 0
    if rank < forwarders:
        color, role = rank, "fwd"
    else:
        role = "low" if rank < forwarders + low else "high"
        color = forwarders if role == "low" else forwarders + 1
    group = world.Split(color, rank)
    if role == "fwd":
        links = {}
        for i, c in enumerate(("low", "high")):
            inter = group.Create_intercomm(0, world, first[c], _TAG + 2 * rank + i)
            links[c] = Link(c, inter, inter.Dup(), inter.Get_remote_size())
        fwd = Forwarder(os.devnull, index=rank, chunk=chunk, eager_max=eager_max,
                        log=lambda msg: print(f"[fwd{rank}] {msg}", flush=True))
        return fwd.serve(links)
    i = 0 if role == "low" else 1
    links = []
    for k in range(forwarders):
        inter = group.Create_intercomm(0, world, k, _TAG + 2 * k + i)
        links.append((inter, inter.Dup()))
    comm = _bootstrap.world_over(role, group, links, timeout=30, stripe_min=stripe_min)
    try:
        main(comm)
    except BaseException:
        import traceback

        traceback.print_exc()
        sys.stdout.flush()
        world.Abort(1)
    _bootstrap.finalize()
    return 0
