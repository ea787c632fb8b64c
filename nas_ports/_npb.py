"""Machinery shared by the NPB ports: the randlc/vranlc generator, timers, rank checks, report."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np

NPB_VERSION = "3.4 (Python/numpy port)"

# The NPB generator: x_{k+1} = a * x_k mod 2^46, returning x_{k+1} * 2^-46.  NPB evaluates it in
# double precision by splitting the operands into 23-bit halves; every partial product it forms
# is exact, so doing the same thing in integers gives bit-identical numbers.
MOD46 = 1 << 46
MASK46 = MOD46 - 1
MASK23 = (1 << 23) - 1
R46 = 2.0**-46
A_DEFAULT = 1220703125  # 5**13, the multiplier every NPB kernel uses
SEED_DEFAULT = 314159265


def _as_seed(x: int | float) -> int:
    """Return an NPB seed (a double holding an integer below 2^46 in the Fortran) as an int."""
    seed = int(x)
    if seed != x or not 0 <= seed < MOD46:
        raise ValueError(f"an NPB seed must be an integer in [0, 2^46), got {x!r}")
    return seed


def randlc(x: int | float, a: int | float = A_DEFAULT) -> tuple[int, float]:
    """Advance seed `x` once by multiplier `a`; return (new seed, new seed * 2^-46)."""
    x = (_as_seed(a) * _as_seed(x)) & MASK46
    return x, x * R46


def pow46(a: int | float, n: int) -> int:
    """Return a^n mod 2^46: the multiplier that jumps a stream n steps ahead."""
    return pow(_as_seed(a), n, MOD46)


@lru_cache(maxsize=16)
def _power_table(a: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """a^1 .. a^n mod 2^46 split into (high, low) 23-bit halves, as int64 arrays."""
    powers = np.empty(n, dtype=np.int64)
    if n:
        powers[0] = a
    done = 1
    # Doubling: once a^1..a^k are known, a^(k+1)..a^(2k) are those times a^k.
    while done < n:
        step = min(done, n - done)
        powers[done : done + step] = _mulmod46(powers[:step], pow(a, done, MOD46))
        done += step
    high = powers >> 23
    low = powers & MASK23
    high.setflags(write=False)
    low.setflags(write=False)
    return high, low


def _mulmod46(v: np.ndarray, s: int) -> np.ndarray:
    """Elementwise v * s mod 2^46 for int64 `v` below 2^46, exactly, without overflowing."""
    sh, sl = s >> 23, s & MASK23
    vh, vl = v >> 23, v & MASK23
    cross = (vh * sl + vl * sh) & MASK23
    return ((cross << 23) + vl * sl) & MASK46


class Stream:
    """vranlc with the jump-ahead table kept, for kernels that draw many blocks of one length."""

    def __init__(self, n: int, a: int | float = A_DEFAULT) -> None:
        self.n = n
        self.a = _as_seed(a)
        self._high, self._low = _power_table(self.a, n)
        self._work = np.empty(n, dtype=np.int64)
        self._tmp = np.empty(n, dtype=np.int64)
        self.a_n = pow(self.a, n, MOD46)

    def fill(self, x: int | float, out: np.ndarray | None = None) -> tuple[int, np.ndarray]:
        """Draw `n` numbers from seed `x`; return (seed after them, the numbers)."""
        x = _as_seed(x)
        xh, xl = x >> 23, x & MASK23
        w, t = self._work, self._tmp
        # w = ((xh*low + xl*high) mod 2^23) * 2^23 + xl*low, mod 2^46: the split product.
        np.multiply(self._low, xh, out=w)
        np.multiply(self._high, xl, out=t)
        w += t
        w &= MASK23
        w <<= 23
        np.multiply(self._low, xl, out=t)
        w += t
        w &= MASK46
        if out is None:
            out = np.empty(self.n, dtype=np.float64)
        np.multiply(w, R46, out=out)
        return (self.a_n * x) & MASK46, out


def vranlc(n: int, x: int | float, a: int | float = A_DEFAULT) -> tuple[int, np.ndarray]:
    """Draw `n` numbers from seed `x` by multiplier `a`; return (new seed, the numbers)."""
    return Stream(n, a).fill(x)


# --------------------------------------------------------------------------------------------
# Ranks and the bridged layout


@dataclass(frozen=True)
class World:
    """The communicator a kernel runs on, and how its ranks sit on the two clusters."""

    comm: Any
    rank: int
    size: int
    bridged: bool
    low_size: int | None = None
    high_size: int | None = None

    @classmethod
    def from_mpi(cls, mpi: Any) -> World:
        """Describe `mpi.COMM_WORLD`, bridged (mmpi-run) or native (plain mpiexec)."""
        comm = mpi.COMM_WORLD
        bridged = bool(getattr(mpi, "BRIDGED", False))
        layout = getattr(comm, "layout", None) if bridged else None
        return cls(
            comm=comm,
            rank=comm.Get_rank(),
            size=comm.Get_size(),
            bridged=bridged,
            low_size=getattr(layout, "low_size", None),
            high_size=getattr(layout, "high_size", None),
        )

    def placement(self) -> str:
        """Say how the ranks are split between the clusters."""
        if not self.bridged:
            return "native MPI (not bridged), one cluster"
        if self.low_size is None or self.high_size is None:
            return "bridged, layout unknown"
        low = _span(0, self.low_size)
        high = _span(self.low_size, self.low_size + self.high_size)
        return (
            f"bridged: {self.low_size} on the low cluster ({low}), "
            f"{self.high_size} on the high cluster ({high})"
        )


def _span(first: int, end: int) -> str:
    return f"rank {first}" if end - first == 1 else f"ranks {first}-{end - 1}"


def unsupported_ranks(world: World, kernel: str, allowed: str) -> SystemExit:
    """Build the exit for a rank count the kernel cannot use (every rank raises it)."""
    if world.rank == 0:
        return SystemExit(
            f"nas_ports {kernel}: cannot run on {world.size} MPI rank(s); {kernel.upper()} "
            f"needs {allowed}."
        )
    # One message is enough: the other ranks leave quietly with the same status.
    return SystemExit(1)


def is_power_of_two(n: int) -> bool:
    """Tell whether n is 1, 2, 4, 8, ..."""
    return n >= 1 and n & (n - 1) == 0


def ilog2(n: int) -> int:
    """log2 of a power of two."""
    return n.bit_length() - 1


# --------------------------------------------------------------------------------------------
# Timing, verification and the report


class Timer:
    """A stopwatch that accumulates, like NPB's timer_start/timer_stop/timer_read."""

    def __init__(self) -> None:
        self.elapsed = 0.0
        self._t0: float | None = None

    def start(self) -> None:
        """Start (or restart) counting."""
        self._t0 = time.perf_counter()

    def stop(self) -> float:
        """Stop counting; return the total so far."""
        if self._t0 is not None:
            self.elapsed += time.perf_counter() - self._t0
            self._t0 = None
        return self.elapsed


