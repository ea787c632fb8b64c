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
        """The send overhead, from the PRTTs (LogGP's o_s)."""
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
    residual: float  # T(s)'s largest relative deviation from the gap's line (noise aside)
    rt_residual: float  # PRTT(1,0,s)/2's largest relative deviation from the one-way line
    noise: tuple[int, ...] = ()  # sizes whose gap lay off the line, left out of the fit

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


def _fit(points: Sequence[Point]) -> tuple[float, ...]:
    """(L, o_s, o_r, g, G) of `points`.

    g and G by a line through T(s) = g + (s - 1) G, weighted by relative error (sizes span
    1 B to MiB, and a small size's point must count as much); the overheads as measured
    (medians); L what is left of a round trip once the overheads and the bytes are counted, so
    that the one-way line o_s + L + (s - 1) G + o_r meets the round trips. L is below zero
    where the overheads, timed around blocking calls, include the transfer (rendezvous).
    """
    ys = [p.gap for p in points]
    g, G = line([p.size - 1 for p in points], ys, [1.0 / max(y * y, 1e-12) for y in ys])
    g, G = max(g, 0.0), max(G, 0.0)  # a gap or a cost per byte below zero is noise
    o_s = statistics.median(p.o_s for p in points)
    o_r = statistics.median(p.o_r for p in points)
    L = statistics.median(p.prtt1 / 2 - o_s - o_r - (p.size - 1) * G for p in points)
    return L, o_s, o_r, g, G


def _off(p: Point, params: tuple[float, ...]) -> float:
    """How far `p`'s T(s) lies from the line g + (s - 1) G, relative to the line."""
    g, G = params[3:]
    want = g + (p.size - 1) * G
    return abs(p.gap - want) / max(abs(want), 1e-9)


def _off_one_way(p: Point, params: tuple[float, ...]) -> float:
    """How far `p`'s one-way time PRTT(1, 0, s) / 2 lies from o_s + L + (s - 1) G + o_r."""
    L, o_s, o_r, _, G = params
    want = o_s + L + (p.size - 1) * G + o_r
    return abs(p.prtt1 / 2 - want) / max(abs(want), 1e-9)


def _robust(points: Sequence[Point], tolerance: float):
    """The parameters of `points`, the worst deviation, and the sizes left out as noise.

    Single sizes off the gap's line are left out; None if no line explains the rest within
    `tolerance`. A size may be left out when it is not the last one (a change of protocol
    shows there first), nor next to another left out, and at most a third of them are, with
    MIN_REGION kept: one size off the line with the sizes around it on it is noise (this VM's
    speed drifts); a protocol change moves every size after it (Netgauge's residual test).
    """
    out: list[int] = []
    while True:
        kept = [p for i, p in enumerate(points) if i not in out]
        params = _fit(kept)
        worst = max(_off(p, params) for p in kept)
        if worst <= tolerance:
            return params, worst, out
        i = max((k for k in range(len(points)) if k not in out),
                key=lambda k: _off(points[k], params))
        if (i == len(points) - 1 or i - 1 in out or i + 1 in out
                or 3 * (len(out) + 1) > len(points)
                or len(points) - len(out) - 1 < MIN_REGION):
            return None
        out.append(i)


def regions(points: Sequence[Point], tolerance: float = REGION_TOLERANCE) -> list[Region]:
    """Split `points` (ascending sizes) into protocol regions and fit each one."""
    pts = sorted(points, key=lambda p: p.size)
    out: list[Region] = []
    start = 0
    while start < len(pts):
        end = min(start + MIN_REGION, len(pts))
        # grow the region while its line still explains every size, or all but one that
        # the next two sizes, back on the line, show to be noise
        while end < len(pts):
            if _robust(pts[start:end + 1], tolerance) is not None:
                end += 1
            elif end + 2 < len(pts) and _robust(pts[start:end + 3], tolerance) is not None:
                end += 3
            else:
                break
        if len(pts) - end < MIN_REGION and end < len(pts):
            # a tail too short to fit on its own joins the region if it must
            if _robust(pts[start:], 2 * tolerance) is not None:
                end = len(pts)
        out.append(_region(pts[start:end], tolerance))
        start = end
    return out


