"""Run NPB kernels natively and bridged, side by side, and tabulate time and verification.

`python benchmarks/nas_matrix.py --class W [--kernels ep,is,cg,mg,lu] [--layouts 1,2,1+1,4,2+2]`
Each layout is run one after the other (never concurrently: the machine has 2 cores).
A layout "n" is `mpiexec -n n`; "a+b" is `mmpi-run --low a --high b`.
"""

import argparse
import re
import shutil
import subprocess
import sys
import time


def run(kernel: str, cls: str, layout: str, timeout: float) -> tuple[str, float | None, str]:
    """Run one kernel natively or bridged; return (status, seconds, output)."""
    prog = [sys.executable, "-m", "nas_ports", kernel, "--class", cls]
    if "+" in layout:
        low, high = layout.split("+")
        launcher = [shutil.which("mmpi-run") or "mmpi-run"]
        cmd = [*launcher, "--low", low, "--high", high, *prog]
    else:
        cmd = ["mpiexec", "-n", layout, *prog]
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return "TIMEOUT", None, f"{time.monotonic() - t0:.0f} s"
    out = p.stdout + p.stderr
    m = re.search(r"Time in seconds\s*=\s*([\d.]+)", out)
    ok = "VERIFICATION SUCCESSFUL" in out and p.returncode == 0
    return ("ok" if ok else f"FAILED rc={p.returncode}"), (float(m.group(1)) if m else None), \
        out[-400:] if not ok else ""


def main() -> int:
    """Run the matrix of kernels, classes and layouts and print the table."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--class", dest="cls", default="W")
    ap.add_argument("--kernels", default="ep,is,cg,mg,lu")
    ap.add_argument("--layouts", default="1,2,1+1,4,2+2")
    ap.add_argument("--timeout", type=float, default=600)
    a = ap.parse_args()
    layouts = a.layouts.split(",")
    print(f"class {a.cls}; times in seconds (NPB timed region); 'native n' = mpiexec -n n, "
          "'a+b' = bridged")
    print("| kernel | " + " | ".join(layouts) + " |")
    print("|---|" + "---:|" * len(layouts))
    failed = False
    for k in a.kernels.split(","):
        cells = []
        for lay in layouts:
            status, t, tail = run(k, a.cls, lay, a.timeout)
            cells.append(f"{t:.2f}" if status == "ok" and t is not None else status)
            if status != "ok":
                failed = True
                print(f"  {k} {lay}: {status} {tail}", file=sys.stderr)
        print(f"| {k} | " + " | ".join(cells) + " |", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