@dataclass(frozen=True)
class Check:
    """One verified quantity: the value computed, the NPB reference and the tolerance."""

    label: str
    value: float
    reference: float
    epsilon: float

    @property
    def error(self) -> float:
        """Relative error against the reference (NaN stays NaN)."""
        if self.reference == 0:
            return abs(self.value)
        return abs((self.value - self.reference) / self.reference)

    @property
    def ok(self) -> bool:
        """Within tolerance; a NaN never is."""
        err = self.error
        return not math.isnan(err) and err <= self.epsilon


@dataclass
class Result:
    """What a kernel hands back for the report (meaningful on rank 0)."""

    name: str
    klass: str
    size: str
    iterations: int
    seconds: float
    mops: float
    optype: str
    checks: list[Check]
    active: int
    notes: list[str] = field(default_factory=list)

    @property
    def verified(self) -> bool:
        """Tell whether there were checks and all of them are within tolerance."""
        return bool(self.checks) and all(c.ok for c in self.checks)


def format_report(result: Result, world: World) -> str:
    """Render the NPB-style report printed by rank 0."""
    r = result
    lines = [
        "",
        f" {r.name} Benchmark Completed.",
        f" Class           = {r.klass:>24}",
        f" Size            = {r.size:>24}",
        f" Iterations      = {r.iterations:>24}",
        f" Time in seconds = {r.seconds:>24.2f}",
        f" Total processes = {world.size:>24}",
    ]
    if r.active != world.size:
        lines.append(f" Active processes= {r.active:>24}")
    lines += [
        f" Rank placement  = {world.placement()}",
        f" Mop/s total     = {r.mops:>24.2f}",
        f" Mop/s/process   = {r.mops / world.size:>24.2f}",
        f" Operation type  = {r.optype:>24}",
        f" Verification    = {'SUCCESSFUL' if r.verified else 'UNSUCCESSFUL':>24}",
        f" Version         = {NPB_VERSION:>24}",
        "",
        " Verification values:",
        f"   {'quantity':<28} {'computed':>22} {'reference':>22} {'rel. error':>10}",
    ]
    for c in r.checks:
        mark = "" if c.ok else "   <-- FAILED"
        lines.append(
            f"   {c.label:<28} {_number(c.value)} {_number(c.reference)} {c.error:>10.2e}{mark}"
        )
    if r.checks:
        lines.append(f"   tolerance (relative)         {r.checks[0].epsilon:.1e}")
    lines += [f" {note}" for note in r.notes]
    lines += ["", " VERIFICATION SUCCESSFUL" if r.verified else " VERIFICATION FAILED", ""]
    return "\n".join(lines)


def _number(v: float) -> str:
    """Format counts as integers, everything else in NPB's 13-digit E format."""
    if math.isfinite(v) and float(v).is_integer() and abs(v) < 1e15:
        return f"{int(v):>22d}"
    return f"{v:>22.13e}"


def say(world: World, *lines: str) -> None:
    """Print progress lines from rank 0 only, flushed so they interleave sensibly with MPI."""
    if world.rank == 0:
        print("\n".join(lines), flush=True)


def header(world: World, kernel: str, *lines: str) -> None:
    """Print the NPB banner and problem description from rank 0."""
    say(world, "", f" NAS Parallel Benchmarks 3.4 -- {kernel} Benchmark (Python port)", "", *lines)
