"""The MPI side of mmpi-bench: one function per benchmark; rank 0 prints one JSON line per result.

The driver starts it natively (``mpiexec -n N python -m bench.worker SPEC...``) and
bridged (under ``mmpi-run``); the code is the same, since ``mmpi.MPI`` is plain mpi4py natively.
A SPEC is ``name`` or ``name=size,size,...`` (sizes in bytes). Every output line that matters
starts with ``MMPI-BENCH `` followed by a JSON object: one ``env`` record, one ``result`` per
measured point, and ``done`` at the end.

How each point is timed (warm-up, calibration, repetitions, polite waits): bench._timing;
the overlap and LogGP measurements, made of several timed kernels: bench._composite.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import traceback
from collections.abc import Callable, Iterator, Sequence

import numpy as np

from mmpi import MPI

from . import across
from ._catalog import MARKER, OVERLAP_CALLS
from ._composite import overlap, prtt
from ._timing import (
    T_ACK,
    T_DATA,
    WINDOW,
    Kernel,
    Options,
    floats,
    measure,
    pair,
    usec,
)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmarks named on the command line and print their results on rank 0."""
    args = _parser().parse_args(argv)
    comm = across.join(MPI) if os.environ.get(across.ENV) else MPI.COMM_WORLD
    try:
        opts = Options(args.low if args.low is not None else comm.Get_size() // 2,
                       args.target_ms, args.reps, args.iters_scale, args.max_iters,
                       args.compute)
        specs = [_parse_spec(s) for s in args.specs]
        _emit(comm, {"type": "env", **_environment(comm, opts)})
        for name, sizes in _schedule(specs):
            if name == "loggp":
                for size in sizes:
                    _emit(comm, {"type": "result", "bench": name, "size": size,
                                 **prtt(comm, size, opts)})
                continue
            if name in OVERLAP_CALLS:
                for size in sizes:
                    _emit(comm, {"type": "result", "bench": name, "size": size,
                                 **overlap(comm, name, size, opts)})
                continue
            for kernel in _points(comm, name, sizes, opts):
                _emit(comm, {"type": "result", "bench": name, **kernel.fields,
                             **measure(comm, kernel, opts)})
        _emit(comm, {"type": "done"})
    except Exception:
        # One failing rank must not leave the others waiting in a collective forever.
        traceback.print_exc()
        sys.stderr.flush()
        comm.Abort(1)
        return 1
    return 0


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench.worker",
                                description="MPI side of mmpi-bench (started by the driver)")
    p.add_argument("specs", nargs="+", metavar="NAME[=SIZES]")
    p.add_argument("--low", type=int, help="ranks in the low cluster (default: half)")
    p.add_argument("--target-ms", type=float, default=100.0)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--iters-scale", type=float, default=1.0)
    p.add_argument("--max-iters", type=int, default=10000)
    p.add_argument("--compute", choices=("sleep", "busy"), default="sleep")
    return p


def _parse_spec(spec: str) -> tuple[str, list[int]]:
    name, _, sizes = spec.partition("=")
    if name not in BENCHMARKS and name not in OVERLAP_CALLS and name != "loggp":
        raise SystemExit(f"worker: unknown benchmark {name!r}")
    return name, [int(s) for s in sizes.split(",") if s]


def _schedule(specs: list[tuple[str, list[int]]]) -> list[tuple[str, list[int]]]:
    """The points to run, one size at a time, size-less ones (barrier) first.

    Every benchmark's figure of a size is measured within seconds of the others' (this VM's
    speed drifts over tens of seconds, and loggp's parameters are checked against latency, bw
    and rate of the same run); in one size, the order of the command line.
    """
    first = [(name, sizes) for name, sizes in specs if not sizes]
    points = sorted(((size, k, name) for k, (name, sizes) in enumerate(specs)
                     for size in sizes), key=lambda p: p[:2])
    return first + [(name, [size]) for size, _, name in points]


def _emit(comm, record: dict) -> None:
    if comm.Get_rank() == 0:
        print(f"{MARKER} {json.dumps(record)}", flush=True)


