"""Irecv, Recv, Isend and Send in every form: their compiled common case, or Python's.

usage: posted_mix.py SEED ROUNDS   (1+1 or 2+2 ranks: low rank i pairs with high rank i)

Each round, a seeded choice of buffer (uint8, float64, a 2-D int32 array, a bytearray, an
empty array, an array over the eager size; float64 and int32 as [array, datatype] too), of
sender (Isend, Send, Issend), of receive (Irecv, Recv), of source and tag on the receive (the
rank or ANY_SOURCE, the tag or ANY_TAG) and of order (the receive posted before the message
can come, or after it came: then it waits unmatched and the Python matcher takes it); with a
given tag, a decoy of another tag comes first and is received after. Every received byte and
status is checked, on the compiled rank path (where the common cases run in C:
mmpi/_backend/cpost.c) and on the Python one alike; then a message too long for its receive must be
named with the call (Recv or Irecv), and arguments the compiled case must refuse (a freed
communicator too) get the Python path's errors by name.
Prints "POSTED OK <rank> compiled=<bool> <n>".
"""

import random
import sys

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
seed, rounds = int(sys.argv[1]), int(sys.argv[2])
half = size // 2
peer = rank + half if rank < half else rank - half
low = rank < half
rng = random.Random(seed)  # the same draws on every rank
EAGER = 32 * 1024


def make(kind: str, k: int, fill: bool):
    """The buffer of kind `kind` for round `k`, filled with its pattern (or zeros)."""
    if kind == "u8":
        a = np.zeros(37 + k % 50, np.uint8)
    elif kind == "f64":
        a = np.zeros(5 + k % 9, np.float64)
    elif kind == "i32x2":
        a = np.zeros((3, 4 + k % 3), np.int32)
    elif kind == "bytes":
        a = bytearray(11 + k % 7)
    elif kind == "empty":
        a = np.zeros(0, np.float64)
    elif kind == "f64, DOUBLE":
        a = np.zeros(3 + k % 11, np.float64)
    elif kind == "i32x2, INT":
        a = np.zeros((2, 3 + k % 4), np.int32)
    else:  # "big": over the eager size, the large protocol
        a = np.zeros(EAGER + 1000 + k, np.uint8)
    flat = memoryview(a).cast("B")
    if fill and len(flat):
        flat[:] = bytes((k * 7 + i) % 251 for i in range(len(flat)))
    return a


kinds = ["u8", "f64", "i32x2", "bytes", "empty", "big", "f64, DOUBLE", "i32x2, INT"]


def spec(kind: str, a):
    """The buffer argument: the array, or [array, datatype] for the kinds that name one."""
    return [a, {"DOUBLE": MPI.DOUBLE, "INT": MPI.INT}[kind.split(", ")[1]]] if ", " in kind \
        else a

checked = 0
for k in range(rounds):
    kind = rng.choice(kinds)
    mode = rng.choice(["Isend", "Send", "Issend"])
    src = rng.choice(["rank", "any"])
    tagsel = rng.choice(["tag", "any"])
    # a blocking Send may wait for its receive (MPI): then the receive is posted first
    first = "receive" if mode == "Send" else rng.choice(["receive", "message"])
    rmode = rng.choice(["Irecv", "Recv"])
    tag = k % 100
    if low:
        if first == "receive":
            comm.Recv(bytearray(1), peer, 999)  # the receive is posted
        buf = spec(kind, make(kind, k, True))
        if tagsel == "tag":  # a decoy first: a receive must take its own tag, not the first
            comm.Isend(np.full(3, k, np.int64), peer, tag + 200).Wait()
        if mode == "Send":
            comm.Send(buf, peer, tag)
        else:
            req = (comm.Isend if mode == "Isend" else comm.Issend)(buf, peer, tag)
            if first == "message":
                comm.Send(bytearray(1), peer, 998)  # it is on its way: now post
            req.Wait()
    else:
        got = make(kind, k, False)
        s = MPI.ANY_SOURCE if src == "any" else peer
        t = MPI.ANY_TAG if tagsel == "any" else tag
        st = MPI.Status()
        if first == "message":
            comm.Recv(bytearray(1), peer, 998)
            while not comm.Iprobe(peer, tag):  # come to this rank: unexpected here
                pass
        elif rmode == "Recv":
            comm.Send(bytearray(1), peer, 999)  # the message comes once Recv waits, or before
        if rmode == "Recv":
            comm.Recv(spec(kind, got), s, t, st)
        else:
            r = comm.Irecv(spec(kind, got), s, t)
            if first == "receive":
                comm.Send(bytearray(1), peer, 999)
        decoy = np.zeros(3, np.int64)
        if tagsel == "tag":
            comm.Irecv(decoy, peer, tag + 200).Wait()
            assert (decoy == k).all(), (k, decoy)
        if rmode == "Irecv":
            r.Wait(st)
        want = memoryview(make(kind, k, True)).cast("B")
        nbytes = len(want)
        assert bytes(memoryview(got).cast("B")) == bytes(want), \
            (k, kind, mode, src, tagsel, first)
        assert (st.Get_source(), st.Get_tag(), st.Get_count(MPI.BYTE)) == (peer, tag, nbytes), \
            (k, kind, st.Get_source(), st.Get_tag(), st.Get_count(MPI.BYTE), nbytes)
        checked += 1

