"""Collectives against numpy references: every op and numeric dtype, every root, several sizes,
in-place variants, buffer and pickle forms. Same file bridged (mmpi-run) and native (mpiexec).

Every rank can compute every other rank's input (seeded by rank), so each rank checks its own
result against a numpy reference; a failed check raises and fails the job.
"""

import sys

import numpy as np

from mmpi import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
QUICK = "--quick" in sys.argv
BIG = 1 << 17 if not QUICK else 1 << 14  # doubles: 1 MiB (or 128 KiB quick)
SPLIT = 70001  # doubles (547 KiB, quick too): where Allreduce and Bcast cross in shares


def section(name):
    if "-v" in sys.argv and rank == 0:
        print(f"-- {name}", file=sys.stderr, flush=True)


def check(cond, what):
    if not cond:
        raise AssertionError(f"rank {rank}: {what}")


def data(r, n, dtype, salt=0):
    rng = np.random.default_rng(1000 * r + 17 * n + salt)
    dt = np.dtype(dtype)
    if dt == np.bool_:
        return rng.integers(0, 2, n).astype(bool)
    if dt.kind in "iu":
        return rng.integers(1, 4, n).astype(dt)  # small: products of 5 ranks stay in range
    if dt.kind == "c":
        return (rng.integers(-3, 4, n) + 1j * rng.integers(-3, 4, n)).astype(dt)
    return rng.integers(-8, 9, n).astype(dt)  # integer-valued floats: sums are exact


def opname(op):
    for name in ("SUM", "PROD", "MAX", "MIN", "LAND", "LOR", "LXOR", "BAND", "BOR", "BXOR",
                 "MAXLOC", "MINLOC"):
        if op == getattr(MPI, name):
            return name
    return repr(op)


