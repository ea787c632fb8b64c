"""Bad arguments get a clear error naming the culprit, and the job carries on afterwards.

Each case is called on every rank; the error must be an mmpi error (a ValueError/RuntimeError
subclass) whose message contains the given fragment. Prints one line per rank at the end.
"""

import pickle
import re
import threading

import numpy as np

import mmpi
from mmpi import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
right, left = (rank + 1) % size, (rank - 1) % size
ub = comm.Get_attr(MPI.TAG_UB)
seen = []


def expect(kind, exc_type, fragment, fn):
    try:
        fn()
    except exc_type as exc:
        if not re.search(fragment, str(exc)):
            raise AssertionError(
                f"rank {rank}: {kind}: message {str(exc)!r} lacks {fragment!r}") from exc
        seen.append(kind)
        return
    raise AssertionError(f"rank {rank}: {kind}: no error raised")


def _started(req):
    req.Start()
    return req


vec = MPI.DOUBLE.Create_vector(2, 1, 2).Commit()
cases = [
    ("destination out of range", mmpi.RankError,
     rf"destination rank {size} is out of range for a communicator of size {size}",
     lambda: comm.Send(np.zeros(1), size, 0)),
    ("negative destination", mmpi.RankError, r"destination rank -7",
     lambda: comm.send("x", -7, 0)),
    ("source out of range", mmpi.RankError, rf"source rank {size + 3}",
     lambda: comm.Recv(np.zeros(1), size + 3, 0)),
    ("negative tag", mmpi.TagError, r"tag -1 is invalid \(must be 0\.\.\d+",
     lambda: comm.Send(np.zeros(1), right, -1)),
    ("tag above TAG_UB", mmpi.TagError, rf"tag {ub + 1} is invalid",
     lambda: comm.Isend(np.zeros(1), right, ub + 1)),
    ("bad receive tag", mmpi.TagError, r"tag -5", lambda: comm.Irecv(np.zeros(1), left, -5)),
    ("non-contiguous buffer", mmpi.UsageError, r"Send: buffer is not contiguous",
     lambda: comm.Send(np.zeros(10)[::2], right, 0)),
    ("read-only receive buffer", mmpi.UsageError, r"Recv: receive buffer is read-only",
     lambda: comm.Recv(b"abc", left, 0)),
    ("derived datatype beyond the buffer", mmpi.UsageError,
     r"VECTOR span 24 bytes but the buffer holds 16",
     lambda: comm.Send([np.zeros(2), 1, vec], right, 0)),
    ("count beyond buffer", mmpi.UsageError, r"holds 80",
     lambda: comm.Send([np.zeros(10), 11, MPI.DOUBLE], right, 0)),
    ("not a buffer", mmpi.UsageError, r"dict does not expose a buffer",
     lambda: comm.Send({"a": 1}, right, 0)),
    ("root out of range", mmpi.RootError, rf"root {size} is out of range",
     lambda: comm.Bcast(np.zeros(1), root=size)),
    ("op is not an MPI.Op", mmpi.UsageError, r"expected an MPI\.Op",
     lambda: comm.Allreduce(np.zeros(1), np.zeros(1), op="sum")),
    ("alltoall buffer sizes", mmpi.UsageError, r"one equal block per rank",
     lambda: comm.Alltoall(np.zeros(size + 1), np.zeros(size + 1))),
    ("vector counts length", mmpi.UsageError,
     rf"{size + 1} counts given for a communicator of size {size}",
     lambda: comm.Alltoallv([np.zeros(size + 1), [1] * (size + 1)],
                            [np.zeros(size + 1), [1] * (size + 1)])),
    ("in-place reduce off root", mmpi.UsageError, r"only valid on the root",
     lambda: comm.Reduce(MPI.IN_PLACE, np.zeros(1), root=0) if rank != 0 else
     (_ for _ in ()).throw(mmpi.UsageError("only valid on the root (rank 0 skips)"))),
]

def _unready_wait():
    req = comm.Psend_init(np.zeros(4), 3, right, 0)
    req.Start()
    req.Pready_list([0, 2])
    try:
        req.Wait()
    finally:
        req.Pready(1)  # the send goes, and its receive below completes
        comm.Recv(np.zeros(4), left, 0)
        req.Wait()
        req.Free()


cases += [
    ("partition out of range", mmpi.UsageError,
     r"Pready: partition 5 is out of range for a request of 2 partition\(s\)",
     lambda: _started(comm.Psend_init(np.zeros(4), 2, right, 0)).Pready(5)),
    ("partitioned send not started", mmpi.UsageError, r"Pready: the partitioned request is "
     r"not active", lambda: comm.Psend_init(np.zeros(4), 2, right, 0).Pready(0)),
    ("partition count", mmpi.UsageError, r"Precv_init on rank \d+: partition count 0",
     lambda: comm.Precv_init(np.zeros(4), 0, left, 0)),
    ("partitions not ready at Wait", mmpi.UsageError,
     r"Wait on a partitioned send with partition\(s\) 1 not marked ready", _unready_wait),
    ("persistent collective arguments", TypeError, r"Bcast_init: .*argument",
     lambda: comm.Bcast_init(np.zeros(1), 0, None, "extra", "more")),
]
for kind, etype, frag, fn in cases:
    expect(kind, etype, frag, fn)
    comm.Barrier()  # the job is still healthy after each error
vec.Free()

# truncation, both across the zipper and inside a cluster; the message is consumed, not lost
for shift in sorted({1, size // 2} - {0}):  # a neighbour, and a rank across the zipper
    peer, src = (rank + shift) % size, (rank - shift) % size
    s = comm.Isend(np.arange(10, dtype="i4"), peer, 77)
    expect("truncation", mmpi.TruncationError,
           rf"message from rank {src} with tag 77 has 40 bytes but the receive buffer holds "
           "only 20", lambda src=src: comm.Recv(np.empty(5, "i4"), src, 77))
    s.Wait()
    comm.Barrier()
    assert not comm.Iprobe(src, 77), "truncated message left behind"

# unpicklable object: pickle's own error, before anything is sent
expect("unpicklable object", (pickle.PicklingError, TypeError, AttributeError), r".",
       lambda: comm.send(threading.Lock(), right, 0))

comm.Barrier()
n_kinds = len(set(seen))
MPI.Finalize()
expect("call after Finalize", mmpi.StateError, r"after Finalize",
       lambda: comm.Send(np.zeros(1), right, 0))
print(f"rank {rank}: BAD INPUT OK ({n_kinds + 1} kinds)", flush=True)