def _environment(comm, opts: Options) -> dict:
    return {
        "bridged": bool(getattr(MPI, "BRIDGED", False)),
        "across_jobs": bool(os.environ.get(across.ENV)),
        "size": comm.Get_size(),
        "low": opts.low,
        "hostname": socket.gethostname(),
        "mpi_library": MPI.Get_library_version().strip(),
        "mpi_version": "{}.{}".format(*MPI.Get_version()),
        "numpy": np.__version__,
        "window": WINDOW,
        "target_ms": opts.target_ms,
        "reps": opts.reps,
        "iters_scale": opts.iters_scale,
        "max_iters": opts.max_iters,
        "compute": opts.compute,
        "async_progress": os.environ.get("MPIR_CVAR_ASYNC_PROGRESS", "0"),
        "progress": os.environ.get("MMPI_PROGRESS", "off"),
    }



# -- point-to-point ---------------------------------------------------------------------------
def latency(comm, size: int, opts: Options) -> Kernel:
    """Ping-pong between the first and the last rank; one-way time in microseconds."""
    a, b = pair(comm)
    rank = comm.Get_rank()
    buf = np.ones(size, np.uint8)

    def step(n: int) -> float:
        t0 = MPI.Wtime()
        if rank == a:
            for _ in range(n):
                comm.Send(buf, b, T_DATA)
                comm.Recv(buf, b, T_DATA)
        elif rank == b:
            for _ in range(n):
                comm.Recv(buf, a, T_DATA)
                comm.Send(buf, a, T_DATA)
        return MPI.Wtime() - t0

    return Kernel({"size": size}, step, lambda t: usec(t / 2), "us", frozenset({a, b}))


def _stream(comm, src: int, dst: int, size: int) -> Callable[[int], float]:
    """osu_bw from src to dst: a window of non-blocking sends, then a one-byte ack."""
    rank = comm.Get_rank()
    sbuf, rbuf, ack = np.ones(size, np.uint8), np.empty(size, np.uint8), np.zeros(1, np.uint8)

    def step(n: int) -> float:
        t0 = MPI.Wtime()
        if rank == src:
            for _ in range(n):
                MPI.Request.Waitall([comm.Isend(sbuf, dst, T_DATA) for _ in range(WINDOW)])
                comm.Recv(ack, dst, T_ACK)
        elif rank == dst:
            for _ in range(n):
                # One receive buffer for the whole window, as OSU: only the rate matters here.
                MPI.Request.Waitall([comm.Irecv(rbuf, src, T_DATA) for _ in range(WINDOW)])
                comm.Send(ack, src, T_ACK)
        return MPI.Wtime() - t0

    return step


def bw(comm, size: int, opts: Options) -> Kernel:
    """Unidirectional bandwidth from the first to the last rank, in MB/s."""
    a, b = pair(comm)
    return Kernel({"size": size}, _stream(comm, a, b, size),
                  lambda t: size * WINDOW / t / 1e6, "MB/s", frozenset({a, b}))


def bibw(comm, size: int, opts: Options) -> Kernel:
    """Bidirectional bandwidth between the first and the last rank (both ways summed), MB/s."""
    a, b = pair(comm)
    rank = comm.Get_rank()
    other = b if rank == a else a
    sbuf, rbuf = np.ones(size, np.uint8), np.empty(size, np.uint8)

    def step(n: int) -> float:
        t0 = MPI.Wtime()
        if rank in (a, b):
            for _ in range(n):
                reqs = [comm.Irecv(rbuf, other, T_DATA) for _ in range(WINDOW)]
                reqs += [comm.Isend(sbuf, other, T_DATA) for _ in range(WINDOW)]
                MPI.Request.Waitall(reqs)
        return MPI.Wtime() - t0

    return Kernel({"size": size}, step, lambda t: 2 * size * WINDOW / t / 1e6, "MB/s",
                  frozenset({a, b}))


# -- collectives ------------------------------------------------------------------------------
def barrier(comm, size: int, opts: Options) -> Kernel:
    """Barrier; time per call in microseconds (`size` is ignored)."""

    def step(n: int) -> float:
        t0 = MPI.Wtime()
        for _ in range(n):
            comm.Barrier()
        return MPI.Wtime() - t0

    return Kernel({"size": 0}, step, usec, "us")


