"""The MPI side of mmpi-bench: one function per benchmark; rank 0 prints one JSON line per result.

The driver starts it natively (``mpiexec -n N python -m bench.worker SPEC...``) and
bridged (under ``mmpi-run``); the code is the same, since ``mmpi.MPI`` is plain mpi4py natively.
A SPEC is ``name`` or ``name=size,size,...`` (sizes in bytes). Every output line that matters
starts with ``MMPI-BENCH `` followed by a JSON object: one ``env`` record, one ``result`` per
measured point, and ``done`` at the end.

Rule 1: every rank runs the same points in the same order and agrees on every iteration count
        (derived from an Allreduce MAX of calibration times), so collectives always line up.
Rule 2: ranks with nothing to do in a pattern, and ranks that have finished their part, wait by
        sleeping between ``Testall`` calls, never inside a blocking MPI call: MPICH spins a
        core there, which on a small machine is stolen from the ranks being measured.
Rule 3: warm-up and calibration batches (at least two repetitions' worth of time) are never
        reported; a figure is the median over repetitions of (max over ranks of each rank's
        time per iteration), as OSU reports.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import sys
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from mmpi import MPI

from . import across
from ._catalog import MARKER, OVERLAP_CALLS

WINDOW = 64  # messages in flight per bandwidth iteration, as osu_bw
T_DATA, T_ACK, T_DONE, T_GO = 100, 102, 103, 104
_POLL_SLEEP = 2e-4


@dataclass
class Options:
    """How long to measure each point."""

    low: int  # ranks in the low cluster (natively: how the world is split for the patterns)
    target_ms: float = 100.0  # all repetitions of one point together
    reps: int = 5
    iters_scale: float = 1.0
    max_iters: int = 10000
    compute: str = "sleep"  # the overlap benchmarks' computation: "sleep" or "busy" (numpy)


@dataclass
class Kernel:
    """One benchmark at one size, set up and ready to run batches of iterations."""

    fields: dict  # what identifies the point in the output: size, and pairs/clients
    step: Callable[[int], float]  # run n iterations; returns this rank's timed seconds
    value: Callable[[float], float]  # seconds per iteration -> the reported figure
    unit: str
    active: frozenset[int] | None = None  # None: every rank takes part
    extra: Callable[[float], dict] = field(default=lambda t: {})


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
                             **_measure(comm, kernel, opts)})
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


# -- measuring --------------------------------------------------------------------------------
def _max(comm, x: float) -> float:
    out = np.empty(1)
    comm.Allreduce(np.array([x]), out, op=MPI.MAX)
    return float(out[0])


def _gentle_wait(reqs: list) -> None:
    """Wait without sitting in a blocking MPI call (Rule 2)."""
    while not MPI.Request.Testall(reqs):
        time.sleep(_POLL_SLEEP)


def _settle(comm) -> None:
    """Synchronise without spinning: every rank reports to rank 0, which then releases them all."""
    rank, size = comm.Get_rank(), comm.Get_size()
    if rank == 0:
        bufs = [np.empty(1, np.uint8) for _ in range(1, size)]
        _gentle_wait([comm.Irecv(b, r, T_DONE) for r, b in enumerate(bufs, 1)])
        token = np.zeros(1, np.uint8)
        _gentle_wait([comm.Isend(token, r, T_GO) for r in range(1, size)])
    else:
        buf = np.zeros(1, np.uint8)
        _gentle_wait([comm.Isend(buf, 0, T_DONE), comm.Irecv(np.empty(1, np.uint8), 0, T_GO)])


def _measure(comm, k: Kernel, opts: Options) -> dict:
    """Warm up, calibrate the iteration count, then time `opts.reps` repetitions (Rule 3)."""
    partial = k.active is not None and len(k.active) < comm.Get_size()

    def batch(n: int) -> float:
        comm.Barrier()
        t = k.step(n)
        if partial:
            _settle(comm)
        return t

    per_rep = opts.target_ms / 1e3 / opts.reps * opts.iters_scale
    max_iters = max(1, round(opts.max_iters * min(opts.iters_scale, 1.0)))
    # Batches of 1, 4, 16 ... iterations until one lasts an eighth of a repetition, and for at
    # least two repetitions' worth of time in all: the warm-up. The first batch (cold: page
    # faults, connection set-up) never sets the count, and the minimum keeps a bridged job's
    # slow first calls (milliseconds each) from setting it to 1.
    n, first, spent = 1, True, 0.0
    while True:
        t0 = MPI.Wtime()
        batch(n)
        wall = _max(comm, MPI.Wtime() - t0)
        spent += wall
        if not first and spent >= 2 * per_rep and (wall >= per_rep / 8 or n >= max_iters):
            break
        first = False
        if wall < per_rep / 8:
            n = min(4 * n, max_iters)
    iters = int(min(max(per_rep / (wall / n), 1), max_iters))
    times = [_max(comm, batch(iters)) / iters for _ in range(opts.reps)]
    mid = statistics.median(times)
    return {"unit": k.unit, "value": k.value(mid), "samples": [k.value(t) for t in times],
            "iters": iters, **k.extra(mid)}


def _usec(t: float) -> float:
    return t * 1e6


# -- point-to-point ---------------------------------------------------------------------------
def _pair(comm) -> tuple[int, int]:
    # Bridged, the first and the last virtual rank are in different clusters.
    return 0, comm.Get_size() - 1


def latency(comm, size: int, opts: Options) -> Kernel:
    """Ping-pong between the first and the last rank; one-way time in microseconds."""
    a, b = _pair(comm)
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

    return Kernel({"size": size}, step, lambda t: _usec(t / 2), "us", frozenset({a, b}))


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
    a, b = _pair(comm)
    return Kernel({"size": size}, _stream(comm, a, b, size),
                  lambda t: size * WINDOW / t / 1e6, "MB/s", frozenset({a, b}))


def bibw(comm, size: int, opts: Options) -> Kernel:
    """Bidirectional bandwidth between the first and the last rank (both ways summed), MB/s."""
    a, b = _pair(comm)
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

    return Kernel({"size": 0}, step, _usec, "us")


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

    return Kernel({"size": nbytes}, step, _usec, "us")


def bcast(comm, size: int, opts: Options) -> Kernel:
    """Bcast of `size` bytes from rank 0."""
    buf = np.ones(size, np.uint8)
    return _timed_calls(comm, size, lambda: comm.Bcast(buf, root=0))


def _floats(size: int) -> int:
    # Reductions need a real type: float32 as OSU, so sizes below 4 B do not exist.
    return max(1, size // 4)


def reduce(comm, size: int, opts: Options) -> Kernel:
    """Reduce (SUM) of float32 elements to rank 0."""
    sbuf = np.ones(_floats(size), np.float32)
    rbuf = np.empty_like(sbuf) if comm.Get_rank() == 0 else None
    return _timed_calls(comm, sbuf.nbytes, lambda: comm.Reduce(sbuf, rbuf, op=MPI.SUM, root=0))


def allreduce(comm, size: int, opts: Options) -> Kernel:
    """Allreduce (SUM) of float32 elements."""
    sbuf = np.ones(_floats(size), np.float32)
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
    return Kernel({"size": size, "clients": len(clients)}, step, _usec, "us",
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
    """Message rate of `k` concurrent pairs, low rank i -> high rank i (osu_mbw_mr): windows
    of 64 non-blocking sends, then an ack; messages per second, all pairs together."""
    kernel = pairs(comm, size, opts, k)
    kernel.value = lambda t: k * WINDOW / t
    kernel.unit = "msg/s"
    return kernel


# -- overlap of non-blocking calls with computation (osu_iallreduce and friends) ---------------
def _starter(comm, name: str, size: int) -> tuple[Callable[[], object] | None, frozenset | None]:
    """A function that starts one `name` call of `size` bytes and returns its request (None
    on a rank that takes no part), and the ranks that take part (None: all)."""
    rank, n = comm.Get_rank(), comm.Get_size()
    if name == "isendrecv":
        a, b = _pair(comm)
        buf = np.ones(size, np.uint8)
        start = {a: lambda: comm.Isend(buf, b, T_DATA),
                 b: lambda: comm.Irecv(buf, a, T_DATA)}.get(rank)
        return start, frozenset({a, b})
    if name == "ibcast":
        buf = np.ones(size, np.uint8)
        return (lambda: comm.Ibcast(buf, root=0)), None
    if name in ("ireduce", "iallreduce"):
        sbuf = np.ones(_floats(size), np.float32)
        rbuf = np.empty_like(sbuf)
        if name == "iallreduce":
            return (lambda: comm.Iallreduce(sbuf, rbuf, op=MPI.SUM)), None
        return (lambda: comm.Ireduce(sbuf, rbuf if rank == 0 else None, op=MPI.SUM,
                                     root=0)), None
    if name == "ialltoall":
        sbuf, rbuf = np.ones(size * n, np.uint8), np.empty(size * n, np.uint8)
        return (lambda: comm.Ialltoall(sbuf, rbuf)), None
    sbuf = np.ones(size, np.uint8)  # igather
    rbuf = np.empty(size * n, np.uint8) if rank == 0 else None
    return (lambda: comm.Igather(sbuf, rbuf, root=0)), None


def _computation(kind: str) -> Callable[[float], None]:
    """Computation lasting about `seconds`: a sleep, or numpy arithmetic that keeps a core
    busy (numpy leaves the interpreter's lock free while it works, as compiled code would)."""
    if kind == "sleep":
        return lambda seconds: time.sleep(seconds) if seconds > 0 else None
    work = np.ones(16384)

    def busy(seconds: float) -> None:
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            np.multiply(work, 1.0000001, out=work)
    return busy


def _overlap_pct(overall: float, compute: float, pure: float) -> float:
    # OSU's formula, kept within 0-100: noise can take it a little beyond either end
    return min(100.0, max(0.0, 100.0 - 100.0 * (overall - compute) / pure))


def overlap(comm, name: str, size: int, opts: Options) -> dict:
    """Overlap of one non-blocking call with computation, as OSU measures it: the call alone
    (pure), computation as long as that alone (compute), then start, compute, wait
    (overall); overlap = max(0, 100 - 100 x (overall - compute) / pure)."""
    start, active = _starter(comm, name, size)
    compute = _computation(opts.compute)
    spent = [0.0]  # this rank's computation in the last batch

    def pure(n: int) -> float:
        t0 = MPI.Wtime()
        if start is not None:
            for _ in range(n):
                start().Wait()
        return MPI.Wtime() - t0

    alone = _measure(comm, Kernel({}, pure, _usec, "us", active), opts)
    t_pure = alone["value"] * 1e-6  # max over ranks: what every rank computes for

    def overall(n: int) -> float:
        spent[0] = 0.0
        t0 = MPI.Wtime()
        if start is not None:
            for _ in range(n):
                req = start()
                c0 = MPI.Wtime()
                compute(t_pure)
                spent[0] += MPI.Wtime() - c0
                req.Wait()
        return MPI.Wtime() - t0

    both = _measure(comm, Kernel({}, overall, _usec, "us", active), opts)
    t_compute = _max(comm, spent[0] / both["iters"])
    t_overall = both["value"] * 1e-6
    value = _overlap_pct(t_overall, t_compute, t_pure)
    return {"unit": "%", "value": value, "pure_us": alone["value"],
            "overall_us": both["value"], "compute_us": _usec(t_compute),
            "iters": both["iters"], "samples": [
                _overlap_pct(t * 1e-6, t_compute, t_pure)
                for t in both["samples"]]}


# -- LogGP: parametrised round trips (Netgauge; fitted by bench.loggp) ---------------------------
PRTT_N = 16  # messages per parametrised round trip, Netgauge's choice


def prtt(comm, size: int, opts: Options) -> dict:
    """PRTT(1, 0, s), PRTT(n, 0, s), PRTT(n, d, s) with d above the gap, and the server's
    receive time per message once they are all there (o_r), in microseconds. Each is timed as
    the mean of back-to-back rounds, as `latency` times its ping-pongs (a single round trip,
    tens of microseconds bridged, is mostly scheduling noise on a shared core), and reported as
    the median of `opts.reps` repetitions (Rule 3)."""
    a, b = _pair(comm)
    rank, n = comm.Get_rank(), PRTT_N
    buf = np.ones(size, np.uint8)
    t_go = np.zeros(1, np.uint8)

    def rounds(count: int, delay: float) -> Callable[[int], float]:
        # client: count sends `delay` apart, then the answer (s bytes); server: count
        # receives, then the answer. A delay yields the core while it waits (a spinning client
        # takes the core the forwarder needs; a sleeping one lets its core idle, and waking it
        # costs tens of microseconds on a VM); it may last longer than asked, so each one is
        # timed and the round reported as if it had lasted exactly `delay`.
        def step(k: int) -> float:
            t0 = time.perf_counter()
            if rank == a:
                for _ in range(k):
                    for i in range(count):
                        comm.Send(buf, b, T_DATA)
                        if delay and i < count - 1:
                            t1 = time.perf_counter()
                            while time.perf_counter() - t1 < delay:
                                os.sched_yield()
                            t0 += time.perf_counter() - t1 - delay
                    comm.Recv(buf, b, T_ACK)
            elif rank == b:
                for _ in range(k):
                    for _ in range(count):
                        comm.Recv(buf, a, T_DATA)
                    comm.Send(buf, a, T_ACK)
            return time.perf_counter() - t0
        return step

    def receive_overhead(wait: float) -> Callable[[int], float]:
        # the client sends n at once; the server lets them all arrive, then times n receives
        def step(k: int) -> float:
            spent = 0.0
            for _ in range(k):
                if rank == a:
                    MPI.Request.Waitall([comm.Isend(buf, b, T_DATA) for _ in range(n)])
                    comm.Recv(t_go, b, T_ACK)
                elif rank == b:
                    time.sleep(wait)
                    t0 = time.perf_counter()
                    for _ in range(n):
                        comm.Recv(buf, a, T_DATA)
                    spent += time.perf_counter() - t0
                    comm.Send(t_go, a, T_ACK)
            return spent
        return step

    def timed(step: Callable[[int], float], per: int) -> tuple[float, int]:
        kernel = Kernel({"size": size}, step, lambda t: t / per, "s", frozenset({a, b}))
        got = _measure(comm, kernel, opts)
        return got["value"], got["iters"]

    one, iters = timed(rounds(1, 0.0), 1)
    many, _ = timed(rounds(n, 0.0), 1)
    gap = max((many - one) / (n - 1), 0.0)
    delay = 1.5 * gap + 2e-6  # longer than each further message costs back to back
    delayed, _ = timed(rounds(n, delay), 1)
    o_r, _ = timed(receive_overhead(min(0.2, 2 * many + 1e-3)), n)
    us = 1e6
    return {"unit": "us", "value": one * us / 2, "prtt1": one * us, "prttn": many * us,
            "prttd": delayed * us, "o_r": o_r * us, "n": n, "d": delay * us, "iters": iters}


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
