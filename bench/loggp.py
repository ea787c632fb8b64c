"""LogGP parameters from parametrised round trips, as Netgauge measures them. Pure: no MPI.

PRTT(n, d, s) is the time from a client's first send to the server's answer, when the client
sends n messages of s bytes with a delay of d between two sends and the server answers once
all n have arrived: no clock is shared. With one message, a round trip,

    PRTT(1, 0, s) = 2 (o_s + L + (s - 1) G + o_r);

back to back, each further message costs the larger of the send overhead and the gap,

    T(s) = (PRTT(n, 0, s) - PRTT(1, 0, s)) / (n - 1) = g + (s - 1) G    (g >= o_s);

with a delay d longer than that, each further message costs d + o_s:

    o_s = (PRTT(n, d, s) - PRTT(1, 0, s)) / (n - 1) - d.

o_r is timed where it happens: the server, once all n messages are surely there, times its n
receives. L is what is left of a round trip: L = PRTT(1, 0, s) / 2 - o_s - o_r - (s - 1) G.

g and G come from a least-squares line through T(s) over message sizes (weighted by relative
error, so that g, the value at one byte, is not lost under the large sizes); where the protocol
changes (eager to rendezvous, one chunk to several) the line breaks, and a new fit region
starts at the first size the current line does not explain (Netgauge's residual test).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

# A size belongs to the current region while every point of the region lies within this
# fraction of the region's fitted line.
REGION_TOLERANCE = 0.12
# A region has at least this many sizes (a line through two points has no residual to test).
MIN_REGION = 3


@dataclass(frozen=True)
class Point:
    """What one message size gave: times in microseconds, for n messages."""

    size: int
    prtt1: float  # PRTT(1, 0, s)
    prttn: float  # PRTT(n, 0, s)
    prttd: float  # PRTT(n, d, s)
    o_r: float  # the server's receive time per message, measured
    n: int
    d: float

    @property
    def gap(self) -> float:
        """T(s) = g + (s - 1) G: the time each further back-to-back message costs."""
        return (self.prttn - self.prtt1) / (self.n - 1)

    @property
    def o_s(self) -> float:
        return max(0.0, (self.prttd - self.prtt1) / (self.n - 1) - self.d)


@dataclass(frozen=True)
class Region:
    """The LogGP parameters of one protocol region (sizes `lo` .. `hi`)."""

    lo: int
    hi: int
    L: float
    o_s: float
    o_r: float
    g: float
    G: float  # microseconds per byte
    residual: float  # the fit's largest relative deviation

    def as_json(self, path: str) -> dict:
        """The region as `mmpi-bench --json` writes it (the residual goes elsewhere)."""
        return {"path": path, "from": self.lo, "to": self.hi, "L": self.L, "o_s": self.o_s,
                "o_r": self.o_r, "g": self.g, "G": self.G}

    def one_way(self, size: int) -> float:
        """The one-way time of a message of `size` bytes the parameters predict (us)."""
        return self.o_s + self.L + (size - 1) * self.G + self.o_r

    def bandwidth(self) -> float:
        """MB/s the gap per byte implies (bytes per microsecond)."""
        return 1.0 / self.G if self.G > 0 else float("inf")


def line(xs: Sequence[float], ys: Sequence[float],
         ws: Sequence[float] | None = None) -> tuple[float, float]:
    """Weighted least squares y = a + b x; (a, b). One point: a horizontal line through it."""
    n = len(xs)
    if n == 1:
        return ys[0], 0.0
    ws = [1.0] * n if ws is None else ws
    sw = sum(ws)
    mx = sum(w * x for w, x in zip(ws, xs, strict=True)) / sw
    my = sum(w * y for w, y in zip(ws, ys, strict=True)) / sw
    sxx = sum(w * (x - mx) ** 2 for w, x in zip(ws, xs, strict=True))
    if sxx == 0:
        return my, 0.0
    b = sum(w * (x - mx) * (y - my) for w, x, y in zip(ws, xs, ys, strict=True)) / sxx
    return my - b * mx, b


def _worst(xs, ys, a: float, b: float) -> float:
    return max(abs(y - (a + b * x)) / max(abs(a + b * x), 1e-9) for x, y in zip(xs, ys,
                                                                              strict=True))


def _fit_gap(points: Sequence[Point]) -> tuple[float, float, float]:
    """g, G and the largest relative residual of T(s) = g + (s - 1) G over `points`."""
    xs = [p.size - 1 for p in points]
    ys = [p.gap for p in points]
    # relative errors: sizes span 1 B to MiB, and a small size's point must count as much
    a, b = line(xs, ys, [1.0 / max(y * y, 1e-12) for y in ys])
    a, b = max(a, 0.0), max(b, 0.0)  # a gap or a cost per byte below zero is noise
    return a, b, _worst(xs, ys, a, b)


def regions(points: Sequence[Point], tolerance: float = REGION_TOLERANCE) -> list[Region]:
    """Split `points` (ascending sizes) into protocol regions and fit each one."""
    pts = sorted(points, key=lambda p: p.size)
    out: list[Region] = []
    start = 0
    while start < len(pts):
        end = min(start + MIN_REGION, len(pts))
        # grow the region while the line through it still explains every point
        while end < len(pts) and _fit_gap(pts[start:end + 1])[2] <= tolerance:
            end += 1
        if len(pts) - end < MIN_REGION and end < len(pts):
            # a tail too short to fit on its own joins the region if it must
            if _fit_gap(pts[start:])[2] <= 2 * tolerance:
                end = len(pts)
        out.append(_region(pts[start:end]))
        start = end
    return out


def _region(pts: Sequence[Point]) -> Region:
    g, G, residual = _fit_gap(pts)
    o_s = statistics.median(p.o_s for p in pts)
    o_r = statistics.median(p.o_r for p in pts)
    # what is left of a round trip once the overheads and the bytes are counted; below zero
    # where the overheads, timed around blocking calls, include the transfer (rendezvous)
    L = statistics.median(p.prtt1 / 2 - p.o_s - p.o_r - (p.size - 1) * G for p in pts)
    return Region(pts[0].size, pts[-1].size, L, o_s, o_r, g, G, residual)


def predict(found: Sequence[Region], size: int) -> Region | None:
    """The region whose sizes include `size` (or the nearest one below it)."""
    below = [r for r in found if r.lo <= size]
    return below[-1] if below else (found[0] if found else None)


def _at_change(found: Sequence[Region], size: int) -> bool:
    """Whether `size` is the first or the last size of a region that borders another."""
    edges = {r.lo for r in found[1:]} | {r.hi for r in found[:-1]}
    return size in edges


def fits(rows: Sequence[dict]) -> dict[str, list[Region]]:
    """The regions of every path measured in `rows` (mmpi-bench's merged rows)."""
    out = {}
    for path in ("native", "across", "bridged"):
        pts = [Point(r["size"], side["prtt1"], side["prttn"], side["prttd"], side["o_r"],
                     side["n"], side["d"])
               for r in rows if r["bench"] == "loggp" and (side := r.get(path)) is not None]
        if len(pts) >= 2:
            out[path] = regions(pts)
    return out


def format_fits(found: dict[str, list[Region]]) -> str:
    """One row per path and region; then the bridged path against two across-jobs hops."""
    lines = ["# LogGP parameters (us; G in us per byte, and the bandwidth 1/G implies)",
             f"{'# Path':<10}{'Sizes':>18}{'L':>9}{'o_s':>9}{'o_r':>9}{'g':>9}{'G':>11}"
             f"{'MB/s':>9}{'residual':>10}"]
    for path, regs in found.items():
        for r in regs:
            lines.append(f"{path:<10}{f'{r.lo}-{r.hi}':>18}{r.L:>9.2f}{r.o_s:>9.2f}"
                         f"{r.o_r:>9.2f}{r.g:>9.2f}{r.G:>11.6f}{r.bandwidth():>9.0f}"
                         f"{r.residual:>10.3f}")
    if "bridged" in found and "across" in found:
        b, a = found["bridged"][0], found["across"][0]
        added = (b.L + b.o_s + b.o_r) - 2 * (a.L + a.o_s + a.o_r)
        lines.append(
            f"# bridged = two across-jobs hops + the forwarder: for small messages the "
            f"forwarder adds {added:.2f} us of latency and overhead (bridged L+o_s+o_r "
            f"{b.L + b.o_s + b.o_r:.2f} against 2 x {a.L + a.o_s + a.o_r:.2f}) and "
            f"{b.g - a.g:.2f} us of gap per message (g {b.g:.2f} against {a.g:.2f})")
    return "\n".join(lines) + "\n"


def check(found: dict[str, list[Region]], rows: Sequence[dict]) -> str:
    """The parameters against what `latency`, `bw` and `rate` measured in the same run:
    one-way time o_s + L + (s-1) G + o_r (within 20%), bandwidth s / (g + (s-1) G) at 64 KiB
    and above (within 15%), the message rate 1 / (g + (s-1) G), 1 / g for the smallest
    messages (within 20%)."""
    lines = []
    for path, regs in found.items():
        for bench, lo, tol, model in (
                ("latency", 0, 0.20, lambda r, s: r.one_way(s)),
                ("bw", 65536, 0.15, lambda r, s: s / (r.g + (s - 1) * r.G)),
                ("rate", 0, 0.20, lambda r, s: 1e6 / max(r.g + (s - 1) * r.G, 1e-9))):
            got = [(r["size"], r[path]["value"]) for r in rows
                   if r["bench"] == bench and r["size"] >= lo and r.get(path)
                   and r.get("pairs", 1) == 1]
            if not got:
                continue
            if bench == "latency":  # the measure leaves sizes at a region change aside
                got = [(size, v) for size, v in got if not _at_change(regs, size)]
            within, worst = 0, []
            for size, measured in got:
                want = model(predict(regs, size), size)
                error = want / measured - 1
                within += abs(error) <= tol
                worst.append((abs(error), size, error))
            worst.sort(reverse=True)
            _, size, error = worst[0]
            missed = ", ".join(f"{s} B {e:+.0%}" for m, s, e in sorted(worst, key=lambda w: w[1])
                               if m > tol)
            lines.append(f"# {path:<8} {bench:<8} predicted within {tol:.0%} at {within} of "
                         f"{len(got)} sizes; farthest: {size} B, {error:+.0%}"
                         + (f"; missed: {missed}" if missed else ""))
    return "\n".join(lines) + ("\n" if lines else "")


__all__ = ["Point", "Region", "regions", "line", "predict", "fits", "format_fits", "check",
           "REGION_TOLERANCE"]
