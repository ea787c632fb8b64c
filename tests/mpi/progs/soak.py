"""Soak: every rank sends random-size messages (0 B - 8 MiB, mostly small) with random tags to
random peers in both clusters; every message must arrive intact, in order, exactly once.

`python soak.py SECONDS [SEED]`. Each round, what rank s sends to rank d is a pure function of
(seed, round, s), so every receiver knows what it must get and checks content, per-source
order, and that nothing extra arrives.
"""

import sys
import time

import numpy as np

from mmpi import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
seconds = float(sys.argv[1])
seed = int(sys.argv[2]) if len(sys.argv) > 2 else 12345


def plan(rnd, src):
    """The messages `src` sends in round `rnd`: list of (dst, tag, nbytes)."""
    rng = np.random.default_rng([seed, rnd, src])
    out = []
    for _ in range(int(rng.integers(1, 9))):
        dst = int(rng.integers(0, size))
        if dst == src:
            continue
        kind = rng.random()
        n = (int(rng.integers(0, 1024)) if kind < 0.7 else
             int(rng.integers(1024, 256 << 10)) if kind < 0.95 else
             int(rng.integers(256 << 10, 8 << 20)))
        out.append((dst, int(rng.integers(0, 100)), n))
    return out


def payload(rnd, src, k, n):
    return np.random.default_rng([seed, rnd, src, k, 7]).integers(0, 256, n, dtype=np.uint8)


msgs = nbytes = 0
rnd = 0
t0 = time.monotonic()
go = True
while go:
    sends = []
    for k, (dst, tag, n) in enumerate(plan(rnd, rank)):
        data = payload(rnd, rank, k, n)
        if n >= 8:
            data[:8] = np.frombuffer(np.int64(k).tobytes(), np.uint8)  # the sender's order
        sends.append((comm.Isend(data, dst, tag), data))
    expected = {}
    for src in range(size):
        if src != rank:
            expected[src] = [(k, tag, n) for k, (dst, tag, n) in enumerate(plan(rnd, src))
                             if dst == rank]
    todo = sum(len(v) for v in expected.values())
    st = MPI.Status()
    for _ in range(todo):
        comm.Probe(MPI.ANY_SOURCE, MPI.ANY_TAG, st)
        src, tag, n = st.Get_source(), st.Get_tag(), st.Get_count()
        if not expected.get(src):
            raise AssertionError(f"rank {rank} round {rnd}: unexpected message from {src}")
        k, etag, en = expected[src].pop(0)  # MPI order: the next one src sent me
        if (tag, n) != (etag, en):
            raise AssertionError(f"rank {rank} round {rnd}: from {src} got tag {tag} size {n}, "
                                 f"expected message {k} with tag {etag} size {en}")
        buf = np.empty(n, np.uint8)
        comm.Recv(buf, src, tag)
        want = payload(rnd, src, k, n)
        if n >= 8:
            want[:8] = np.frombuffer(np.int64(k).tobytes(), np.uint8)
        if not np.array_equal(buf, want):
            raise AssertionError(f"rank {rank} round {rnd}: message {k} from {src} corrupted")
        msgs += 1
        nbytes += n
    MPI.Request.Waitall([r for r, _ in sends])
    comm.Barrier()
    if comm.Iprobe(MPI.ANY_SOURCE, MPI.ANY_TAG):
        raise AssertionError(f"rank {rank} round {rnd}: a message arrived twice or unplanned")
    comm.Barrier()  # nobody starts the next round before everyone has checked this one
    rnd += 1
    go = comm.bcast(time.monotonic() - t0 < seconds, root=0)
total = comm.allreduce(np.array([msgs, nbytes]), op=MPI.SUM)
if rank == 0:
    print(f"SOAK OK: {rnd} rounds, {total[0]} messages, {total[1] / 2**20:.1f} MiB, "
          f"all intact, in order, exactly once", flush=True)
