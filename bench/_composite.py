"""Measurements made of several timed kernels: overlap with computation, LogGP round trips.

`overlap` times a non-blocking call alone, then with computation between its start and its
wait (osu_i*); `prtt` times Netgauge's parametrised round trips, which bench.loggp fits.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

import numpy as np

from mmpi import MPI

from ._timing import T_ACK, T_DATA, Kernel, Options, floats, max_over, measure, pair, usec


# -- overlap of non-blocking calls with computation (osu_iallreduce and friends) ---------------
def _starter(comm, name: str, size: int) -> tuple[Callable[[], object] | None, frozenset | None]:
    """A starter of one `name` call of `size` bytes, and the ranks that take part.

    The function returns the call's request (None on a rank that takes no part); the ranks
    are None for all.
    """
    rank, n = comm.Get_rank(), comm.Get_size()
    if name == "isendrecv":
        a, b = pair(comm)
        buf = np.ones(size, np.uint8)
        start = {a: lambda: comm.Isend(buf, b, T_DATA),
                 b: lambda: comm.Irecv(buf, a, T_DATA)}.get(rank)
        return start, frozenset({a, b})
    if name == "ibcast":
        buf = np.ones(size, np.uint8)
        return (lambda: comm.Ibcast(buf, root=0)), None
    if name in ("ireduce", "iallreduce"):
        sbuf = np.ones(floats(size), np.float32)
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
    """Computation lasting about `seconds`: a sleep, or numpy arithmetic that keeps a core busy.

    numpy leaves the interpreter's lock free while it works, as compiled code would.
    """
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
    """Overlap of one non-blocking call with computation, as OSU measures it.

    The call alone (pure), computation as long as that alone (compute), then start, compute,
    wait (overall); overlap = max(0, 100 - 100 x (overall - compute) / pure).
    """
    start, active = _starter(comm, name, size)
    compute = _computation(opts.compute)
    spent = [0.0]  # this rank's computation in the last batch

    def pure(n: int) -> float:
        t0 = MPI.Wtime()
        if start is not None:
            for _ in range(n):
                start().Wait()
        return MPI.Wtime() - t0

    alone = measure(comm, Kernel({}, pure, usec, "us", active), opts)
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

    both = measure(comm, Kernel({}, overall, usec, "us", active), opts)
    t_compute = max_over(comm, spent[0] / both["iters"])
    t_overall = both["value"] * 1e-6
    value = _overlap_pct(t_overall, t_compute, t_pure)
    return {"unit": "%", "value": value, "pure_us": alone["value"],
            "overall_us": both["value"], "compute_us": usec(t_compute),
            "iters": both["iters"], "samples": [
                _overlap_pct(t * 1e-6, t_compute, t_pure)
                for t in both["samples"]]}


# -- LogGP: parametrised round trips (Netgauge; fitted by bench.loggp) ---------------------------
PRTT_N = 16  # messages per parametrised round trip, Netgauge's choice


def prtt(comm, size: int, opts: Options) -> dict:
    """PRTT(1, 0, s), PRTT(n, 0, s), PRTT(n, d, s) and o_r, in microseconds.

    d is above the gap; o_r is the server's receive time per message once they are all there.
    Each is timed as the mean of back-to-back rounds, as `latency` times its ping-pongs (a
    single round trip, tens of microseconds bridged, is mostly scheduling noise on a shared
    core), and reported as the median of `opts.reps` repetitions (bench._timing Rule 3).
    """
    a, b = pair(comm)
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
        got = measure(comm, kernel, opts)
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
