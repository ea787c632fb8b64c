"""Every method of mpi4py's Intracomm, called with plausible arguments on a communicator of
every rank: it works, or it raises within a second; none hangs.

All ranks make the same calls in the same order (collective ones are collective). Point to
point calls go to and come from MPI.PROC_NULL; collectives use buffers sized for the
communicator; calls that wait for a peer outside the job (Accept, Connect, Spawn, Join) or end
it (Abort) are left out. Each rank prints `rank R: NAME OUTCOME SECONDS`, OUTCOME `ok <what it
gave>`, `NotBridged` or `raised <class>`; a watchdog prints `rank R: NAME HANG` and exits 3 if
a call takes longer than the limit. `--mmpi` imports mmpi's MPI (natively: mpi4py's).
"""
# ruff: noqa: E721  (type(x) == MPI.Group is what mpi4py's tests and programs ask)

import inspect
import os
import sys
import threading
import time

import numpy as np

if sys.argv[1:2] == ["--mmpi"]:
    from mmpi import MPI
else:
    from mpi4py import MPI

LIMIT = 30.0  # a call that takes this long is taken to hang
LEFT_OUT = {"Abort", "Accept", "Connect", "Spawn", "Spawn_multiple", "Join"}
world = MPI.COMM_WORLD
rank, size = world.Get_rank(), world.Get_size()
N = 2  # elements per rank in the collectives
current = {"name": None, "since": 0.0}


def watchdog():
    while True:
        time.sleep(0.5)
        name, since = current["name"], current["since"]
        if name is not None and time.monotonic() - since > LIMIT:
            print(f"rank {rank}: {name} HANG", flush=True)
            os._exit(3)


threading.Thread(target=watchdog, daemon=True).start()


def ints(n, fill=0):
    return np.full(n, fill, "i")


KINDS = {"Allgather", "Alltoall", "Allgatherv", "Alltoallv", "Allreduce", "Scan", "Exscan",
         "Reduce", "Gather", "Gatherv", "Scatter", "Scatterv", "Reduce_scatter",
         "Reduce_scatter_block", "Alltoallw", "Bcast", "Barrier"}


def arguments(name, comm, params):
    """Plausible values for the parameters of `name`, by their names."""
    c = name.removesuffix("_init")  # the collective it is: Iallgather_init -> Allgather
    if c[:1] == "I" and c[1:2].upper() + c[2:] in KINDS:
        c = c[1:2].upper() + c[2:]
    group = comm.Get_group()
    whole = size * N
    values = {
        "buf": ints(N, rank), "obj": ("o", rank), "dest": MPI.PROC_NULL,
        "source": MPI.PROC_NULL, "tag": 0, "sendtag": 0, "recvtag": 0, "root": 0,
        "op": MPI.SUM, "color": rank % 2, "key": rank, "group": group, "comm": comm,
        "info": MPI.INFO_NULL, "errhandler": MPI.ERRORS_RETURN, "name": "swept",
        "partitions": 1, "split_type": MPI.COMM_TYPE_SHARED, "flag": 1,
        "dims": [size], "periods": [False], "reorder": False, "index": list(range(1, size + 1)),
        "edges": [(i + 1) % size for i in range(size)], "sources": [rank], "degrees": [1],
        "destinations": [(rank + 1) % size], "sendobj": ("s", rank), "attrval": 42,
        "errorcode": MPI.ERR_OTHER, "local_leader": 0, "peer_comm": comm, "remote_leader": 0,
        "stringtag": "sweep", "num_to_ack": None, "status": None, "recvbuf": None,
        "arg": 0, "handle": 0, "fd": -1, "errhandler_fn": lambda comm, code: None,
    }
    if name == "alltoall":
        values["sendobj"] = [("a", rank, j) for j in range(size)]
    if name == "scatter":
        values["sendobj"] = [("s", j) for j in range(size)] if rank == 0 else None
    if name == "Free_keyval":
        values["keyval"] = MPI.Comm.Create_keyval()
    if name == "Iagree":
        values["flag"] = np.ones(1, "i")
    if c in ("Allgather", "Alltoall"):
        values["sendbuf"] = ints(whole if c == "Alltoall" else N, rank)
        values["recvbuf"] = ints(whole)
    elif c in ("Allgatherv", "Alltoallv"):
        values["sendbuf"] = [ints(whole), [N] * size] if c == "Alltoallv" else ints(N, rank)
        values["recvbuf"] = [ints(whole), [N] * size]
    elif c in ("Allreduce", "Scan", "Exscan", "Reduce"):
        values["sendbuf"], values["recvbuf"] = ints(N, rank), ints(N)
    elif c in ("Gather", "Gatherv"):
        values["sendbuf"] = ints(N, rank)
        values["recvbuf"] = (ints(whole) if c == "Gather" else [ints(whole), [N] * size]) \
            if rank == 0 else None
    elif c in ("Scatter", "Scatterv"):
        values["sendbuf"] = (ints(whole, 5) if c == "Scatter" else [ints(whole, 5), [N] * size]) \
            if rank == 0 else None
        values["recvbuf"] = ints(N)
    elif c in ("Reduce_scatter", "Reduce_scatter_block"):
        values["sendbuf"], values["recvbuf"] = ints(whole, rank), ints(N)
        values["recvcounts"] = [N] * size
    elif c in ("Alltoallw",):
        values["sendbuf"] = [ints(whole), [N] * size, [N * 4 * i for i in range(size)],
                             [MPI.INT] * size]
        values["recvbuf"] = [ints(whole), [N] * size, [N * 4 * i for i in range(size)],
                             [MPI.INT] * size]
    elif name in ("Sendrecv", "Isendrecv", "sendrecv"):
        values["sendbuf"], values["recvbuf"] = ints(N, rank), ints(N) if name != "sendrecv" \
            else None
    elif name in ("Attach_buffer",):
        values["buf"] = bytearray(1 << 16)
    elif name in ("Cart_map", "Create_cart"):
        pass
    elif name in ("Dup_with_info", "Idup_with_info"):
        values["info"] = MPI.Info.Create()
    elif name in ("irecv", "recv"):
        values["buf"] = None
    args = []
    for p in params:
        if p.name in values:
            args.append(values[p.name])
        elif p.default is not inspect.Parameter.empty:
            break
        else:
            raise LookupError(p.name)
    return args


