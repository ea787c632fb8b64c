"""EP: the NPB 3.4 "embarrassingly parallel" kernel — Gaussian pairs by acceptance-rejection."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mmpi import MPI

from . import _npb
from ._npb import Check, Result, Timer, World

# log2 of the pairs in one batch (NPB's mk); it only sets the batch size, not the answer.
MK = 16
NK = 1 << MK
NQ = 10  # number of square annuli counted
SEED = 271828183
EPSILON = 1.0e-8


@dataclass(frozen=True)
class EPClass:
    """One NPB problem class: 2^m pairs, and the NPB 3.4 reference sums and count."""

    m: int
    sx: float
    sy: float
    gc: float


CLASSES = {
    "S": EPClass(24, 1.051299420395306e07, 1.051517131857535e07, 13176389.0),
    "W": EPClass(25, 2.102505525182392e07, 2.103162209578822e07, 26354769.0),
    "A": EPClass(28, 1.682235632304711e08, 1.682195123368299e08, 210832767.0),
    "B": EPClass(30, 6.728927543423024e08, 6.728951822504275e08, 843345606.0),
    "C": EPClass(32, 2.691444083862931e09, 2.691519118724585e09, 3373275903.0),
}


@dataclass
class Setup:
    """Per-rank state built before the clock starts."""

    first_batch: int
    batches: int
    stream: _npb.Stream
    an: int  # a^(2*NK): jumps the stream from one batch to the next


def setup(world: World, cls: EPClass) -> Setup:
    """Split the 2^(m-MK) batches over the ranks as NPB does (the first ranks take one extra)."""
    total = 1 << (cls.m - MK)
    base, large = divmod(total, world.size)
    if base == 0:
        raise _npb.unsupported_ranks(world, "ep", f"at most {total} ranks for this class")
    if world.rank < large:
        batches = base + 1
        first = world.rank * batches
    else:
        batches = base
        first = large * (base + 1) + (world.rank - large) * base
    stream = _npb.Stream(2 * NK, _npb.A_DEFAULT)
    return Setup(first, batches, stream, _npb.pow46(_npb.A_DEFAULT, 2 * NK))


def kernel(world: World, st: Setup) -> tuple[float, float, np.ndarray]:
    """Generate this rank's batches, tally the pairs, and sum over all ranks: (sx, sy, q)."""
    sx = 0.0
    sy = 0.0
    q = np.zeros(NQ, dtype=np.int64)
    x = np.empty(2 * NK, dtype=np.float64)
    for kk in range(st.first_batch, st.first_batch + st.batches):
        # Batch kk starts 2*NK*kk numbers into the stream seeded with SEED.
        seed = (SEED * pow(st.an, kk, _npb.MOD46)) & _npb.MASK46
        st.stream.fill(seed, out=x)
        x *= 2.0
        x -= 1.0
        x1 = x[0::2]
        x2 = x[1::2]
        t1 = x1 * x1
        t1 += x2 * x2
        keep = t1 <= 1.0
        t1 = t1[keep]
        t2 = np.log(t1)
        t2 *= -2.0
        t2 /= t1
        np.sqrt(t2, out=t2)
        t3 = np.abs(x1[keep] * t2)
        t4 = np.abs(x2[keep] * t2)
        annulus = np.maximum(t3, t4).astype(np.intp)
        q += np.bincount(annulus, minlength=NQ)[:NQ]
        sx += float(t3.sum())
        sy += float(t4.sum())

    # Three reductions, as the MPI original does them.
    comm = world.comm
    out = np.empty(1)
    comm.Allreduce([np.array([sx]), MPI.DOUBLE], [out, MPI.DOUBLE], op=MPI.SUM)
    sx = float(out[0])
    comm.Allreduce([np.array([sy]), MPI.DOUBLE], [out, MPI.DOUBLE], op=MPI.SUM)
    sy = float(out[0])
    qd = q.astype(np.float64)
    qsum = np.empty(NQ)
    comm.Allreduce([qd, MPI.DOUBLE], [qsum, MPI.DOUBLE], op=MPI.SUM)
    return sx, sy, qsum


def run(world: World, klass: str) -> Result:
    """Run EP of class `klass` on `world`; the result is complete on rank 0."""
    cls = CLASSES[klass]
    pairs = 1 << cls.m
    _npb.header(
        world,
        "EP",
        f" Number of random numbers generated: {2 * pairs:>15}  (class {klass})",
        f" Total number of processes:          {world.size:>15}",
    )
    st = setup(world, cls)

    timer = Timer()
    world.comm.Barrier()
    timer.start()
    sx, sy, q = kernel(world, st)
    elapsed = timer.stop()

    tmax = np.empty(1)
    world.comm.Allreduce([np.array([elapsed]), MPI.DOUBLE], [tmax, MPI.DOUBLE], op=MPI.MAX)
    seconds = float(tmax[0])
    gc = float(q.sum())
    _npb.say(
        world,
        " EP Benchmark Results:",
        f" Time = {seconds:10.3f}",
        f" N = 2^{cls.m:5d}",
        f" No. Gaussian Pairs = {gc:15.0f}",
        f" Sums = {sx:25.15e} {sy:25.15e}",
        " Counts:",
        *(f" {i:3d} {c:15.0f}" for i, c in enumerate(q)),
    )
    checks = [
        Check("sum of |X| (sx)", sx, cls.sx, EPSILON),
        Check("sum of |Y| (sy)", sy, cls.sy, EPSILON),
        Check("Gaussian pairs (gc)", gc, cls.gc, EPSILON),
    ]
    return Result(
        name="EP",
        klass=klass,
        size=str(2 * pairs),
        iterations=0,
        seconds=seconds,
        mops=2.0 * pairs / seconds / 1e6 if seconds > 0 else 0.0,
        optype="Random numbers generated",
        checks=checks,
        active=world.size,
    )