def _timed_calls(comm, nbytes: int, call: Callable[[], None]) -> Kernel:
    """Time each call alone, with an untimed Barrier between calls as the OSU collectives do.

    Otherwise consecutive calls pipeline and a rooted collective's stragglers stay hidden.
    """

    def step(n: int) -> float:
        spent = 0.0
        for _ in range(n):
            t0 = MPI.Wtime()
            call()
            spent += MPI.Wtime() - t0
            comm.Barrier()
        return spent

    return Kernel({"size": nbytes}, step, usec, "us")


def bcast(comm, size: int, opts: Options) -> Kernel:
    """Bcast of `size` bytes from rank 0."""
    buf = np.ones(size, np.uint8)
    return _timed_calls(comm, size, lambda: comm.Bcast(buf, root=0))



def reduce(comm, size: int, opts: Options) -> Kernel:
    """Reduce (SUM) of float32 elements to rank 0."""
    sbuf = np.ones(floats(size), np.float32)
    rbuf = np.empty_like(sbuf) if comm.Get_rank() == 0 else None
    return _timed_calls(comm, sbuf.nbytes, lambda: comm.Reduce(sbuf, rbuf, op=MPI.SUM, root=0))


def allreduce(comm, size: int, opts: Options) -> Kernel:
    """Allreduce (SUM) of float32 elements."""
    sbuf = np.ones(floats(size), np.float32)
    rbuf = np.empty_like(sbuf)
    return _timed_calls(comm, sbuf.nbytes, lambda: comm.Allreduce(sbuf, rbuf, op=MPI.SUM))


def alltoall(comm, size: int, opts: Options) -> Kernel:
    """Alltoall with `size` bytes for each pair of ranks."""
    n = comm.Get_size()
    sbuf, rbuf = np.ones(size * n, np.uint8), np.empty(size * n, np.uint8)
    return _timed_calls(comm, size, lambda: comm.Alltoall(sbuf, rbuf))


def alltoallv(comm, size: int, opts: Options) -> Kernel:
    """Alltoallv with equal counts of `size` bytes for each pair of ranks."""
    n = comm.Get_size()
    sbuf, rbuf = np.ones(size * n, np.uint8), np.empty(size * n, np.uint8)
    counts, displs = [size] * n, [i * size for i in range(n)]
    return _timed_calls(comm, size, lambda: comm.Alltoallv([sbuf, counts, displs, MPI.BYTE],
                                                           [rbuf, counts, displs, MPI.BYTE]))


def gather(comm, size: int, opts: Options) -> Kernel:
    """Gather of `size` bytes per rank to rank 0."""
    sbuf = np.ones(size, np.uint8)
    rbuf = np.empty(size * comm.Get_size(), np.uint8) if comm.Get_rank() == 0 else None
    return _timed_calls(comm, size, lambda: comm.Gather(sbuf, rbuf, root=0))


def allgather(comm, size: int, opts: Options) -> Kernel:
    """Allgather of `size` bytes per rank."""
    sbuf, rbuf = np.ones(size, np.uint8), np.empty(size * comm.Get_size(), np.uint8)
    return _timed_calls(comm, size, lambda: comm.Allgather(sbuf, rbuf))


# -- Netgauge patterns across the zipper ------------------------------------------------------
def _high_ranks(comm, opts: Options) -> list[int]:
    high = list(range(opts.low, comm.Get_size()))
    if opts.low < 1 or not high:
        raise ValueError(f"the patterns need ranks in both clusters, got low={opts.low} of "
                         f"{comm.Get_size()}")
    return high


def _per_round(size: int, clients: list[int], step: Callable[[int], float]) -> Kernel:
    return Kernel({"size": size, "clients": len(clients)}, step, usec, "us",
                  frozenset([0, *clients]), lambda t: {"MB/s": len(clients) * size / t / 1e6})


