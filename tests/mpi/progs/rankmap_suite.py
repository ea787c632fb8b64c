"""A program run under a rank map: its ranks are where the map says, and everything still adds up.

argv[1]: the expected cluster of each virtual rank, one letter each (``lhlh``: 0 and 2 in low).
Every rank checks its cluster, then point-to-point between every pair (small and large
messages, wildcard receives) and the collectives against values it computes itself: the
results depend on rank order wherever MPI says they must (Gather, Alltoall, Scan and Reduce
with a non-commutative op, object reductions that concatenate). A failed check raises, which
fails the job. Also run natively (mpiexec, no map): the same answers.
"""

import sys

import numpy as np

from mmpi import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
expect = sys.argv[1] if len(sys.argv) > 1 else None
P = 1000003  # matrices mod P: products of 5 stay exact in int64


def check(cond, what):
    if not cond:
        raise AssertionError(f"rank {rank}: {what}")


# -- where this rank runs ------------------------------------------------------------------
cluster = getattr(comm, "cluster", None)
if expect is not None:
    check(len(expect) == size, f"the map has {len(expect)} ranks, the world {size}")
    want = {"l": "low", "h": "high"}[expect[rank]]
    check(cluster == want, f"runs in {cluster}, the map says {want}")
print(f"rank {rank} of {size} runs in {cluster}", flush=True)


# -- point-to-point: every ordered pair, eager and chunked sizes, then wildcards -----------
def payload(src, dst, n):
    return (np.arange(n, dtype="i8") * (src + 1) + 7 * dst) % 251


for n in (5, 9000):  # 40 B and 72 KB: eager and large through the forwarder
    reqs = [comm.Isend(payload(rank, d, n), dest=d, tag=100 + d) for d in range(size) if d != rank]
    for s in range(size):
        if s != rank:
            got = np.empty(n, "i8")
            comm.Recv(got, source=s, tag=100 + rank)
            check(np.array_equal(got, payload(s, rank, n)), f"message {s}->{rank} of {n}")
    MPI.Request.Waitall(reqs)
comm.Barrier()
seen = set()
st = MPI.Status()
for d in range(size):
    if d != rank:
        comm.send((rank, d), dest=d, tag=7)
for _ in range(size - 1):
    src, dst = comm.recv(source=MPI.ANY_SOURCE, tag=7, status=st)
    check(dst == rank and src == st.Get_source(), f"wildcard got {src}->{dst} from "
          f"{st.Get_source()}")
    seen.add(src)
check(seen == set(range(size)) - {rank}, f"wildcard receives from {sorted(seen)}")
right, left = (rank + 1) % size, (rank - 1) % size
got = comm.sendrecv(rank, dest=right, source=left)
check(got == left, f"sendrecv ring got {got}")


# -- collectives --------------------------------------------------------------------------
def vec(r, n=6, salt=0):
    return np.random.default_rng(100 * r + salt).integers(-9, 10, n).astype("i8")


out = np.zeros(6, "i8")
comm.Allreduce(vec(rank), out, op=MPI.SUM)
check(np.array_equal(out, sum(vec(r) for r in range(size))), "Allreduce SUM")
big = np.zeros(70001)
comm.Allreduce(np.full(70001, rank + 1.0), big, op=MPI.SUM)
check(np.all(big == size * (size + 1) / 2), "Allreduce SUM of 547 KiB")

for root in range(size):
    buf = vec(root, 9000, 1) if rank == root else np.zeros(9000, "i8")
    comm.Bcast(buf, root=root)
    check(np.array_equal(buf, vec(root, 9000, 1)), f"Bcast root={root}")
    recv = np.zeros((size, 6), "i8") if rank == root else None
    comm.Gather(vec(rank), recv, root=root)
    if rank == root:
        check(np.array_equal(recv, [vec(r) for r in range(size)]), f"Gather root={root}")
    part = np.zeros(6, "i8")
    comm.Scatter(np.array([vec(r, salt=root) for r in range(size)]) if rank == root else None,
                 part, root=root)
    check(np.array_equal(part, vec(rank, salt=root)), f"Scatter root={root}")

allg = np.zeros((size, 6), "i8")
comm.Allgather(vec(rank), allg)
check(np.array_equal(allg, [vec(r) for r in range(size)]), "Allgather")
send = np.array([[1000 * rank + d] * 3 for d in range(size)], "i8")
recv = np.zeros((size, 3), "i8")
comm.Alltoall(send, recv)
check(np.array_equal(recv, [[1000 * s + rank] * 3 for s in range(size)]), "Alltoall")


