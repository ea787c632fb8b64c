"""Point-to-point semantics across the bridge; every rank checks what it sees and raises.

Runs unchanged under mmpi-run (bridged) and plain mpiexec (native). A failed check raises,
which aborts the job, so the test harness only needs the exit status and the final line.
"""

import sys
import time
import types
import zlib

import numpy as np

from mmpi import MPI

comm = MPI.COMM_WORLD
# the bridged namespace holds no module objects, as mpi4py's (a walk over it must end)
assert not [k for k, v in vars(MPI).items() if isinstance(v, types.ModuleType)], dir(MPI)
# as mpi4py's: a communicator class called with nothing makes a null communicator
assert type(comm)() == MPI.COMM_NULL and type(comm)() is not MPI.COMM_NULL
rank, size = comm.Get_rank(), comm.Get_size()
BIG = int(sys.argv[1]) if len(sys.argv) > 1 else 17 * 2**20 + 3


def payload(src, dst, n, salt=0):
    rng = np.random.default_rng(src * 7919 + dst * 104729 + n + salt)
    return rng.integers(0, 256, n, dtype=np.uint8)


def check(cond, what):
    if not cond:
        raise AssertionError(f"rank {rank}: {what}")


# 1. all pairs, both directions, several sizes across the eager/large boundary
for n in (0, 1, 100, 40_000, 3 * 2**20 + 5):
    reqs, bufs = [], {}
    for peer in range(size):
        if peer == rank:
            continue
        bufs[peer] = np.empty(n, np.uint8)
        reqs.append(comm.Irecv(bufs[peer], source=peer, tag=n % 1000))
    for peer in range(size):
        if peer != rank:
            reqs.append(comm.Isend(payload(rank, peer, n), dest=peer, tag=n % 1000))
    MPI.Request.Waitall(reqs)
    for peer, b in bufs.items():
        check(zlib.crc32(b) == zlib.crc32(payload(peer, rank, n)), f"all-pairs {n} B from {peer}")

# 2. ANY_SOURCE / ANY_TAG with status
if rank == 0:
    seen = set()
    for _ in range(size - 1):
        st = MPI.Status()
        b = np.empty(4, "i4")
        comm.Recv(b, MPI.ANY_SOURCE, MPI.ANY_TAG, st)
        src = st.Get_source()
        check(st.Get_tag() == 100 + src, f"tag {st.Get_tag()} from {src}")
        check(st.Get_count(MPI.INT) == 4 and st.Get_count() == 16, "count")
        check(list(b) == [src] * 4, f"content from {src}")
        seen.add(src)
    check(seen == set(range(1, size)), f"sources {seen}")
else:
    comm.Send(np.full(4, rank, "i4"), 0, 100 + rank)

