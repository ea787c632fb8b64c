"""Placement advice for a monitored job: the proposed layout and its predicted forwarding."""

from __future__ import annotations

from dataclasses import dataclass

from .matrices import JobMatrices
from .partition import Split, bisect, cut_bytes, separator
from .report import human_bytes, kind_matrix, layout_line, share

OBJECTIVES = {
    # Point-to-point traffic goes wherever its ranks are, so its crossing is predicted exactly.
    # Collectives cross between the clusters' leaders in aggregated messages whose volume
    # depends on the cluster sizes rather than on which ranks are where, and the measured
    # matrix names the run's leaders: it would pull the old leaders together for nothing.
    "p2p": "point-to-point bytes",
    "total": "point-to-point and collective bytes (as if collectives were point-to-point)",
}


@dataclass(frozen=True)
class Advice:
    """What mmpi-place found: the layouts compared, in bytes of the objective crossing."""

    low: int
    high: int
    kind: str
    phase: str | None
    run_layout: tuple[str, ...]
    total_bytes: int  # of the objective
    run_cut: int  # as run (measured)
    default_cut: int  # low 0..low-1, high the rest
    proposed: Split
    coll_forwarded: int  # collective bytes that crossed in the run
    separator: tuple[int, ...]  # ranks that would separate the proposed split (vertex cut)

    @property
    def owners(self) -> tuple[str, ...]:
        """The proposed layout: cluster of each virtual rank."""
        return self.proposed.owners


def advise(job: JobMatrices, low: int, high: int, kind: str = "p2p",
           phase: str | None = None) -> Advice:
    """Bisect the job's traffic for clusters of `low` and `high` ranks and compare layouts."""
    if kind not in OBJECTIVES:
        raise ValueError(f"unknown objective {kind!r} (expected {', '.join(OBJECTIVES)})")
    m = kind_matrix(job, kind, "bytes", phase)
    split = bisect(m, low, high, current=job.layout)
    default = ("low",) * low + ("high",) * high
    return Advice(
        low=low, high=high, kind=kind, phase=phase, run_layout=job.layout,
        total_bytes=int(m.sum()), run_cut=cut_bytes(m, job.layout),
        default_cut=cut_bytes(m, default) if low + high == job.size else 0,
        proposed=split,
        coll_forwarded=cut_bytes(kind_matrix(job, "coll", "bytes", phase), job.layout),
        separator=tuple(separator(m, split.owners)),
    )


def format_advice(a: Advice) -> str:
    """The human-readable report mmpi-place prints."""
    n = len(a.run_layout)
    run_sizes = (a.run_layout.count("low"), a.run_layout.count("high"))
    default = ("low",) * a.low + ("high",) * a.high
    lines = [f"{n} ranks for low {a.low} + high {a.high}; traffic of "
             + (f"phase {a.phase}" if a.phase else "the whole run")
             + f"; minimising {OBJECTIVES[a.kind]}: {human_bytes(a.total_bytes)} in all"]
    rows = [(f"as run ({run_sizes[0]}+{run_sizes[1]})", a.run_cut, a.run_layout)]
    if default != a.run_layout:
        rows.append((f"default ({a.low}+{a.high})", a.default_cut, default))
    rows.append((f"proposed ({a.low}+{a.high})", a.proposed.cut_bytes, a.owners))
    lines.append(f"  {'layout':<18} {'forwarded':>11} {'share':>7}   ranks")
    for label, cut, owners in rows:
        lines.append(f"  {label:<18} {human_bytes(cut):>11} {share(cut, a.total_bytes):>7}"
                     f"   {layout_line(owners)}")
    if a.owners == a.run_layout:
        lines.append("  the layout as run is already "
                     + ("optimal" if a.proposed.optimal else "the best found") + ": keep it")
    elif run_sizes == (a.low, a.high):
        moved = sum(x != y for x, y in zip(a.owners, a.run_layout, strict=True))
        lines.append(f"  the proposal moves {moved} rank{'s' * (moved != 1)}")
    lines.append(f"  method: {a.proposed.method} ({a.proposed.seconds * 1e3:.0f} ms)")
    if a.kind == "p2p":
        same = run_sizes == (a.low, a.high)
        lines.append(f"  collectives: {human_bytes(a.coll_forwarded)} crossed in the run "
                     "(between the clusters' leaders);")
        lines.append("    " + ("about the same for any layout of these sizes, so not in the "
                              "prediction" if same else "not predicted for other cluster sizes"))
    if a.proposed.cut_bytes == 0:
        lines.append("  vertex cut: none needed, nothing crosses in the proposed layout")
    else:
        s = a.separator
        lines.append(f"  vertex cut (thesis 2.2): {len(s)} rank{'s' * (len(s) != 1)} "
                     f"({', '.join(map(str, s))}); run on zipper nodes, "
                     f"{'they' if len(s) != 1 else 'it'} would leave")
        lines.append("    no traffic between the rest of low and of high")
    return "\n".join(lines)
