"""How much of a bridged 8 B ping-pong is the ranks' own Python: the library's against bare.

`mmpi-run --low 1 --high 1 -- python benchmarks/pingpong_lean.py [ROUNDS] [ITERS]` alternates,
in one job and through the same forwarder, two ways of a ping-pong of 8 bytes between vrank 0
and vrank 1:

- `Send/Recv`: the library's calls (argument handling, the matcher, its waits);
- `lean`: the same eager messages (envelope and payload, protocol T_EAGER) sent and probed for
  with bare mpi4py calls on the forwarder link, yielding between empty probes. No matching,
  no liveness checks, no other messages taken: a floor for a Python layer, not a usable
  receive.

Both pay the forwarder's relay in full, so their difference is what the library's ranks add.
It prints the median one-way time of each (half a round trip) over ROUNDS rounds (16) of
ITERS round trips (2000), alternating the order from round to round, and in how many rounds
lean was the faster.
"""

import statistics
import sys

import numpy as np
from _alternate import alternate  # benchmarks/, beside this script
from mpi4py import MPI as native

from mmpi import MPI
from mmpi import protocol as P
from mmpi._backoff import yield_cpu

w = MPI.COMM_WORLD
e = w._engine
rank = w.Get_rank()
peer = 1 - rank
rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 16
iters = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
x = np.ones(1, np.float64)
y = np.empty(1, np.float64)
_BYTE = native.BYTE
link = e.links[P.route(e.vrank, peer, e.nfwd)][0]
st = native.Status()
ctx_id = w._p2p.id
TAG = 7


def library() -> None:
    """One round trip with the library's Send and Recv."""
    if rank == 0:
        w.Send(x, 1, TAG)
        w.Recv(y, 1, TAG)
    else:
        w.Recv(y, 0, TAG)
        w.Send(x, 0, TAG)


def _send() -> None:
    buf = bytearray(P.ENVELOPE_SIZE + 8)
    P.pack_eager_into(buf, e.vrank, peer, TAG, ctx_id, 8)
    buf[P.ENVELOPE_SIZE:] = memoryview(x).cast("B")
    s = link.Isend([buf, _BYTE], 0, P.T_EAGER)
    while not s.Test():
        yield_cpu()


def _recv() -> None:
    while (msg := link.Improbe(0, P.T_EAGER, st)) is None:
        yield_cpu()
    buf = bytearray(st.Get_count(_BYTE))
    msg.Recv([buf, _BYTE])
    env = P.unpack(buf)
    if (env.src, env.tag, env.nbytes) != (peer, TAG, 8):
        raise RuntimeError(f"lean ping-pong: unexpected message {env}")
    memoryview(y).cast("B")[:] = memoryview(buf)[P.ENVELOPE_SIZE:]


def lean() -> None:
    """One round trip with bare calls on the forwarder link."""
    if rank == 0:
        _send()
        _recv()
    else:
        _recv()
        _send()


ways = {"Send/Recv": library, "lean": lean}
# One way: half a round trip.
times = {name: [t / 2 for t in ts]
         for name, ts in alternate(ways, rounds, calls=iters, warm=50, sync=w.Barrier).items()}
if rank == 0:
    wins = sum(a < b for a, b in zip(times["lean"], times["Send/Recv"], strict=True))
    print(f"us one way, median of {rounds} rounds: "
          + ", ".join(f"{n} {statistics.median(t):.1f}" for n, t in times.items())
          + f"; lean faster in {wins} of {rounds} rounds", flush=True)
