"""How mmpi-bench times a point: the options, a kernel, warm-up, calibration, repetitions.

Shared by the worker's kernels (bench.worker) and the measurements made of several kernels
(bench._composite); pure MPI, no output.

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

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from mmpi import MPI

WINDOW = 64  # messages in flight per bandwidth iteration, as osu_bw
T_DATA, T_ACK, T_DONE, T_GO = 100, 102, 103, 104
POLL_SLEEP = 2e-4


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


def max_over(comm, x: float) -> float:
    """The largest `x` over the ranks of `comm`."""
    out = np.empty(1)
    comm.Allreduce(np.array([x]), out, op=MPI.MAX)
    return float(out[0])


def gentle_wait(reqs: list) -> None:
    """Wait without sitting in a blocking MPI call (Rule 2)."""
    while not MPI.Request.Testall(reqs):
        time.sleep(POLL_SLEEP)


def settle(comm) -> None:
    """Synchronise without spinning: every rank reports to rank 0, which then releases them all."""
    rank, size = comm.Get_rank(), comm.Get_size()
    if rank == 0:
        bufs = [np.empty(1, np.uint8) for _ in range(1, size)]
        gentle_wait([comm.Irecv(b, r, T_DONE) for r, b in enumerate(bufs, 1)])
        token = np.zeros(1, np.uint8)
        gentle_wait([comm.Isend(token, r, T_GO) for r in range(1, size)])
    else:
        buf = np.zeros(1, np.uint8)
        gentle_wait([comm.Isend(buf, 0, T_DONE), comm.Irecv(np.empty(1, np.uint8), 0, T_GO)])


def measure(comm, k: Kernel, opts: Options) -> dict:
    """Warm up, calibrate the iteration count, then time `opts.reps` repetitions (Rule 3)."""
    partial = k.active is not None and len(k.active) < comm.Get_size()

    def batch(n: int) -> float:
        comm.Barrier()
        t = k.step(n)
        if partial:
            settle(comm)
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
        wall = max_over(comm, MPI.Wtime() - t0)
        spent += wall
        if not first and spent >= 2 * per_rep and (wall >= per_rep / 8 or n >= max_iters):
            break
        first = False
        if wall < per_rep / 8:
            n = min(4 * n, max_iters)
    iters = int(min(max(per_rep / (wall / n), 1), max_iters))
    times = [max_over(comm, batch(iters)) / iters for _ in range(opts.reps)]
    mid = statistics.median(times)
    return {"unit": k.unit, "value": k.value(mid), "samples": [k.value(t) for t in times],
            "iters": iters, **k.extra(mid)}


def usec(t: float) -> float:
    """Seconds in microseconds."""
    return t * 1e6


def pair(comm) -> tuple[int, int]:
    """The two ranks of the point-to-point benchmarks: bridged, one in each cluster."""
    return 0, comm.Get_size() - 1


def floats(size: int) -> int:
    """float32 elements of a reduction of `size` bytes (OSU's type: no sizes below 4 B)."""
    return max(1, size // 4)
