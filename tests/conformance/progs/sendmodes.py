"""Every send mode and request kind: Ssend semantics, Bsend with an attached buffer, Rsend,
persistent requests reused, matched probes, Sendrecv_replace, Isendrecv, Cancel, Waitsome,
Testany, native and bridged requests in one Waitall. Prints `rank R: <check> <value>`.
"""

import sys
import time

import numpy as np

if sys.argv[1:2] == ["--mmpi"]:
    from mmpi import MPI
else:
    from mpi4py import MPI

world = MPI.COMM_WORLD
rank, size = world.Get_rank(), world.Get_size()
out = []
half = size // 2  # rank r and r + half are partners; with an odd size the last sits out
peer = rank + half if rank < half else rank - half if rank < 2 * half else MPI.PROC_NULL
first = peer != MPI.PROC_NULL and rank < peer


def say(check, value):
    out.append(f"rank {rank}: {check} {value}")


# A synchronous send completes only once its receive is posted: the receiver posts late.
if first:
    t0 = MPI.Wtime()
    world.Ssend(np.arange(4, dtype="i"), peer, 1)
    say("ssend_waited", MPI.Wtime() - t0 > 0.15)
    req = world.Issend(np.arange(5000, dtype="d"), peer, 2)
    say("issend_early", req.Test())
    world.Barrier()
    req.Wait()
else:
    time.sleep(0.3)
    buf = np.zeros(4, "i")
    world.Recv(buf, peer, 1)
    say("ssend_data", buf.tolist())
    world.Barrier()
    big = np.zeros(5000)
    world.Recv(big, peer, 2)
    say("issend_data", float(big.sum()))
world.Barrier()

# Non-destructive status tests (MPI 4.1) on synchronous sends to oneself: not complete before
# their receives, complete after, and still waitable
reqs = [world.issend(m, rank, 5) for m in (None, "abc", [1, 2])]
say("get_status_all_early", (MPI.Request.Get_status_all(reqs), MPI.Request.get_status_any(reqs),
                              MPI.Request.Get_status_some(reqs)))
got = [world.recv(None, rank, 5) for _ in reqs]
statuses: list = []
while not MPI.Request.get_status_all(reqs, statuses):
    pass
say("get_status_all_late", (got, len(statuses), MPI.Request.Get_status_any(reqs)[1],
                             MPI.Request.get_status_some(reqs), MPI.Request.waitall(reqs)))


# With no active request (null ones, and bridged ones already completed): index UNDEFINED,
# and the status is MPI's empty status (source ANY_SOURCE, tag ANY_TAG), whatever it held
def empty_status(call, requests):
    st = MPI.Status()
    st.source, st.tag, st.error = 0, 0, MPI.ERR_OTHER
    got = call(requests, st)
    return got, st.source == MPI.ANY_SOURCE, st.tag == MPI.ANY_TAG, st.error == MPI.SUCCESS


nulls = [MPI.REQUEST_NULL, MPI.Request()]
for name in ("Get_status_any", "Testany", "Waitany", "testany", "waitany"):
    say(f"empty_status_{name}", (empty_status(getattr(MPI.Request, name), nulls),
                                 empty_status(getattr(MPI.Request, name), reqs)))
say("empty_statuses_some", (MPI.Request.Get_status_some(nulls), MPI.Request.Get_status_some(reqs),
                            MPI.Request.Testsome(reqs), MPI.Request.Get_status_all(nulls)))
world.Barrier()

# Buffered sends within an attached buffer, object forms of the modes
MPI.Attach_buffer(bytearray(1 << 16))
if first:
    world.Bsend(np.full(100, rank, "i"), peer, 3)
    world.bsend({"b": rank}, peer, 4)
    world.ssend(("s", rank), peer, 5)
    world.Send(np.array([rank], "i"), peer, 6)
else:
    b = np.zeros(100, "i")
    world.Recv(b, peer, 3)
    say("bsend", int(b.sum()))
    say("bsend_obj", world.recv(source=peer, tag=4))
    say("ssend_obj", world.recv(source=peer, tag=5))
    one = np.zeros(1, "i")
    world.Recv(one, peer, 6)
    say("send", int(one[0]))
MPI.Detach_buffer()
world.Barrier()

# A ready send, once the receive is known to be posted
ready = np.zeros(2, "i")
rr = world.Irecv(ready, peer, 12)
world.Barrier()
world.Rsend(np.array([rank, 12], "i"), peer, 12)
rr.Wait()
say("rsend", ready.tolist())

# Persistent requests, started many times
sbuf, rbuf = np.zeros(3, "d"), np.zeros(3, "d")
sreq = world.Send_init(sbuf, peer, 7)
rreq = world.Recv_init(rbuf, peer, 7)
total = 0.0
for i in range(20):
    sbuf[:] = [rank, i, rank * i]
    MPI.Prequest.Startall([rreq, sreq])
    MPI.Request.Waitall([rreq, sreq])
    total += float(rbuf.sum())
say("persistent", total)
sreq.Free()
rreq.Free()