# A message too long for its receive: the error names the call, blocking or not.
for n, call in enumerate(("Recv", "Irecv")):
    if low:
        comm.Recv(bytearray(1), peer, 997)
        comm.Send(np.zeros(16, np.uint8), peer, 500 + n)
    else:
        try:
            if call == "Recv":
                comm.Send(bytearray(1), peer, 997)
                comm.Recv(np.zeros(8, np.uint8), peer, 500 + n)
            else:
                r = comm.Irecv(np.zeros(8, np.uint8), peer, 500 + n)
                comm.Send(bytearray(1), peer, 997)
                r.Wait()
        except MPI.Exception as exc:
            assert f"{call} on rank {rank}: message from rank {peer} with tag {500 + n} has 16 " \
                "bytes" in str(exc), exc
        else:
            raise AssertionError(f"{call}: no truncation error")

# What the compiled case must refuse, with the Python path's own errors.
errors = []
bad = [(lambda: comm.Irecv(np.zeros(4), size + 3, 0), "source rank"),
       (lambda: comm.Irecv(np.zeros(4), peer, -7), "tag -7"),
       (lambda: comm.Isend(np.zeros(4), size, 0), "destination rank"),
       (lambda: comm.Isend(np.zeros(4), peer, -7), "tag -7"),
       (lambda: comm.Irecv(np.frombuffer(b"12345678", np.uint8), peer, 5),
        "receive buffer is read-only"),
       (lambda: comm.Isend(np.zeros(40, np.int16)[::2], peer, 5), "buffer is not contiguous")]
gone = comm.Dup()
gone.Free()
bad += [(lambda: gone.Irecv(np.zeros(4), peer, 5), "Irecv on rank"),
        (lambda: gone.Recv(np.zeros(4), peer, 5), "the communicator was freed"),
        (lambda: gone.Isend(np.zeros(4), peer, 5), "Isend on rank"),
        (lambda: gone.Send(np.zeros(4), peer, 5), "the communicator was freed"),
        (lambda: gone.Iprobe(peer, 5), "Iprobe on rank"),
        (lambda: gone.Improbe(peer, 5), "Improbe on rank"),
        (lambda: gone.isend({"a": 1}, peer, 5), "isend on rank"),
        (lambda: gone.irecv(None, peer, 5), "irecv on rank")]
for call, words in bad:
    try:
        call()
    except Exception as exc:  # noqa: BLE001 - any error, as long as it says what was wrong
        if words not in str(exc):
            errors.append(f"{words!r} not in {exc!r}")
    else:
        errors.append(f"no error for {words}")
assert not errors, errors
core = getattr(comm, "_core", None)
compiled = core is not None and core.post_recv is not None and core.post_send is not None
comm.Barrier()
print(f"POSTED OK {rank} compiled={compiled} {checked}", flush=True)