def _region(pts: Sequence[Point], tolerance: float) -> Region:
    fitted = _robust(pts, tolerance) or _robust(pts, 2 * tolerance)
    if fitted is None:  # sizes no parameters explain: fit them all, and say how badly
        params = _fit(pts)
        fitted = params, max(_off(p, params) for p in pts), []
    params, worst, noise = fitted
    kept = [p for i, p in enumerate(pts) if i not in noise]
    return Region(pts[0].size, pts[-1].size, *params, worst,
                  max(_off_one_way(p, params) for p in kept),
                  tuple(pts[i].size for i in noise))


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
    lines = ["# LogGP parameters (us; G in us per byte, and the bandwidth 1/G implies); how far "
             "the sizes lie from the region's gap line and one-way line (largest relative "
             "deviation); sizes whose gap lay off the line, left out as noise",
             f"{'# Path':<10}{'Sizes':>18}{'L':>9}{'o_s':>9}{'o_r':>9}{'g':>9}{'G':>11}"
             f"{'MB/s':>9}{'gap dev':>9}{'1-way dev':>10}  noise"]
    for path, regs in found.items():
        for r in regs:
            lines.append(f"{path:<10}{f'{r.lo}-{r.hi}':>18}{r.L:>9.2f}{r.o_s:>9.2f}"
                         f"{r.o_r:>9.2f}{r.g:>9.2f}{r.G:>11.6f}{r.bandwidth():>9.0f}"
                         f"{r.residual:>9.3f}{r.rt_residual:>10.3f}  "
                         + (",".join(map(str, r.noise)) or "-"))
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
    """The parameters against what `latency`, `bw` and `rate` measured in the same run.

    One-way time o_s + L + (s-1) G + o_r (within 20%), bandwidth s / (g + (s-1) G) at 64 KiB
    and above (within 15%), the message rate 1 / (g + (s-1) G), 1 / g for the smallest
    messages (within 20%). First, per path, how well the round trips themselves agree with
    `latency` (PRTT(1,0,s)/2, the same experiment): what the model has to go by.
    """
    lines = []
    for path, regs in found.items():
        trips = {r["size"]: r[path]["prtt1"] / 2 for r in rows
                 if r["bench"] == "loggp" and r.get(path)}
        # (what the line says, the benchmark measured against, from which size, tolerance,
        # what is compared with it)
        for label, bench, lo, tol, model in (
                ("round trip measured", "latency", 0, 0.20,
                 lambda r, s, trips=trips: trips.get(s)),
                ("latency    predicted", "latency", 0, 0.20, lambda r, s: r.one_way(s)),
                ("bw         predicted", "bw", 65536, 0.15,
                 lambda r, s: s / (r.g + (s - 1) * r.G)),
                ("rate       predicted", "rate", 0, 0.20,
                 lambda r, s: 1e6 / max(r.g + (s - 1) * r.G, 1e-9))):
            got = [(r["size"], r[path]["value"]) for r in rows
                   if r["bench"] == bench and r["size"] >= lo and r.get(path)
                   and r.get("pairs", 1) == 1]
            if label.startswith("latency"):  # the measure leaves region changes aside
                got = [(size, v) for size, v in got if not _at_change(regs, size)]
            compared = [(size, model(predict(regs, size), size), v) for size, v in got]
            compared = [c for c in compared if c[1] is not None]
            if compared:
                lines.append(f"# {path:<8} {label} " + _within(compared, tol))
    return "\n".join(lines) + ("\n" if lines else "")


def _within(compared: Sequence[tuple[int, float, float]], tol: float) -> str:
    """'within 20% at 3 of 4 sizes; farthest ...; missed ...' for (size, want, measured)."""
    errors = [(size, want / measured - 1) for size, want, measured in compared]
    size, error = max(errors, key=lambda e: abs(e[1]))
    missed = ", ".join(f"{s} B {e:+.0%}" for s, e in errors if abs(e) > tol)
    within = sum(abs(e) <= tol for _, e in errors)
    return (f"within {tol:.0%} at {within} of {len(errors)} sizes; farthest: {size} B, "
            f"{error:+.0%}" + (f"; missed: {missed}" if missed else ""))


__all__ = ["Point", "Region", "regions", "line", "predict", "fits", "format_fits", "check",
           "REGION_TOLERANCE"]
