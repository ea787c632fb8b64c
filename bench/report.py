"""What mmpi-bench makes of the workers' records: merged rows, OSU-style tables, JSON, plots.

No MPI here: everything works on plain dicts, so it is unit-tested with made-up figures.

A row (one per benchmark, size and pair count) is the unit of every output::

    {"bench": "latency", "size": 8, "unit": "us",
     "native":  {"value": 2.0, "samples": [...], "iters": 6250},
     "bridged": {"value": 60.0, "samples": [...], "iters": 400},
     "ratio": 30.0}                       # bridged / native, None when either is missing

and, for point-to-point benchmarks, ``"across"`` (plain MPI between two jobs, the path a
forwarded message takes twice) with ``"ratio_across"`` = bridged / across.

plus ``"pairs": k`` for the pairs benchmark and ``"clients": n`` for the 1:n / n:1 patterns.
The overlap benchmarks (unit ``%``) add ``"async"`` (native, MPICH's asynchronous progress on),
and each side carries ``pure_us``, ``compute_us`` and ``overall_us`` beside the overlap.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import socket
import textwrap
from collections.abc import Iterable, Sequence
from importlib import metadata
from pathlib import Path

from ._catalog import BENCHES, higher_is_better

MODES = ("native", "async", "across", "bridged")
PLOT_INSTALL_HINT = 'pip install "mmpi[plot]"  (or: pip install matplotlib)'
_POINT_KEYS = ("bench", "size", "pairs")  # what identifies a row
_SKIP = {"type", "bench", "size", "pairs", "clients", "unit"}


class PlotUnavailable(Exception):
    """matplotlib is not installed."""


# -- rows ---------------------------------------------------------------------------------------
def merge(records: dict[str, Iterable[dict]]) -> list[dict]:
    """Pair up the workers' result records by (bench, size, pairs); keep first-seen order."""
    rows: dict[tuple, dict] = {}
    for mode in MODES:
        for rec in records.get(mode, ()):
            key = tuple(rec.get(k) for k in _POINT_KEYS)
            row = rows.setdefault(key, {
                "bench": rec["bench"], "size": rec["size"], "unit": rec["unit"],
                **{k: rec[k] for k in ("pairs", "clients") if k in rec},
                "native": None, "bridged": None,
            })
            row[mode] = {k: v for k, v in rec.items() if k not in _SKIP}
    for row in rows.values():
        row["ratio"] = ratio(row)
        if row.get("across") is not None:
            row["ratio_across"] = ratio(row, "across")
    order = list(BENCHES)
    return sorted(rows.values(), key=lambda r: (
        order.index(r["bench"]) if r["bench"] in order else len(order),
        r.get("pairs") or 0, r["size"]))


def ratio(row: dict, base: str = "native") -> float | None:
    """Bridged figure divided by the `base` one, or None when either is missing or zero."""
    n, b = _value(row, base), _value(row, "bridged")
    if n is None or b is None or n == 0:
        return None
    return b / n


def _value(row: dict, mode: str) -> float | None:
    side = row.get(mode)
    return None if side is None else side.get("value")


# -- tables -------------------------------------------------------------------------------------
def format_header(env: dict, load: Sequence[float] | None) -> str:
    """Say, above the tables, where they were measured and how busy the machine was."""
    lib = (env.get("mpi_library") or "unknown MPI").splitlines()[0]
    text = (f"# mmpi-bench on {env.get('hostname')} ({env.get('cpu_count')} cpus, "
            f"{env.get('cpu_model')}), {' '.join(lib.split())}, mpi4py {env.get('mpi4py')}\n")
    if load:
        text += f"# load average before the first job: {' '.join(f'{x:.2f}' for x in load)}\n"
    busy = (env.get("busy") or {}).get("warning")
    if busy:
        text += f"# WARNING: a busy machine: {busy}\n"
    return text + "\n"


def format_tables(rows: Sequence[dict], layouts: dict[str, str] | None = None) -> str:
    """OSU-style text: one table per benchmark, a ``#`` header, then one line per size."""
    out: list[str] = []
    for name in _benches_in(rows):
        mine = [r for r in rows if r["bench"] == name]
        out.append(_table(name, mine, (layouts or {}).get(_group(name), "")))
    return "\n".join(out)