def roots():
    return range(size) if size <= 5 else (0, size // 2, size - 1)


# -- Bcast ----------------------------------------------------------------------------------
section("Bcast")
for n in (0, 1, 8, 9, 1000, BIG, SPLIT):  # up to 8 doubles, the data rides in the check
    for root in roots():
        buf = data(root, n, "f8") if rank == root else np.zeros(n)
        comm.Bcast(buf, root=root)
        check(np.array_equal(buf, data(root, n, "f8")), f"Bcast n={n} root={root}")
# a small one of a derived datatype: every other double of 8, the rest left alone
every_other = MPI.DOUBLE.Create_vector(4, 1, 2).Commit()
for root in roots():
    buf = data(root, 8, "f8") if rank == root else np.full(8, -1.0)
    comm.Bcast([buf, 1, every_other], root=root)
    want = data(root, 8, "f8") if rank == root else np.where(np.arange(8) % 2 == 0,
                                                               data(root, 8, "f8"), -1.0)
    check(np.array_equal(buf, want), f"Bcast of a vector type root={root}")
every_other.Free()
for root in roots():
    obj = {"root": root, "v": list(range(root + 2))} if rank == root else None
    got = comm.bcast(obj, root=root)
    check(got == {"root": root, "v": list(range(root + 2))}, f"bcast obj root={root}")

# -- Reduce / Allreduce: every op on the numeric dtypes it applies to ----------------------
section("Reduce / Allreduce: every op on the numeric dtypes it applies to")
INTS = ["i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8"]
FLOATS = ["f4", "f8"]
CPLX = ["c8", "c16"]
REF = [
    (MPI.SUM, (INTS + FLOATS + CPLX, lambda a: np.sum(a, axis=0, dtype=a.dtype))),
    (MPI.PROD, (INTS + FLOATS + CPLX, lambda a: np.prod(a, axis=0, dtype=a.dtype))),
    (MPI.MAX, (INTS + FLOATS, lambda a: np.max(a, axis=0))),
    (MPI.MIN, (INTS + FLOATS, lambda a: np.min(a, axis=0))),
    (MPI.LAND, (INTS + ["?"], lambda a: np.all(a != 0, axis=0).astype(a.dtype))),
    (MPI.LOR, (INTS + ["?"], lambda a: np.any(a != 0, axis=0).astype(a.dtype))),
    (MPI.LXOR, (INTS + ["?"], lambda a: (np.sum(a != 0, axis=0) % 2).astype(a.dtype))),
    (MPI.BAND, (INTS, lambda a: np.bitwise_and.reduce(a, axis=0))),
    (MPI.BOR, (INTS, lambda a: np.bitwise_or.reduce(a, axis=0))),
    (MPI.BXOR, (INTS, lambda a: np.bitwise_xor.reduce(a, axis=0))),
]
for op, (dtypes, ref) in REF:
    for dt in dtypes:
        section(f"{opname(op)} {dt}")
        n = 7
        allin = np.array([data(r, n, dt, 1) for r in range(size)])
        expected = ref(allin)
        out = np.zeros(n, dt)
        comm.Allreduce(data(rank, n, dt, 1), out, op=op)
        check(np.array_equal(out, expected), f"Allreduce {opname(op)} {dt}: {out} != {expected}")
        root = (dtypes.index(dt) + len(dtypes)) % size  # roots vary, same on every rank
        out = np.zeros(n, dt)
        comm.Reduce(data(rank, n, dt, 1), out if rank == root else None, op=op, root=root)
        if rank == root:
            check(np.array_equal(out, expected), f"Reduce {opname(op)} {dt} root {root}")

# MAXLOC / MINLOC on (int, int) pairs, ties resolved to the smallest index
pairs = lambda r: np.array([[r % 3, r], [-(r % 2), r], [7, r]], "i4")  # noqa: E731
allp = np.array([pairs(r) for r in range(size)])
for op, pick in ((MPI.MAXLOC, np.argmax), (MPI.MINLOC, np.argmin)):
    out = np.zeros((3, 2), "i4")
    comm.Allreduce([pairs(rank), MPI.INT_INT], [out, MPI.INT_INT], op=op)
    for k in range(3):
        vals = allp[:, k, 0]
        check(out[k, 0] == vals[pick(vals)] and out[k, 1] == pick(vals),
              f"{opname(op)} element {k}: {out[k]}")
    for root in (0, size - 1):  # Reduce, in place at the root too
        out = pairs(rank).copy() if rank == root else None
        comm.Reduce(MPI.IN_PLACE if rank == root else [pairs(rank), MPI.INT_INT],
                    [out, MPI.INT_INT] if rank == root else None, op=op, root=root)
        if rank == root:
            check(all(out[k, 0] == allp[pick(allp[:, k, 0]), k, 0]
                      and out[k, 1] == pick(allp[:, k, 0]) for k in range(3)),
                  f"Reduce {opname(op)} root {root}: {out.tolist()}")

# sizes, every root, in place; float allreduce must be bit-identical on every rank
for n in (1, 1000, BIG):
    allin = np.array([data(r, n, "f8", 2) for r in range(size)])
    expected = allin.sum(axis=0)
    for root in (roots() if n < BIG else (0, size - 1)):
        if rank == root:
            out = data(rank, n, "f8", 2)
            comm.Reduce(MPI.IN_PLACE, out, op=MPI.SUM, root=root)
            check(np.array_equal(out, expected), f"Reduce in place n={n} root={root}")
        else:
            comm.Reduce(data(rank, n, "f8", 2), None, op=MPI.SUM, root=root)
    out = data(rank, n, "f8", 2)
    comm.Allreduce(MPI.IN_PLACE, out, op=MPI.SUM)
    check(np.array_equal(out, expected), f"Allreduce in place n={n}")
    noisy = np.random.default_rng(rank).random(n)
    res = np.zeros(n)
    comm.Allreduce(noisy, res, op=MPI.SUM)
    digests = comm.allgather(res.tobytes())
    check(all(d == digests[0] for d in digests), f"Allreduce n={n} not bit-identical")
    check(np.allclose(res, sum(np.random.default_rng(r).random(n) for r in range(size))),
          f"Allreduce random n={n}")

# above the size where Allreduce splits into shares crossing in parallel (quick runs too): a
# count that does not divide evenly, in place and not, bit-identical everywhere
allin = np.array([data(r, SPLIT, "f8", 3) for r in range(size)])
out = data(rank, SPLIT, "f8", 3)
comm.Allreduce(MPI.IN_PLACE, out, op=MPI.SUM)
check(np.array_equal(out, allin.sum(axis=0)), "Allreduce in place, split size")
out = np.zeros(SPLIT)
comm.Allreduce(data(rank, SPLIT, "f8", 3), out, op=MPI.MAX)
check(np.array_equal(out, allin.max(axis=0)), "Allreduce MAX, split size")
noisy = np.random.default_rng(rank + 99).random(SPLIT)
comm.Allreduce(noisy, out, op=MPI.SUM)
digests = comm.allgather(out.tobytes())
check(all(d == digests[0] for d in digests), "Allreduce split size not bit-identical")

# user-defined non-commutative ops keep rank order: "left" (a op b = a) yields rank 0's data,
# "right" (a op b = b) the last rank's, on both the leader and the segmented paths
def _left(inbuf, inoutbuf, dt):
    np.frombuffer(inoutbuf, "f8")[:] = np.frombuffer(inbuf, "f8")


def _right(inbuf, inoutbuf, dt):
    pass


LEFT, RIGHT = MPI.Op.Create(_left, commute=False), MPI.Op.Create(_right, commute=False)
for n in (3, BIG, SPLIT):
    for op, want in ((LEFT, 0), (RIGHT, size - 1)):
        res = np.zeros(n)
        comm.Allreduce(data(rank, n, "f8", 2), res, op=op)
        check(np.array_equal(res, data(want, n, "f8", 2)), f"Allreduce non-commutative n={n}")
        res = np.zeros(n) if rank == size - 1 else None
        comm.Reduce(data(rank, n, "f8", 2), res, op=op, root=size - 1)
        if rank == size - 1:
            check(np.array_equal(res, data(want, n, "f8", 2)), f"Reduce non-commutative n={n}")
LEFT.Free()
RIGHT.Free()

check(comm.allreduce(rank, op=MPI.SUM) == size * (size - 1) // 2, "allreduce obj")
check(comm.allreduce([rank], op=MPI.SUM) == list(range(size)), "allreduce list (concat order)")
for root in roots():
    got = comm.reduce(rank + 1, op=MPI.PROD, root=root)
    check(got == (np.prod(np.arange(1, size + 1)) if rank == root else None), "reduce obj")
    got = comm.reduce([rank], op=MPI.SUM, root=root)
    check(got == (list(range(size)) if rank == root else None), f"reduce obj order {got}")

# -- Alltoall / Alltoallv --------------------------------------------------------------------
section("Alltoall / Alltoallv")
blockval = lambda i, j, k: np.arange(k, dtype="f8") + 1000 * i + j  # noqa: E731
for k in (1, 100, 4095, 4096, 8192):  # 32 KiB blocks and up go straight to their ranks
    send = np.concatenate([blockval(rank, j, k) for j in range(size)])
    recv = np.zeros(size * k)
    comm.Alltoall(send, recv)
    exp = np.concatenate([blockval(j, rank, k) for j in range(size)])
    check(np.array_equal(recv, exp), f"Alltoall k={k}")
    inplace = send.copy()
    comm.Alltoall(MPI.IN_PLACE, inplace)
    check(np.array_equal(inplace, exp), f"Alltoall in place k={k}")
cnt = lambda i, j: (i + 2 * j) % 4 * 3  # noqa: E731  (zero counts included)
scounts = [cnt(rank, j) for j in range(size)]
rcounts = [cnt(j, rank) for j in range(size)]
sdispl = list(np.cumsum([0] + [c + 1 for c in scounts])[:-1])  # gaps between blocks
rdispl = list(np.cumsum([0] + [c + 2 for c in rcounts])[:-1])
send = np.full(sdispl[-1] + scounts[-1] + 1, -1, "i8")
for j in range(size):
    send[sdispl[j]:sdispl[j] + scounts[j]] = 100 * rank + j
recv = np.full(rdispl[-1] + rcounts[-1] + 2, -7, "i8")
comm.Alltoallv([send, (scounts, sdispl), MPI.INT64_T], [recv, (rcounts, rdispl), MPI.INT64_T])
for j in range(size):
    blk = recv[rdispl[j]:rdispl[j] + rcounts[j]]
    check((blk == 100 * j + rank).all(), f"Alltoallv block from {j}: {blk}")
    gap = recv[rdispl[j] + rcounts[j]:rdispl[j] + rcounts[j] + 2]
    check((gap == -7).all(), f"Alltoallv wrote outside block {j}")
got = comm.alltoall([(rank, j) for j in range(size)])
check(got == [(j, rank) for j in range(size)], f"alltoall obj {got}")

# -- Gather(v) / Scatter(v) / Allgather(v) -------------------------------------------------------
section("Gather(v) / Scatter(v) / Allgather(v)")
for root in roots():
    mine = np.full(3, rank, "i4")
    out = np.zeros((size, 3), "i4") if rank == root else None
    comm.Gather(mine, out, root=root)
    if rank == root:
        check((out == np.arange(size)[:, None]).all(), f"Gather root={root}")
        out2 = np.zeros((size, 3), "i4")
        out2[root] = root
        comm.Gather(MPI.IN_PLACE, out2, root=root)
        check((out2 == np.arange(size)[:, None]).all(), f"Gather in place root={root}")
    else:
        comm.Gather(mine, None, root=root)
    sendall = np.arange(size * 4, dtype="f8").reshape(size, 4) * (root + 1)
    part = np.zeros(4)
    comm.Scatter(sendall if rank == root else None, part, root=root)
    check(np.array_equal(part, sendall[rank]), f"Scatter root={root}")
    counts = [r % 3 + 1 for r in range(size)]
    displs = list(np.cumsum([0] + counts)[:-1])
    mine = np.full(counts[rank], rank + 0.5)
    if rank == root:
        out = np.zeros(sum(counts))
        comm.Gatherv(mine, [out, (counts, displs), MPI.DOUBLE], root=root)
        check(np.array_equal(out, np.repeat(np.arange(size) + 0.5, counts)), f"Gatherv {root}")
        src = np.repeat(np.arange(size) * 2.0, counts)
        part = np.zeros(counts[rank])
        comm.Scatterv([src, (counts, displs), MPI.DOUBLE], part, root=root)
    else:
        comm.Gatherv(mine, None, root=root)
        part = np.zeros(counts[rank])
        comm.Scatterv(None, part, root=root)
    check((part == rank * 2.0).all(), f"Scatterv root={root}")
    g = comm.gather({"r": rank}, root=root)
    check(g == ([{"r": r} for r in range(size)] if rank == root else None), f"gather obj {root}")
    s = comm.scatter([r * r for r in range(size)] if rank == root else None, root=root)
    check(s == rank * rank, f"scatter obj root={root}")
out = np.zeros((size, 2), "i8")
comm.Allgather(np.array([rank, -rank], "i8"), out)
check((out[:, 0] == np.arange(size)).all() and (out[:, 1] == -np.arange(size)).all(), "Allgather")
out = np.zeros((size, 2), "i8")
out[rank] = [rank, -rank]
comm.Allgather(MPI.IN_PLACE, out)
check((out[:, 0] == np.arange(size)).all(), "Allgather in place")
counts = [(r * 5) % 4 for r in range(size)]
displs = list(np.cumsum([0] + counts)[:-1])
out = np.zeros(sum(counts), "f4")
comm.Allgatherv(np.full(counts[rank], rank, "f4"), [out, (counts, displs), MPI.FLOAT])
check(np.array_equal(out, np.repeat(np.arange(size), counts).astype("f4")), "Allgatherv")
check(comm.allgather(rank * 3) == [r * 3 for r in range(size)], "allgather obj")
big = np.zeros((size, BIG // size))
comm.Allgather(np.full(BIG // size, float(rank)), big)
check((big == np.arange(size)[:, None]).all(), "Allgather big")

# -- pickles longer than a slot (1 KiB inside a cluster), some ranks only ---------------------
section("Object collectives with long pickles")


def long(r, n):
    """An object whose pickle is about 2 * n bytes on even ranks, a few bytes on odd ones."""
    return {"r": r, "v": list(range(n if r % 2 == 0 else 3))}


for n in (120, 127, 128, 5000, 200000):
    for root in roots():
        got = comm.bcast(long(root, n) if rank == root else None, root=root)
        check(got == long(root, n), f"bcast long n={n} root={root}")
        got = comm.gather(long(rank, n), root=root)
        check(got == ([long(r, n) for r in range(size)] if rank == root else None),
              f"gather long n={n} root={root}")
        got = comm.scatter([long(r, n) for r in range(size)] if rank == root else None, root)
        check(got == long(rank, n), f"scatter long n={n} root={root}")
        got = comm.reduce([long(rank, n)], op=MPI.SUM, root=root)
        check(got == ([long(r, n) for r in range(size)] if rank == root else None),
              f"reduce long n={n} root={root}")
    check(comm.allgather(long(rank, n)) == [long(r, n) for r in range(size)],
          f"allgather long n={n}")
    check(comm.allreduce([long(rank, n)], op=MPI.SUM) == [long(r, n) for r in range(size)],
          f"allreduce long n={n}")
    check(comm.alltoall([long(rank * size + j, n) for j in range(size)])
          == [long(j * size + rank, n) for j in range(size)], f"alltoall long n={n}")
mine = [rank]
check(comm.allgather(mine)[rank] is not mine, "allgather returns copies")
check(comm.bcast(mine, root=0) is not mine, "bcast returns a copy, also at the root")

# -- Reduce_scatter_block, Scan, Exscan -----------------------------------------------------------
section("Reduce_scatter_block, Scan, Exscan")
k = 5
send = np.array([data(rank, size * k, "i8", 3)]).ravel()
out = np.zeros(k, "i8")
comm.Reduce_scatter_block(send, out, op=MPI.SUM)
total = sum(data(r, size * k, "i8", 3) for r in range(size))
check(np.array_equal(out, total[rank * k:(rank + 1) * k]), "Reduce_scatter_block")
inp = np.array(data(rank, size * k, "i8", 3))
comm.Reduce_scatter_block(MPI.IN_PLACE, inp, op=MPI.SUM)
check(np.array_equal(inp[:k], total[rank * k:(rank + 1) * k]), "Reduce_scatter_block in place")
for op, ref in ((MPI.SUM, np.cumsum), (MPI.PROD, np.cumprod), (MPI.MAX, np.maximum.accumulate)):
    allin = np.array([data(r, 4, "i8", 4) for r in range(size)])
    pref = ref(allin, axis=0)
    out = np.zeros(4, "i8")
    comm.Scan(data(rank, 4, "i8", 4), out, op=op)
    check(np.array_equal(out, pref[rank]), f"Scan {opname(op)}: {out} vs {pref[rank]}")
    out = np.zeros(4, "i8")
    comm.Exscan(data(rank, 4, "i8", 4), out, op=op)
    if rank > 0:
        check(np.array_equal(out, pref[rank - 1]), f"Exscan {opname(op)}")
    inp = data(rank, 4, "i8", 4)
    comm.Scan(MPI.IN_PLACE, inp, op=op)
    check(np.array_equal(inp, pref[rank]), f"Scan in place {opname(op)}")

# -- errors that every rank detects identically (no job abort) -------------------------------------
section("errors that every rank detects identically (no job abort)")
try:
    comm.Bcast(np.zeros(1), root=size)
except (MPI.Exception, ValueError) as exc:
    check(str(size) in str(exc) or "root" in str(exc).lower() or "rank" in str(exc).lower(),
          f"root error message: {exc}")
else:
    check(False, "Bcast with an out-of-range root was accepted")

comm.Barrier()
print(f"rank {rank}: COLL OK", flush=True)
