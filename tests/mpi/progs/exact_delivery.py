"""Every rank sends one message (tag 77) to every other rank; each checks that it received
exactly those, from the right senders with the right content, and nothing else (a message a
stranger forged at a forwarder port must never arrive). Prints `EXACT <rank>` when clean."""

import time

from mmpi import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
reqs = [comm.Isend([b"REAL%04d->%04d" % (rank, dst), MPI.BYTE], dst, 77)
        for dst in range(size) if dst != rank]
got = {}
st = MPI.Status()
for _ in range(size - 1):
    buf = bytearray(64)
    comm.Recv([buf, MPI.BYTE], MPI.ANY_SOURCE, MPI.ANY_TAG, st)
    body = bytes(buf[: st.Get_count(MPI.BYTE)])
    assert st.Get_tag() == 77 and body == b"REAL%04d->%04d" % (st.Get_source(), rank), \
        f"rank {rank} received {body!r} from {st.Get_source()} tag {st.Get_tag()}"
    assert st.Get_source() not in got, f"rank {rank}: two messages from {st.Get_source()}"
    got[st.Get_source()] = body
MPI.Request.Waitall(reqs)
comm.Barrier()
deadline = time.monotonic() + 1.0  # anything forged and late would show up here
while time.monotonic() < deadline:
    assert not comm.Iprobe(MPI.ANY_SOURCE, MPI.ANY_TAG, st), \
        f"rank {rank}: an extra message from {st.Get_source()} tag {st.Get_tag()}"
    time.sleep(0.05)
comm.Barrier()
print(f"EXACT {rank}", flush=True)