def _benches_in(rows: Sequence[dict]) -> list[str]:
    seen: list[str] = []
    for r in rows:
        if r["bench"] not in seen:
            seen.append(r["bench"])
    return seen


def _group(name: str) -> str:
    return BENCHES[name].group if name in BENCHES else ""


def _table(name: str, rows: list[dict], layout: str) -> str:
    bench = BENCHES.get(name)
    unit = rows[0]["unit"]
    if unit == "%":
        return _overlap_table(name, rows, layout)
    better = "higher" if higher_is_better(unit) else "lower"
    lines = [f"# mmpi-bench {name}: {bench.title if bench else name}"]
    if layout:
        lines.append(f"# {layout}")
    lines.append(f"# figures in {unit} ({better} is better); ratio = bridged / native")
    with_pairs = any("pairs" in r for r in rows)
    across = any(r.get("across") is not None for r in rows)
    head = ([f"{'# Pairs':<8}"] if with_pairs else []) + [
        f"{'# Size' if not with_pairs else 'Size':<12}", f"{'Native':>14}"]
    head += [f"{'Across jobs':>14}"] if across else []
    head += [f"{'Bridged':>14}", f"{'Bridged/Native':>16}"]
    head += [f"{'Bridged/Across':>16}"] if across else []
    if with_pairs:
        head += [f"{'Native/1 pair':>15}", f"{'Bridged/1 pair':>15}"]
    lines.append("".join(head).rstrip())
    one_pair = {r["size"]: r for r in rows if r.get("pairs") == 1}
    for r in rows:
        cells = [f"{r['pairs']:<8}"] if with_pairs else []
        size = "-" if name == "barrier" else str(r["size"])
        cells += [f"{size:<12}", f"{_num(_value(r, 'native')):>14}"]
        cells += [f"{_num(_value(r, 'across')):>14}"] if across else []
        cells += [f"{_num(_value(r, 'bridged')):>14}", f"{_num(r.get('ratio')):>16}"]
        cells += [f"{_num(r.get('ratio_across')):>16}"] if across else []
        if with_pairs:
            base = one_pair.get(r["size"])
            for mode in ("native", "bridged"):
                cells.append(f"{_num(_div(_value(r, mode), base and _value(base, mode))):>15}")
        lines.append("".join(cells).rstrip())
    return "\n".join(lines) + "\n"


def _overlap_table(name: str, rows: list[dict], layout: str) -> str:
    """Overlap per mode, each with the call's time alone (pure) beside it."""
    bench = BENCHES.get(name)
    modes = [m for m in ("native", "async", "bridged") if any(r.get(m) for r in rows)]
    titles = {"native": "Native", "async": "Native async", "bridged": "Bridged"}
    lines = [f"# mmpi-bench {name}: {bench.title if bench else name}"]
    if layout:
        lines.append(f"# {layout}")
    lines.append("# overlap in % (higher is better), pure = the call alone, in us")
    head = [f"{'# Size':<12}"]
    for m in modes:
        head += [f"{titles[m] + ' %':>16}", f"{'pure us':>12}"]
    lines.append("".join(head).rstrip())
    for r in rows:
        cells = [f"{r['size']:<12}"]
        for m in modes:
            side = r.get(m) or {}
            cells += [f"{_num(side.get('value')):>16}", f"{_num(side.get('pure_us')):>12}"]
        lines.append("".join(cells).rstrip())
    return "\n".join(lines) + "\n"


def _div(a: float | None, b: float | None) -> float | None:
    return None if a is None or not b else a / b


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


