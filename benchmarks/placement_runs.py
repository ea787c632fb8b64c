"""Measured placement: monitor a code, ask mmpi-place, run it placed, compare; time both layouts.

    python benchmarks/placement_runs.py --out placement-out --runs 5 \
        cg:W:2+2 cg:W:1+3 mg:W:2+2 ... pairs:2+2 pairs:1+3

A case is ``KERNEL:CLASS:LOW+HIGH`` (a NAS kernel, ``python -m nas_ports KERNEL --class
CLASS``) or ``pairs:LOW+HIGH`` (``examples/pairs.py``, partners i <-> i+N/2). For each case:

1. ``mmpi-run --low L --high H --monitor OUT/<case>/default PROGRAM`` (the default layout);
2. ``mmpi-place OUT/<case>/default --low L --high H --output OUT/<case>/map.json``;
3. unless the proposal is the default layout: ``mmpi-run ... --rank-map OUT/<case>/map.json
   --monitor OUT/<case>/advised PROGRAM``, whose matrix gives the measured forwarded bytes;
4. ``--runs`` timed runs of each layout, unmonitored, alternating default and advised.

Every command is printed as it starts; the table (markdown) and OUT/results.json follow. Times
are the program's own: NPB's "Time in seconds" (its timed region), pairs' exchange time.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from place import cut_bytes, load_job
from place.advice import advise

ROOT = Path(__file__).resolve().parent.parent
PAIRS_ARGS = ["4194304", "16"]  # 4 MiB per exchange, 16 exchanges per rank


def program(case: str) -> tuple[list[str], int, int]:
    """The command line of a case and its cluster sizes."""
    parts = case.split(":")
    low, high = (int(x) for x in parts[-1].split("+"))
    if parts[0] == "pairs":
        return [sys.executable, str(ROOT / "examples" / "pairs.py"), *PAIRS_ARGS], low, high
    kernel, cls = parts[0], parts[1]
    return [sys.executable, "-m", "nas_ports", kernel, "--class", cls], low, high


def mmpi_run(args: list[str], prog: list[str], timeout: float) -> tuple[float, float, str]:
    """Run one job; return (the program's time, wall time, output); fail loudly."""
    cmd = [shutil.which("mmpi-run") or "mmpi-run", *args, *prog]
    print("$ " + " ".join(cmd), file=sys.stderr, flush=True)
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    wall = time.monotonic() - t0
    out = p.stdout + p.stderr
    if p.returncode != 0:
        raise SystemExit(f"failed (status {p.returncode}):\n{out[-3000:]}")
    if "nas_ports" in prog and "VERIFICATION SUCCESSFUL" not in out:
        raise SystemExit(f"not verified:\n{out[-3000:]}")
    m = re.search(r"Time in seconds\s*=\s*([\d.]+)", out) or re.search(r", ([\d.]+) s$", out,
                                                                         re.M)
    return (float(m.group(1)) if m else float("nan")), wall, out


def forwarded(directory: Path) -> dict:
    """Bytes of a monitored run: total and forwarded, per kind."""
    job = load_job(directory)
    out = {}
    for kind in ("p2p", "coll"):
        m = job.matrix(f"{kind}_bytes")
        out[kind] = {"bytes": int(m.sum()), "forwarded": cut_bytes(m, job.layout)}
    return out


def run_case(case: str, out: Path, runs: int, timeout: float) -> dict:
    """Monitor, place, run placed and time one case; return its numbers."""
    prog, low, high = program(case)
    here = out / case.replace(":", "_").replace("+", "-")
    sizes = ["--low", str(low), "--high", str(high)]
    mmpi_run([*sizes, "--monitor", str(here / "default")], prog, timeout)
    rmap = here / "map.json"
    cmd = ["mmpi-place", str(here / "default"), *sizes, "--output", str(rmap)]
    print("$ " + " ".join(cmd), file=sys.stderr, flush=True)
    advice_text = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    (here / "advice.txt").write_text(advice_text)
    job = load_job(here / "default")
    a = advise(job, low, high)
    result = {
        "case": case, "low": low, "high": high, "command": " ".join(prog[1:]),
        "layout_default": list(job.layout), "layout_advised": list(a.owners),
        "default": forwarded(here / "default"),
        "predicted_p2p_forwarded": a.proposed.cut_bytes,
        "method": a.proposed.method, "optimal": a.proposed.optimal,
        "default_optimal": a.proposed.owners == job.layout,
    }
    if result["default_optimal"]:
        times = [mmpi_run(sizes, prog, timeout)[:2] for _ in range(runs)]
        result["time_default"] = [t for t, _ in times]
        result["wall_default"] = [w for _, w in times]
        return result
    mmpi_run([*sizes, "--rank-map", str(rmap), "--monitor", str(here / "advised")], prog,
             timeout)
    result["advised"] = forwarded(here / "advised")
    td, ta, wd, wa = [], [], [], []
    for _ in range(runs):
        t, w, _ = mmpi_run(sizes, prog, timeout)
        td.append(t)
        wd.append(w)
        t, w, _ = mmpi_run([*sizes, "--rank-map", str(rmap)], prog, timeout)
        ta.append(t)
        wa.append(w)
    result.update(time_default=td, time_advised=ta, wall_default=wd, wall_advised=wa)
    return result


def _mib(n: int) -> str:
    return f"{n / 2**20:.2f}"


def _kib(n: int) -> str:
    return f"{n / 2**10:.1f}"


def _spread(xs: list[float]) -> str:
    if not xs:
        return "-"
    return f"{statistics.median(xs):.2f} ({min(xs):.2f}-{max(xs):.2f})"


def table(results: list[dict]) -> str:
    """The markdown table of all cases."""
    head = ("| case | advised layout | p2p MiB | fwd p2p MiB default | predicted | "
            "measured | fwd coll KiB default / advised | time default s | "
            "time advised s |")
    lines = [head, "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        d = r["default"]
        if r["default_optimal"]:
            lay, meas, coll, ta = "= default (optimal)", "-", _kib(d["coll"]["forwarded"]), "-"
        else:
            adv = r["advised"]
            lay = " ".join(c[0] for c in r["layout_advised"])
            meas = _mib(adv["p2p"]["forwarded"])
            coll = f"{_kib(d['coll']['forwarded'])} / {_kib(adv['coll']['forwarded'])}"
            ta = _spread(r["time_advised"])
        lines.append(
            f"| {r['case']} | {lay} | {_mib(d['p2p']['bytes'])} | "
            f"{_mib(d['p2p']['forwarded'])} | {_mib(r['predicted_p2p_forwarded'])} | {meas} | "
            f"{coll} | {_spread(r['time_default'])} | {ta} |")
    return "\n".join(lines)


def main() -> int:
    """Run the cases given, print the table, write OUT/results.json."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("cases", nargs="+", metavar="CASE")
    ap.add_argument("--out", type=Path, default=Path("placement-out"))
    ap.add_argument("--runs", type=int, default=3, help="timed runs of each layout")
    ap.add_argument("--timeout", type=float, default=900)
    a = ap.parse_args()
    a.out = a.out.resolve()
    a.out.mkdir(parents=True, exist_ok=True)
    results = []
    for case in a.cases:
        results.append(run_case(case, a.out, a.runs, a.timeout))
        (a.out / "results.json").write_text(json.dumps(results, indent=1))
        print(table(results[-1:]).splitlines()[-1], file=sys.stderr, flush=True)
    print(table(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