def one_to_many(comm, size: int, opts: Options) -> Kernel:
    """Netgauge 1:n: vrank 0 sends `size` bytes to every high rank, each replies with one byte.

    Time per round; the ``MB/s`` extra is the aggregate data rate.
    """
    clients = _high_ranks(comm, opts)
    rank = comm.Get_rank()
    buf, ack = np.ones(size, np.uint8), np.zeros(1, np.uint8)
    acks = [np.empty(1, np.uint8) for _ in clients]

    def step(n: int) -> float:
        t0 = MPI.Wtime()
        if rank == 0:
            for _ in range(n):
                reqs = [comm.Irecv(a, c, T_ACK) for a, c in zip(acks, clients, strict=True)]
                reqs += [comm.Isend(buf, c, T_DATA) for c in clients]
                MPI.Request.Waitall(reqs)
        elif rank in clients:
            for _ in range(n):
                comm.Recv(buf, 0, T_DATA)
                comm.Send(ack, 0, T_ACK)
        return MPI.Wtime() - t0

    return _per_round(size, clients, step)


def many_to_one(comm, size: int, opts: Options) -> Kernel:
    """Netgauge n:1: every high rank sends `size` bytes to vrank 0, which acks when it has all.

    Time per round; the ``MB/s`` extra is the aggregate data rate.
    """
    clients = _high_ranks(comm, opts)
    rank = comm.Get_rank()
    buf, ack = np.ones(size, np.uint8), np.zeros(1, np.uint8)
    bufs = [np.empty(size, np.uint8) for _ in clients] if rank == 0 else []

    def step(n: int) -> float:
        t0 = MPI.Wtime()
        if rank == 0:
            for _ in range(n):
                MPI.Request.Waitall(
                    [comm.Irecv(b, c, T_DATA) for b, c in zip(bufs, clients, strict=True)])
                MPI.Request.Waitall([comm.Isend(ack, c, T_ACK) for c in clients])
        elif rank in clients:
            for _ in range(n):
                comm.Send(buf, 0, T_DATA)
                comm.Recv(ack, 0, T_ACK)
        return MPI.Wtime() - t0

    return _per_round(size, clients, step)


def pairs(comm, size: int, opts: Options, k: int) -> Kernel:
    """Run osu_bw on `k` concurrent pairs, low rank i -> high rank i; aggregate MB/s."""
    rank, low = comm.Get_rank(), opts.low
    i = rank if rank < k else rank - low if low <= rank < low + k else None
    step = _stream(comm, i, low + i, size) if i is not None else (lambda n: 0.0)
    return Kernel({"size": size, "pairs": k}, step, lambda t: k * size * WINDOW / t / 1e6,
                  "MB/s", frozenset([*range(k), *range(low, low + k)]))


def rate(comm, size: int, opts: Options, k: int) -> Kernel:
    """Message rate of `k` concurrent pairs, low rank i -> high rank i (osu_mbw_mr).

    Windows of 64 non-blocking sends, then an ack; messages per second, all pairs together.
    """
    kernel = pairs(comm, size, opts, k)
    kernel.value = lambda t: k * WINDOW / t
    kernel.unit = "msg/s"
    return kernel



def _points(comm, name: str, sizes: list[int], opts: Options) -> Iterator[Kernel]:
    """Set up the kernels of one benchmark, one point at a time (buffers are freed between)."""
    if name in ("pairs", "rate"):
        # Every pair count from one up to the smaller cluster: how the zipper scales.
        for k in range(1, min(opts.low, len(_high_ranks(comm, opts))) + 1):
            for size in sizes:
                yield BENCHMARKS[name](comm, size, opts, k)
    elif name == "barrier":
        yield barrier(comm, 0, opts)
    else:
        for size in sizes:
            yield BENCHMARKS[name](comm, size, opts)


BENCHMARKS: dict[str, Callable[..., Kernel]] = {
    "latency": latency,
    "bw": bw,
    "bibw": bibw,
    "barrier": barrier,
    "bcast": bcast,
    "reduce": reduce,
    "allreduce": allreduce,
    "alltoall": alltoall,
    "alltoallv": alltoallv,
    "gather": gather,
    "allgather": allgather,
    "1:n": one_to_many,
    "n:1": many_to_one,
    "pairs": pairs,
    "rate": rate,
}


if __name__ == "__main__":
    raise SystemExit(main())
