"""A known traffic pattern under monitoring: the counters must account for every byte.

2+2 ranks. Rank 0 sends rank 2 three messages of 100 bytes (across the zipper) and rank 1
one of 10 bytes (same cluster); then everybody makes one 8-byte Allreduce. `mmpi.monitor`
is read mid-run (online) and at the end; the rank files are written (MMPI_MONITOR).
"""

import json
import sys

import numpy as np

from mmpi import MPI, monitor

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
mode = sys.argv[1]

if mode == "off":
    # Nothing started: no monitor, and the collectives talk to the plain native communicator.
    engine = comm._core.engine
    assert engine.monitor is None and engine.p2p.monitor is None
    comm.Allreduce(np.ones(1), np.empty(1))
    assert comm._core.collective.local is comm._core.coll.comm
    print(f"rank {rank}: off ok", flush=True)
    sys.exit(0)

if not monitor.running():
    monitor.start()
comm.Barrier()
monitor.reset()
monitor.phase("p2p")
if rank == 0:
    for _ in range(3):
        comm.Send(np.zeros(100, np.uint8), 2, 7)
    comm.Send(np.zeros(10, np.uint8), 1, 8)
elif rank == 2:
    for _ in range(3):
        comm.Recv(np.empty(100, np.uint8), 0, 7)
elif rank == 1:
    comm.Recv(np.empty(10, np.uint8), 0, 8)
mid = monitor.read("p2p")  # online, before any collective of this phase
monitor.phase("coll")
comm.Allreduce(np.full(1, float(rank)), np.empty(1))
row = monitor.read("coll")
print(json.dumps({"rank": rank, "p2p_bytes": mid["p2p_bytes"], "p2p_msgs": mid["p2p_msgs"],
                  "coll_bytes": row["coll_bytes"], "coll_p2p": row["p2p_bytes"],
                  "layout": mid["layout"]}), flush=True)
m = monitor.matrix("coll")
if rank == 0:
    forwarded = int((m["coll_bytes"] * m["forwarded"]).sum())
    print(json.dumps({"coll_forwarded": forwarded}), flush=True)