# A 2x2 integer matrix per element, multiplied mod P: associative, not commutative. MPI's
# user op computes inout = in op inout, `in` coming from the lower ranks: the result of a
# Scan at rank r is M0 M1 ... Mr, in exactly that order.
def mat(r, k):
    rng = np.random.default_rng(7 * r + k)
    return rng.integers(0, 50, (2, 2)).astype("i8")


def matmul_op(inbuf, inoutbuf, dt):
    a = np.frombuffer(inbuf, "i8").reshape(-1, 2, 2)
    b = np.frombuffer(inoutbuf, "i8").reshape(-1, 2, 2)
    b[:] = np.einsum("kij,kjl->kil", a, b) % P


MATMUL = MPI.Op.Create(matmul_op, commute=False)
K = 3
mine = np.array([mat(rank, k) for k in range(K)]).ravel()


def product(ranks):
    res = np.array([np.eye(2, dtype="i8")] * K)
    for r in ranks:
        res = np.einsum("kij,kjl->kil", res, [mat(r, k) for k in range(K)]) % P
    return res.ravel()


scan = np.zeros(4 * K, "i8")
comm.Scan(mine, scan, op=MATMUL)
check(np.array_equal(scan, product(range(rank + 1))), "Scan with a non-commutative op")
ex = np.zeros(4 * K, "i8")
comm.Exscan(mine, ex, op=MATMUL)
if rank > 0:
    check(np.array_equal(ex, product(range(rank))), "Exscan with a non-commutative op")
whole = np.zeros(4 * K, "i8")
comm.Allreduce(mine, whole, op=MATMUL)
check(np.array_equal(whole, product(range(size))), "Allreduce with a non-commutative op")
for root in range(size):
    res = np.zeros(4 * K, "i8") if rank == root else None
    comm.Reduce(mine, res, op=MATMUL, root=root)
    if rank == root:
        check(np.array_equal(res, product(range(size))), f"Reduce non-commutative root={root}")
MATMUL.Free()

# -- object collectives -------------------------------------------------------------------
check(comm.allgather(("r", rank)) == [("r", r) for r in range(size)], "allgather obj")
check(comm.alltoall([(rank, d) for d in range(size)]) == [(s, rank) for s in range(size)],
      "alltoall obj")
for root in range(size):
    check(comm.bcast({"root": root} if rank == root else None, root=root) == {"root": root},
          f"bcast obj root={root}")
    got = comm.gather(rank * rank, root=root)
    check(got == ([r * r for r in range(size)] if rank == root else None), f"gather obj {got}")
    got = comm.scatter([f"to {r}" for r in range(size)] if rank == root else None, root=root)
    check(got == f"to {rank}", f"scatter obj {got}")
    got = comm.reduce([rank], op=MPI.SUM, root=root)
    check(got == (list(range(size)) if rank == root else None), f"reduce obj order {got}")
check(comm.allreduce(str(rank), op=MPI.SUM) == "".join(map(str, range(size))), "allreduce str")
check(comm.scan([rank], op=MPI.SUM) == list(range(rank + 1)), "scan obj order")
got = comm.exscan([rank], op=MPI.SUM)
check(rank == 0 or got == list(range(rank)), f"exscan obj order {got}")

# -- communicators made from the world: by parity (across both clusters), reversed ---------
sub = comm.Split(rank % 2, key=rank)
check(sub.Get_rank() == rank // 2, "Split rank")
members = sub.allgather(rank)
check(members == list(range(rank % 2, size, 2)), f"Split members {members}")
check(sub.scan([rank], op=MPI.SUM) == [r for r in members if r <= rank], "scan on a Split")
sub.Free()
rev = comm.Split(0, key=size - rank)
check(rev.allgather(rank) == list(range(size))[::-1], "reversed Split")
x = np.zeros(4 * K, "i8")
MATMUL = MPI.Op.Create(matmul_op, commute=False)
rev.Allreduce(mine, x, op=MATMUL)
check(np.array_equal(x, product(range(size - 1, -1, -1))), "reversed non-commutative Allreduce")
MATMUL.Free()
rev.Free()

comm.Barrier()
print(f"rank {rank}: RANKMAP OK", flush=True)
