"""Heatmaps of a job's traffic matrices with the zipper (the cluster boundary) marked."""

from __future__ import annotations

import os

import numpy as np

from .errors import MonitorError
from .matrices import JobMatrices
from .report import forwarded_bytes, human_bytes, kind_matrix, share

PANELS = (("p2p", "point-to-point"), ("coll", "collectives"), ("total", "total"))


def cluster_order(layout: tuple[str, ...]) -> list[int]:
    """Virtual ranks low first, then high, each in increasing order."""
    return [v for c in ("low", "high") for v, o in enumerate(layout) if o == c]


def plot_job(job: JobMatrices, path: str | os.PathLike, phase: str | None = None,
             what: str = "bytes") -> None:
    """Write a PNG: one heatmap per kind (sender rows, receiver columns), log colour scale.

    Ranks are shown low cluster first; a layout that is not low-then-high is reordered so
    each cluster is one block, and the axes are labelled with the virtual ranks.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.colors import LogNorm
    except ImportError:
        raise MonitorError("mmpi-monitor plot needs matplotlib: pip install 'mmpi[plot]'") from None
    if what not in ("bytes", "msgs"):
        raise MonitorError(f"cannot plot {what!r} (expected bytes or msgs)")
    order = cluster_order(job.layout)
    reordered = order != list(range(job.size))
    n_low = job.layout.count("low")
    mats = {k: kind_matrix(job, k, what, phase) for k, _ in PANELS}
    positive = [m[m > 0] for m in mats.values() if (m > 0).any()]
    norm = (LogNorm(vmin=min(float(p.min()) for p in positive),
                    vmax=max(float(p.max()) for p in positive)) if positive else None)
    unit = "bytes" if what == "bytes" else "messages"
    fig, axes = plt.subplots(1, len(PANELS), figsize=(5.2 * len(PANELS), 5.0),
                             constrained_layout=True)
    image = None
    for ax, (kind, title) in zip(axes, PANELS, strict=True):
        m = mats[kind]
        shown = m[np.ix_(order, order)].astype(np.float64)
        image = ax.imshow(np.ma.masked_less_equal(shown, 0), norm=norm, cmap="viridis",
                          interpolation="nearest", vmin=None if norm else 0,
                          vmax=None if norm else 1)
        ax.set_facecolor("white")
        for x in (ax.axhline, ax.axvline):
            x(n_low - 0.5, color="red", linewidth=1.5)
        total = int(m.sum())
        if what == "bytes":
            fwd = forwarded_bytes(m, job.layout)
            ax.set_title(f"{title}: {human_bytes(total)}, {share(fwd, total)} forwarded",
                         fontsize=10, pad=16)
        else:
            ax.set_title(f"{title}: {total:,} messages", fontsize=10, pad=16)
        _ticks(ax, order, reordered)
        ax.set_xlabel("receiver (virtual rank)")
        ax.set_ylabel("sender (virtual rank)")
        for pos, name in ((-0.5 + n_low / 2, "low"), (n_low - 0.5 + (job.size - n_low) / 2,
                                                      "high")):
            ax.text(pos, 1.01, name, transform=ax.get_xaxis_transform(), ha="center",
                    va="bottom", color="red", fontsize=9)
            ax.text(1.01, pos, name, transform=ax.get_yaxis_transform(), ha="left",
                    va="center", color="red", fontsize=9, rotation=90)
    if norm is not None:
        fig.colorbar(image, ax=list(axes), shrink=0.85, label=f"{unit} sent (log scale)")
    where = f"phase {phase}" if phase else f"all phases ({', '.join(job.phases) or 'none'})"
    note = "; ranks grouped by cluster" if reordered else ""
    fig.suptitle(f"{job.size} ranks, {unit} sent, {where}{note}"
                 + ("" if positive else ": no traffic"))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _ticks(ax, order: list[int], reordered: bool) -> None:
    n = len(order)
    step = 1 if n <= 24 or reordered and n <= 48 else max(1, n // 16)
    pos = list(range(0, n, step))
    ax.set_xticks(pos, [str(order[p]) for p in pos], fontsize=7,
                  rotation=90 if n > 16 else 0)
    ax.set_yticks(pos, [str(order[p]) for p in pos], fontsize=7)