# -- JSON ---------------------------------------------------------------------------------------
def environment(worker_env: dict | None, argv: Sequence[str]) -> dict:
    """Where and with what the figures were measured (the worker reports the MPI library)."""
    worker_env = worker_env or {}
    return {
        "hostname": socket.gethostname(),
        "cpu_count": os.cpu_count(),
        "cpu_model": _cpu_model(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "mpi_library": worker_env.get("mpi_library"),
        "mpi_version": worker_env.get("mpi_version"),
        "mpi4py": _version("mpi4py"),
        "numpy": _version("numpy"),
        "mmpi": _version("mmpi"),
        "command": " ".join(["mmpi-bench", *argv]),
        "date": now(),
    }


def now() -> str:
    """Return the current UTC time in ISO 8601, to the second."""
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def _cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def document(rows: Sequence[dict], env: dict, *, settings: dict, layouts: dict[str, str],
             runs: Sequence[dict]) -> dict:
    """Everything one invocation measured, ready for ``json.dump``."""
    return {
        "tool": "mmpi-bench",
        "format": 1,
        "environment": env,
        "settings": settings,
        "layouts": layouts,
        "runs": list(runs),
        "results": list(rows),
    }


def write_json(path: str | os.PathLike[str], doc: dict) -> Path:
    """Write `doc` to `path` (parent directories are made); return the path."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(p.name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=2) + "\n")
    tmp.replace(p)  # a reader never sees half a file
    return p


# -- plots --------------------------------------------------------------------------------------
def require_matplotlib() -> None:
    """Raise PlotUnavailable, naming the install command, when matplotlib is missing."""
    try:
        import matplotlib  # noqa: F401
    except ImportError as exc:
        raise PlotUnavailable(
            f"--plot needs matplotlib, which is not installed: {PLOT_INSTALL_HINT}") from exc


def plot_name(bench: str) -> str:
    """File name for a benchmark's chart ("1:n" is not a good file name)."""
    return bench.replace("1:n", "1_to_n").replace("n:1", "n_to_1") + ".png"


def write_plots(rows: Sequence[dict], directory: str | os.PathLike[str],
                layouts: dict[str, str] | None = None) -> list[Path]:
    """One PNG per benchmark (native and bridged against size, log axes) and ratios.png."""
    require_matplotlib()
    import matplotlib

    matplotlib.use("Agg")  # files only: no display on a cluster node
    import matplotlib.pyplot as plt

    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name in _benches_in(rows):
        mine = [r for r in rows if r["bench"] == name]
        if name == "loggp":
            path = _loggp_plot(plt, mine, out)
            if path:
                written.append(path)
            continue
        fig, ax = plt.subplots(figsize=(7, 4.5))
        if name == "barrier":
            _bars(ax, mine)
        else:
            _curves(ax, mine)
        bench = BENCHES.get(name)
        ax.set_title(f"{name}: {bench.title if bench else name}", fontsize=9)
        layout = (layouts or {}).get(_group(name))
        note = textwrap.wrap(layout or "", 120)
        if note:
            fig.text(0.01, 0.01, "\n".join(note), fontsize=7, color="0.4")
        fig.tight_layout(rect=(0, 0.025 * (len(note) + 0.5), 1, 1))
        path = out / plot_name(name)
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    ratio_path = _ratio_plot(plt, rows, out)
    if ratio_path:
        written.append(ratio_path)
    return written


def _loggp_plot(plt, rows: list[dict], out: Path) -> Path | None:
    """One panel per path: the measured PRTT(1,0,s)/2 and gap T(s), with the fitted lines."""
    from .loggp import fits

    found = fits(rows)
    if not found:
        return None
    fig, axes = plt.subplots(1, len(found), figsize=(5 * len(found), 4.5), squeeze=False)
    for ax, (path, regs) in zip(axes[0], found.items(), strict=True):
        sides = [(r["size"], r[path]) for r in rows if r.get(path)]
        sizes = [s for s, _ in sides]
        ax.plot(sizes, [d["prtt1"] / 2 for _, d in sides], "o", markersize=4,
                label="PRTT(1,0,s)/2 measured")
        ax.plot(sizes, [(d["prttn"] - d["prtt1"]) / (d["n"] - 1) for _, d in sides], "s",
                markersize=4, label="gap T(s) measured")
        for i, reg in enumerate(regs):
            xs = [s for s in sizes if reg.lo <= s <= reg.hi]
            ax.plot(xs, [max(reg.g + (s - 1) * reg.G, 1e-3) for s in xs], "-",
                    color="tab:orange", label="g + (s-1)G fitted" if i == 0 else None)
            ax.plot(xs, [max(reg.one_way(s), 1e-3) for s in xs], "--", color="tab:blue",
                    label="o_s + L + (s-1)G + o_r" if i == 0 else None)
        _size_axis(ax)
        ax.set_yscale("log")
        ax.set_ylabel("time (us)")
        ax.set_title(path, fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle("loggp: parametrised round trips and the fitted LogGP lines", fontsize=9)
    fig.tight_layout()
    path_out = out / plot_name("loggp")
    fig.savefig(path_out, dpi=110)
    plt.close(fig)
    return path_out


def _curves(ax, rows: list[dict]) -> None:
    unit = rows[0]["unit"]
    for k in sorted({r.get("pairs") for r in rows}, key=lambda x: x or 0):
        sub = [r for r in rows if r.get("pairs") == k]
        label_k = f", {k} pair{'s' if k != 1 else ''}" if k else ""
        for mode, style in (("native", "o-"), ("across", "^:"), ("bridged", "s--")):
            pts = [(r["size"], _value(r, mode)) for r in sub if _value(r, mode)]
            if pts:
                xs, ys = zip(*pts, strict=True)
                ax.plot(xs, ys, style, label=f"{mode}{label_k}", markersize=4)
    _size_axis(ax)
    ax.set_yscale("log")
    ax.set_ylabel("bandwidth (MB/s)" if unit == "MB/s" else "messages per second"
                  if unit == "msg/s" else f"time ({_unit_label(unit)})")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)


def _bars(ax, rows: list[dict]) -> None:
    r = rows[0]
    modes = ("native", "bridged")
    vals = [_value(r, m) or 0.0 for m in modes]
    ax.bar(modes, vals, color=["tab:blue", "tab:orange"])
    ax.set_yscale("log")
    ax.set_ylabel(f"time per call ({_unit_label(r['unit'])})")
    for i, v in enumerate(vals):
        ax.text(i, v, _num(v), ha="center", va="bottom", fontsize=8)


def _ratio_plot(plt, rows: Sequence[dict], out: Path) -> Path | None:
    """Bridged / native for every sized benchmark: times on the left, bandwidths on the right."""
    series: dict[str, list[tuple[int, float]]] = {}
    for r in rows:
        if r["bench"] == "barrier" or r.get("ratio") is None or r.get("pairs", 1) != 1:
            continue  # pairs: the one-pair curve; scaling has its own chart
        series.setdefault(r["bench"], []).append((r["size"], r["ratio"]))
    if not series:
        return None
    fig, axes = plt.subplots(1, 2, figsize=(12, 5))
    colours = plt.get_cmap("tab20").colors
    markers = "os^vD<>pPX*h"
    for i, (name, pts) in enumerate(series.items()):
        ax = axes[1] if BENCHES.get(name) and BENCHES[name].is_bandwidth else axes[0]
        xs, ys = zip(*pts, strict=True)
        ax.plot(xs, ys, marker=markers[i % len(markers)], color=colours[(2 * i + i // 10) % 20],
                label=name, markersize=3, linewidth=1)
    for ax, what in zip(axes, ("time: above 1 = bridged slower",
                               "bandwidth: below 1 = bridged slower"), strict=True):
        ax.axhline(1.0, color="0.3", linewidth=0.8)
        _size_axis(ax)
        ax.set_yscale("log")
        ax.set_ylabel(f"bridged / native ({what})")
        ax.grid(True, which="both", alpha=0.3)
        if ax.lines[1:]:
            ax.legend(fontsize=7, ncol=2)
    fig.suptitle("mmpi-bench: bridged figure divided by native figure", fontsize=10)
    fig.tight_layout()
    path = out / "ratios.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _size_axis(ax) -> None:
    from matplotlib.ticker import FuncFormatter

    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(
        FuncFormatter(lambda x, _pos: human_size(int(round(x))) if x >= 0.99 else ""))
    ax.set_xlabel("message size")


def human_size(n: int) -> str:
    """Return 1 KiB multiples the way OSU users say them: 8, 64K, 1M."""
    for unit, scale in (("M", 1 << 20), ("K", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale}{unit}"
    return str(n)


def _unit_label(unit: str) -> str:
    return "µs" if unit == "us" else unit
