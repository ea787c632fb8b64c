"""What mmpi-bench can measure: names, units, default sizes, which job layout each one needs.

Pure data, shared by the driver (planning), the report (titles, units) and the tests; the MPI
worker does not need it (it is told exactly what to run on its command line).
"""

from __future__ import annotations

from dataclasses import dataclass

# The worker prefixes every JSON line with this; mmpi-run puts its own prefix in front of it.
MARKER = "MMPI-BENCH"

KiB, MiB = 1 << 10, 1 << 20

# OSU's defaults: powers of two, 1 B .. 4 MiB for point-to-point, 1 B .. 1 MiB for collectives.
P2P_SIZES = tuple(1 << i for i in range(23))
COLL_SIZES = tuple(1 << i for i in range(21))
# Congestion patterns cost n messages per round: every other power of two is enough of a curve.
PATTERN_SIZES = tuple(1 << i for i in range(0, 21, 2))
PAIR_SIZES = (KiB, 64 * KiB, MiB, 4 * MiB)
RATE_SIZES = (8, 64, 512, 4 * KiB)  # osu_mbw_mr's small messages
OVERLAP_SIZES = (KiB, 64 * KiB, MiB)  # a small, a mid-size and a large non-blocking call
# The non-blocking calls whose overlap with computation is measured (osu_i* style).
OVERLAP_CALLS = ("ibcast", "ireduce", "iallreduce", "ialltoall", "igather", "isendrecv")


def higher_is_better(unit: str) -> bool:
    """Whether a figure in `unit` is a rate (bandwidth, messages per second)."""
    return unit in ("MB/s", "msg/s", "%")


@dataclass(frozen=True)
class Bench:
    """One benchmark as the driver and the report see it."""

    name: str
    group: str  # "p2p": 2 ranks (bridged 1+1); "world", "overlap": low+high ranks; "pairs": N+N
    unit: str  # "us" (time, lower is better), "MB/s", "msg/s" or "%" (higher is better)
    sizes: tuple[int, ...]  # default message sizes in bytes; () for a size-less benchmark
    title: str
    min_size: int = 1  # smaller requested sizes are skipped (reductions work on float32)

    @property
    def is_bandwidth(self) -> bool:
        """True when higher figures are better."""
        return higher_is_better(self.unit)

    def plan_sizes(self, requested: tuple[int, ...] | None) -> tuple[int, ...]:
        """Return the sizes to run: the requested ones (or the defaults) this one can do."""
        if not self.sizes:
            return ()
        chosen = self.sizes if requested is None else requested
        return tuple(s for s in chosen if s >= self.min_size)


_OVERLAP = (": overlap with computation between start and wait, % (osu_i*: 100 - 100 x "
            "(overall - compute) / pure, at least 0)")

BENCHES: dict[str, Bench] = {
    b.name: b
    for b in (
        Bench("latency", "p2p", "us", P2P_SIZES,
              "ping-pong latency, one way, vrank 0 <-> last vrank"),
        Bench("bw", "p2p", "MB/s", P2P_SIZES,
              "bandwidth, windows of 64 non-blocking sends then an ack (osu_bw)"),
        Bench("bibw", "p2p", "MB/s", P2P_SIZES,
              "bidirectional bandwidth, windows of 64 each way (osu_bibw)"),
        Bench("barrier", "world", "us", (), "Barrier, time per call"),
        Bench("bcast", "world", "us", COLL_SIZES, "Bcast from rank 0, time per call"),
        Bench("reduce", "world", "us", COLL_SIZES, "Reduce (float32 SUM) to rank 0, time per call",
              min_size=4),
        Bench("allreduce", "world", "us", COLL_SIZES, "Allreduce (float32 SUM), time per call",
              min_size=4),
        Bench("alltoall", "world", "us", COLL_SIZES, "Alltoall, size per rank pair, time per call"),
        Bench("alltoallv", "world", "us", COLL_SIZES,
              "Alltoallv, equal counts, size per rank pair, time per call"),
        Bench("gather", "world", "us", COLL_SIZES,
              "Gather to rank 0, size per rank, time per call"),
        Bench("allgather", "world", "us", COLL_SIZES, "Allgather, size per rank, time per call"),
        Bench("1:n", "world", "us", PATTERN_SIZES,
              "Netgauge 1:n, vrank 0 sends to every high rank, each acks; time per round"),
        Bench("n:1", "world", "us", PATTERN_SIZES,
              "Netgauge n:1, every high rank sends to vrank 0, which acks; time per round"),
        Bench("pairs", "pairs", "MB/s", PAIR_SIZES,
              "concurrent cross-cluster pairs (low i -> high i, osu_bw each), aggregate bandwidth"),
        Bench("loggp", "p2p", "us", P2P_SIZES,
              "LogGP parameters from parametrised round trips (Netgauge): PRTT(1,0,s)/2 per "
              "size; the fitted L, o_s, o_r, g, G per path and protocol region below"),
        Bench("rate", "pairs", "msg/s", RATE_SIZES,
              "message rate of concurrent cross-cluster pairs (low i -> high i), windows of 64 "
              "sends then an ack (osu_mbw_mr), all pairs together"),
        *(Bench(name, "overlap", "%", OVERLAP_SIZES, title + _OVERLAP, min_size=4)
          for name, title in (
              ("ibcast", "Ibcast from rank 0"),
              ("ireduce", "Ireduce (float32 SUM) to rank 0"),
              ("iallreduce", "Iallreduce (float32 SUM)"),
              ("ialltoall", "Ialltoall, size per rank pair"),
              ("igather", "Igather to rank 0, size per rank"),
              ("isendrecv", "Isend from vrank 0 / Irecv on the last vrank"))),
    )
}

GROUPS = ("p2p", "world", "pairs", "overlap")