# 3. non-overtaking: mixed small/large messages from one sender, received with ANY_TAG
N = 24
for sender, receiver in ((0, size - 1), (size - 1, 0), (0, 1)):
    if sender == receiver:
        continue
    if rank == sender:
        reqs = []
        for i in range(N):
            n = 50_000 if i % 3 == 0 else 8
            a = np.full(n // 8, i, "i8")
            reqs.append(comm.Isend(a, receiver, tag=i % 5))
        MPI.Request.Waitall(reqs)
    elif rank == receiver:
        for i in range(N):
            buf = np.empty(50_000 // 8, "i8")
            st = MPI.Status()
            comm.Recv(buf, sender, MPI.ANY_TAG, st)
            check(buf[0] == i and st.Get_tag() == i % 5, f"order: got {buf[0]} expected {i}")

# 4. probe then receive (size learned from the status)
if rank == size - 1:
    comm.Send(np.arange(1234, dtype="f8"), 0, 55)
if rank == 0:
    st = MPI.Status()
    comm.Probe(MPI.ANY_SOURCE, 55, st)
    n = st.Get_count(MPI.DOUBLE)
    check(n == 1234 and st.Get_source() == size - 1, f"probe {n} from {st.Get_source()}")
    check(comm.Iprobe(size - 1, 55), "iprobe after probe")
    b = np.empty(n)
    comm.Recv(b, st.Get_source(), 55)
    check(np.array_equal(b, np.arange(1234.0)), "probed message content")
    check(not comm.Iprobe(size - 1, 55), "iprobe after receive")

# 5. zero bytes and a big message across the zipper (and back)
a, b = 0, size - 1
if rank == a:
    comm.Send(np.empty(0, np.uint8), b, 1)
    big = payload(a, b, BIG, 1)
    comm.Send(big, b, 2)
    back = np.empty(BIG, np.uint8)
    comm.Recv(back, b, 3)
    check(zlib.crc32(back) == zlib.crc32(payload(b, a, BIG, 1)), "big message back")
elif rank == b:
    st = MPI.Status()
    comm.Recv(np.empty(0, np.uint8), a, 1, st)
    check(st.Get_count() == 0 and st.Get_source() == a, "zero-byte status")
    got = np.empty(BIG, np.uint8)
    comm.Recv(got, a, 2)
    check(zlib.crc32(got) == zlib.crc32(payload(a, b, BIG, 1)), "big message")
    comm.Send(payload(b, a, BIG, 1), a, 3)

# 6. pickled objects, small and large, all forms
obj = {"from": rank, "list": list(range(rank + 3)), "arr": np.arange(5) * rank}
right, left = (rank + 1) % size, (rank - 1) % size
got = comm.sendrecv(obj, dest=right, sendtag=9, source=left, recvtag=9)
check(got["from"] == left and got["list"] == list(range(left + 3)), "sendrecv object")
r = comm.irecv(bytearray(1 << 20), source=left, tag=10)  # mpi4py needs a buffer for big objects
comm.isend(("big", np.full(20_000, rank)), right, 10).wait()
kind, arr = r.wait()
check(kind == "big" and arr.shape == (20_000,) and (arr == left).all(), "large pickled")
comm.send([rank] * 3, dest=right, tag=11)
st = MPI.Status()
check(comm.recv(source=MPI.ANY_SOURCE, tag=11, status=st) == [left] * 3, "send/recv")
check(st.Get_source() == left, "recv status source")

# 7. a late receive: the message waits unexpected (eager and large) until it is posted
if rank == 0:
    comm.Send(payload(0, size - 1, 10, 5), size - 1, 20)
    comm.Send(payload(0, size - 1, 2_500_000, 5), size - 1, 21)
elif rank == size - 1:
    time.sleep(0.2)
    big = np.empty(2_500_000, np.uint8)
    comm.Recv(big, 0, 21)  # posted first, yet must match the later-sent message by tag
    small = np.empty(10, np.uint8)
    comm.Recv(small, 0, 20)
    check(np.array_equal(small, payload(0, size - 1, 10, 5)), "late small")
    check(np.array_equal(big, payload(0, size - 1, 2_500_000, 5)), "late large")

# 7b. unexpected large messages land in spare buffers that the engine reuses once copied out;
# a pickled object received from one keeps it (it must never be handed out again)
sizes = (300_000, 400_000, 300_000, 500_000)
if rank == 0:
    for k, n in enumerate(sizes):
        comm.Send(payload(0, size - 1, n, 40 + k), size - 1, 40 + k)
elif rank == size - 1:
    time.sleep(0.2)
    for k, n in enumerate(sizes):
        got = np.empty(n, np.uint8)
        comm.Recv(got, 0, 40 + k)
        check(np.array_equal(got, payload(0, size - 1, n, 40 + k)), f"unexpected large {k}")
comm.Barrier()
obj = {"a": np.arange(40_000, dtype="f8"), "tag": 46}
if rank == 0:
    comm.send(obj, size - 1, 46)
    for k in (47, 48):
        comm.Send(payload(0, size - 1, 300_000, k), size - 1, k)
elif rank == size - 1:
    time.sleep(0.2)
    got_obj = comm.recv(source=0, tag=46)
    for k in (47, 48):
        got = np.empty(300_000, np.uint8)
        comm.Recv(got, 0, k)
        check(np.array_equal(got, payload(0, size - 1, 300_000, k)), f"reused spare {k}")
    check(got_obj["tag"] == 46 and np.array_equal(got_obj["a"], obj["a"]),
          "pickled object from a spare buffer stays intact")

# 7c. a loop of blocking receives takes large messages straight into its buffers, their
# chunks waiting at the forwarder for it (MMPI_LATE_US); an object receive and a matched
# probe of such a message too
if rank == 0:
    for k in range(6):
        comm.Send(payload(0, size - 1, 200_000 + k, 60 + k), size - 1, 60)
    comm.send(np.arange(50_000), size - 1, 61)
    comm.Send(payload(0, size - 1, 150_000, 62), size - 1, 62)
elif rank == size - 1:
    for k in range(6):
        got = np.empty(200_000 + k, np.uint8)
        comm.Recv(got, 0, 60)
        check(np.array_equal(got, payload(0, size - 1, 200_000 + k, 60 + k)), f"loop {k}")
    check(np.array_equal(comm.recv(source=0, tag=61), np.arange(50_000)), "late object")
    msg = comm.Mprobe(0, 62)
    got = np.empty(150_000, np.uint8)
    msg.Recv(got)
    check(np.array_equal(got, payload(0, size - 1, 150_000, 62)), "late matched probe")

# 8. send to self, PROC_NULL, Waitany/Testall
r = comm.Irecv(buf := np.empty(3, "i4"), rank, 30)
comm.Send(np.array([1, 2, 3], "i4"), rank, 30)
r.Wait()
check(list(buf) == [1, 2, 3], "self send")
comm.Send(np.zeros(3), MPI.PROC_NULL, 1)
st = MPI.Status()
comm.Recv(np.zeros(3), MPI.PROC_NULL, 1, st)
check(st.Get_source() == MPI.PROC_NULL, "PROC_NULL status")
reqs = [comm.Irecv(np.empty(1, "i4"), left, 40), comm.Isend(np.array([rank], "i4"), right, 40)]
idx = MPI.Request.Waitany(reqs)
check(idx in (0, 1), "waitany index")
while not MPI.Request.Testall(reqs):
    pass

# 8b. the rest of the Request API, in both clusters' directions
reqs = [comm.Irecv(np.empty(2, "i8"), left, 41 + k) for k in range(3)]
sends = [comm.Isend(np.array([rank, k], "i8"), right, 41 + k) for k in range(3)]
done = set()
while len(done) < 3:
    idx = MPI.Request.Waitsome(reqs)
    check(idx is not None and all(i not in done for i in idx), f"waitsome {idx}")
    done.update(idx)
check(MPI.Request.Waitsome(reqs) is None, "waitsome on finished requests")
MPI.Request.Waitall(sends)
r = comm.Irecv(np.empty(1, "i8"), left, 44)
st = MPI.Status()
comm.Send(np.array([rank], "i8"), right, 44)
while not r.Get_status(st):
    pass
check(st.Get_source() == left and st.Get_tag() == 44, "Get_status fills the status")
r.Wait()
idx, flag = MPI.Request.Testany([comm.Isend(np.zeros(1), right, 45)])
while not flag:
    idx, flag = MPI.Request.Testany([])
comm.Recv(np.zeros(1), left, 45)
objs = [comm.irecv(bytearray(1 << 16), left, 46 + k) for k in range(2)]
[comm.isend({"k": k, "from": rank}, right, 46 + k).wait() for k in range(2)]
got = MPI.Request.waitall(objs)
check(got == [{"k": 0, "from": left}, {"k": 1, "from": left}], f"waitall objects {got}")
r = comm.irecv(bytearray(1 << 16), left, 48)
comm.send("hello", right, 48)
flag, obj = r.test()
while not flag:
    flag, obj = r.test()
check(obj == "hello", "lowercase test")
rs = [comm.irecv(bytearray(1 << 16), left, 49), comm.irecv(bytearray(1 << 16), left, 50)]
comm.send("second", right, 50)
comm.send("first", right, 49)
idx, obj = MPI.Request.waitany(rs)
check((idx, obj) in ((0, "first"), (1, "second")), f"lowercase waitany {idx} {obj}")
check(rs[1 - idx].wait() == ("second" if idx == 0 else "first"), "the other after waitany")

# 9. errors: truncation, bad rank, bad tag
ERRORS = tuple(e for e in (getattr(sys.modules["mmpi"], "MMPIError", None), MPI.Exception,
                           ValueError) if e)
if rank == 0:
    comm.Send(np.arange(10, dtype="i4"), size - 1, 50)
elif rank == size - 1:
    try:
        comm.Recv(np.empty(5, "i4"), 0, 50)
    except ERRORS as exc:
        check("truncat" in str(exc).lower() or "TRUNCATE" in str(exc), f"message: {exc}")
    else:
        check(False, "truncation was not reported")
for bad in (size, -5):
    try:
        comm.Send(np.zeros(1), bad, 0)
    except ERRORS as exc:
        check(str(bad) in str(exc) or "rank" in str(exc).lower(), f"bad rank message {exc}")
    else:
        check(False, f"send to rank {bad} accepted")
try:
    comm.Send(np.zeros(1), right, -3)
except ERRORS:
    pass
else:
    check(False, "negative tag accepted")

comm.Barrier()
print(f"rank {rank}: P2P OK", flush=True)