# Matched probes
world.Send(np.arange(rank + 1, dtype="i"), peer, 8)
st = MPI.Status()
msg = world.Mprobe(peer, 8, st)
got = np.zeros(st.Get_count(MPI.INT), "i")
msg.Recv(got)
say("mprobe", (st.Get_source(), got.tolist()))
world.send({"m": rank}, peer, 9)
m = None
while m is None:
    m = world.improbe(peer, 9)
say("improbe", m.recv())
world.Send(np.array([rank, 7], "i"), peer, 12)  # the class-level forms take the communicator
m = MPI.Message.Probe(world, peer, 12)
got = np.zeros(2, "i")
m.Recv(got)
world.send(("cls", rank), peer, 13)
m = None
while m is None:
    m = MPI.Message.iprobe(world, peer, 13)
say("message_classmethods", (got.tolist(), m.recv()))

# Sendrecv_replace and Isendrecv
rep = np.array([rank, rank * 2], "i")
world.Sendrecv_replace(rep, peer, 10, peer, 10)
say("sendrecv_replace", rep.tolist())
into = np.zeros(2, "i")
r = world.Isendrecv(np.array([rank, 5], "i"), peer, 11, into, peer, 11)
r.Wait(st)
say("isendrecv", (into.tolist(), st.Get_source()))

# Cancel a receive nobody sends to
c = world.Irecv(np.zeros(1), peer, 99)
c.Cancel()
c.Wait(st)
say("cancelled", st.Is_cancelled())

# Waitsome / Testany / mixed native and bridged requests
reqs = [world.Isend(np.array([rank], "i"), peer, 20 + k) for k in range(3)]
bufs = [np.zeros(1, "i") for _ in range(3)]
recvs = [world.Irecv(bufs[k], peer, 20 + k) for k in range(3)]
done = set()
while len(done) < 3:
    idx = MPI.Request.Waitsome(recvs)
    done |= set(idx or [])
sts = (MPI.Status(), MPI.Status())  # a tuple is filled as far as it goes, never extended
MPI.Request.Waitall(reqs, sts)
say("waitsome", sorted(int(b[0]) for b in bufs))
self_req = MPI.COMM_SELF.Isend(np.array([1], "i"), 0, 0)
self_recv = np.zeros(1, "i")
self_r = MPI.COMM_SELF.Irecv(self_recv, 0, 0)
br = world.Irecv(np.zeros(1, "i"), peer, 30)
bs = world.Isend(np.array([rank], "i"), peer, 30)
MPI.Request.Waitall([self_req, self_r, br, bs])
say("mixed_waitall", int(self_recv[0]))
# native persistent requests (COMM_SELF) through the class methods; statuses kept
ps = MPI.COMM_SELF.Send_init(np.arange(3.0), 0, 41)
pr = MPI.COMM_SELF.Recv_init(np.zeros(3), MPI.ANY_SOURCE, MPI.ANY_TAG)
for rnd in range(2):
    MPI.Prequest.Startall([ps, pr])
    first, second = MPI.Prequest.Waitany([ps, pr]), MPI.Prequest.Waitany([ps, pr])
    say(f"native_persistent_waitany{rnd}", (sorted([first, second]),
                                           MPI.Prequest.Waitany([ps, pr]) == MPI.UNDEFINED))
    MPI.Prequest.Startall([ps, pr])
    st = MPI.Status()
    pr.Wait(st)
    ps.Wait()
    say(f"native_persistent_status{rnd}", (st.Get_tag(), st.Get_count(MPI.DOUBLE)))
ps.Free()
pr.Free()
i, flag = MPI.Request.Testany([MPI.REQUEST_NULL])
say("testany_null", (i == MPI.UNDEFINED, flag))
say("request_types", (isinstance(br, MPI.Request), isinstance(self_req, MPI.Request)))
# a receive into a derived datatype that the program frees before the receive completes
# (MPI allows it; mpi4py.util.pkl5 does it with large messages)
every_other = MPI.INT.Create_vector(3, 1, 2).Commit()
got = np.full(6, -1, "i")
r = world.Irecv([got, 1, every_other], (rank - 1) % size, 51)
every_other.Free()
world.Send(np.arange(3, dtype="i") + 10 * rank, (rank + 1) % size, 51)
r.Wait()
say("recv_datatype_freed_early", got.tolist())
# copies of requests and messages compare equal to them (mpi4py's copy constructors)
req = world.issend(rank, rank, 52)
m = world.mprobe(rank, 52)
say("copies", (m == MPI.Message(m), MPI.Message(m) != m, MPI.Request(req) == req, m.recv(),
               world.alltoall(None)))
req.wait()
# a matched probe of PROC_NULL: a message of its own, NULL once received
m = world.mprobe(MPI.PROC_NULL)
first = m == MPI.MESSAGE_NO_PROC
say("mprobe_proc_null", (first, m.recv(), m == MPI.MESSAGE_NULL,
                         MPI.MESSAGE_NO_PROC != MPI.MESSAGE_NULL))

world.Barrier()
every = world.gather(out, root=0)  # one writer: lines of several ranks never interleave
if rank == 0:
    print("\n".join(line for lines in every for line in lines), flush=True)