def settle(result):
    """Finish what a call gave (wait its request, free its communicator) and describe it."""
    if isinstance(result, tuple) and len(result) == 2 and isinstance(result[1], MPI.Request):
        result[1].Wait()
        return "(" + settle(result[0]) + ", request)"
    if isinstance(result, MPI.Prequest):
        result.Start()
        result.Wait()
        result.Free()
        return "persistent request"
    if isinstance(result, MPI.Request):
        result.Wait()
        return "request"
    if isinstance(result, MPI.Comm):
        if result == MPI.COMM_NULL:
            return "COMM_NULL"
        kind = next(k for k in ("Cartcomm", "Graphcomm", "Distgraphcomm", "Intercomm",
                                "Intracomm", "Comm") if type(result) == getattr(MPI, k))
        what = f"{kind}({result.Get_size()})"
        result.Free()
        return what
    if isinstance(result, MPI.Group):
        return f"group({result.Get_size()})"
    if isinstance(result, MPI.Message):
        return "message"
    if result is None or isinstance(result, (bool, int, str, float, list, tuple)):
        return repr(result)
    return type(result).__name__


def partitioned(comm):
    """A partitioned send to this rank itself and its receive (PROC_NULL crashes MPICH)."""
    out, back = ints(N, rank), ints(N)
    send = comm.Psend_init(out, 1, rank, tag=9)
    recv = comm.Precv_init(back, 1, rank, tag=9)
    MPI.Prequest.Startall([send, recv])
    send.Pready(0)
    MPI.Request.Waitall([send, recv])
    send.Free()
    recv.Free()
    return f"ok {back.tolist()}"


# mpi4py's own class, for the signatures it documents (under mmpi-run MPI.Intracomm is a
# stand-in whose methods dispatch to native or bridged ones)
DOCUMENTED = getattr(MPI.Intracomm, "_stands_for", MPI.Intracomm)


def call(name, comm):
    if name in ("Psend_init", "Precv_init"):
        return partitioned(comm)
    native = getattr(DOCUMENTED, name)
    raw = inspect.getattr_static(DOCUMENTED, name)
    params = list(inspect.signature(native).parameters.values())
    bound = type(raw).__name__ in ("classmethod_descriptor", "builtin_function_or_method") \
        or isinstance(raw, (classmethod, staticmethod))
    if not bound:
        params = params[1:]
    target = comm
    if name in ("Free", "free", "Disconnect", "Revoke", "Set_errhandler", "Set_name",
                "Set_info", "Shrink", "Ishrink", "Agree", "Iagree", "Ack_failed",
                "Get_failed"):
        target = comm.Dup()
    if name == "Create_intercomm":  # the even ranks and the odd ones
        target = comm.Split(rank % 2, rank)
    args = arguments(name, target, params)
    if name == "Create_intercomm":
        args[1:3] = [comm, 1 - rank % 2]
    how = getattr(MPI.Intracomm, name) if bound else getattr(target, name)
    result = how(*args)
    if name in ("Create_keyval",):
        MPI.Comm.Free_keyval(result)
        result = "keyval"
    if target is not comm and name not in ("Free", "free", "Disconnect", "Revoke"):
        target.Free()
    return "ok " + settle(result)


def outcome(name, comm):
    current["name"], current["since"] = name, time.monotonic()
    t0 = time.monotonic()
    try:
        got = call(name, comm)
    except NotImplementedError as exc:  # mmpi's NotBridged is one
        got = "NotBridged" if type(exc).__name__ == "NotBridged" else "raised " + \
            type(exc).__name__
    except LookupError as exc:
        got = f"no plausible {exc}"
    except MPI.Exception:  # mmpi's errors are MPI.Exception too, under their own names
        got = "raised MPI.Exception"
    except Exception as exc:  # noqa: BLE001 - the outcome is what is printed
        got = "raised " + type(exc).__name__
    current["name"] = None
    lines.append(f"rank {rank}: {name} {got} {time.monotonic() - t0:.3f}")


lines = []  # printed by rank 0 at the end: lines of several ranks never interleave
comm = world.Dup()
names = sorted(n for n in dir(DOCUMENTED) if not n.startswith("_") and n not in LEFT_OUT
               and callable(getattr(DOCUMENTED, n)))
keyval = MPI.Comm.Create_keyval()
for name in names:
    if name in ("Set_attr", "Get_attr", "Delete_attr"):
        current["name"], t0 = name, time.monotonic()
        try:
            got = "ok " + repr({"Set_attr": lambda: comm.Set_attr(keyval, 42),
                                "Get_attr": lambda: comm.Get_attr(keyval),
                                "Delete_attr": lambda: comm.Delete_attr(keyval)}[name]())
        except Exception as exc:  # noqa: BLE001
            got = "raised " + type(exc).__name__
        current["name"] = None
        lines.append(f"rank {rank}: {name} {got} {time.monotonic() - t0:.3f}")
        continue
    outcome(name, comm)
    comm.Barrier()
comm.Free()
lines.append(f"rank {rank}: swept {len(names)}")
every = world.gather(lines, root=0)
if rank == 0:
    print("\n".join(line for mine in every for line in mine), flush=True)
