"""A process that is not part of the job connects to a forwarder port (it learnt the port
name, not the secret). `python stranger.py PORTFILE MODE [FIRST_DST NDST]`.

Modes:
  wrong-secret  answers the forwarder's challenge with an HMAC of a wrong secret
  silent        connects and sends nothing
  forge         sends, instead of answering, envelopes that look like the real cluster's
                traffic: T_EAGER messages (tag 77, payload FORGED) and T_LARGE envelopes
                addressed to the real ranks FIRST_DST..FIRST_DST+NDST-1, and keeps sending
                them for 3 s (so some arrive after the forwarder has refused it)
  junk          sends 1,000 messages of random bytes with data tags (a few of them
                256 KiB), then more for 3 s
"""

import os
import random
import sys
import time

from mpi4py import MPI

from mmpi.wire import proof as Q
from mmpi.wire import protocol as P

port = open(sys.argv[1]).read()
mode = sys.argv[2]
first, ndst = (int(sys.argv[3]), int(sys.argv[4])) if len(sys.argv) > 4 else (0, 1)
inter = MPI.COMM_WORLD.Connect(port, MPI.INFO_NULL, 0)
print("stranger: connected", flush=True)


def forged(k: int) -> list[tuple[bytearray, int]]:
    """The k-th batch: one eager and one large envelope per real destination."""
    out = []
    for dst in range(first, first + ndst):
        payload = b"FORGED%010d" % k
        src = 0 if first else first + ndst  # a rank of the cluster the stranger pretends to be
        eager = bytearray(P.Envelope(P.K_P2P, src, dst, 77, 0, len(payload)).pack() + payload)
        large = bytearray(P.Envelope(P.K_P2P, src, dst, 77, 0, 4 << 20, chunk=1 << 20,
                                     xfer=5).pack())
        out += [(eager, P.T_EAGER), (large, P.T_LARGE)]
    return out


def junk(rng: random.Random, k: int) -> list[tuple[bytearray, int]]:
    """Random bytes with a data tag; every 250th message is 256 KiB (longer than the
    forwarder looks at: it must still take it)."""
    n = 256 << 10 if k % 250 == 0 else rng.randrange(1, 200)
    return [(bytearray(rng.randbytes(n)), rng.choice([P.T_EAGER, P.T_LARGE, P.T_COLL]))]


reqs = []
if mode == "wrong-secret":
    st = MPI.Status()
    inter.Probe(0, P.T_CHALLENGE, st)
    buf = bytearray(st.Get_count(MPI.BYTE))
    inter.Recv([buf, MPI.BYTE], 0, P.T_CHALLENGE)
    challenge = P.decode_control(buf, ("nonce", "index"))
    proof = Q.prove("0" * 32, Q.ADMIT, challenge["nonce"], "low", challenge["index"])
    hello = P.encode_control(cluster="low", size=1, proof=proof)
    inter.Send([hello, MPI.BYTE], 0, P.T_HELLO)
elif mode in ("forge", "junk"):
    rng = random.Random(7)
    batch = (lambda k: forged(k)) if mode == "forge" else (lambda k: junk(rng, k))
    n = 0 if mode == "forge" else 1000
    for k in range(n):
        reqs += [inter.Isend([b, MPI.BYTE], 0, tag) for b, tag in batch(k)]
    t0 = time.monotonic()
    k = n
    while time.monotonic() - t0 < 3:
        reqs += [inter.Isend([b, MPI.BYTE], 0, tag) for b, tag in batch(k)]
        k += 1
        MPI.Request.Testall(reqs)  # progress: a long message moves only while we poll
        time.sleep(0.01)
    print(f"stranger: sent {len(reqs)} messages", flush=True)
time.sleep(3)
os._exit(0)  # no goodbye: a stranger owes the forwarder nothing
