"""Pin a bridged job's processes to CPUs by role, for placement experiments (not a library feature).

`PYTHONPATH=benchmarks/pinned MMPI_BENCH_PIN=LNF mmpi-bench ...` (or `mmpi-run ...`): every
Python process of a bridged job pins itself at start-up with `os.sched_setaffinity`: each
cluster's leader (local rank 0) to CPU L, its other ranks to CPU N, the forwarder (all its
threads) to CPU F; e.g. `MMPI_BENCH_PIN=011` puts both leaders on CPU 0 and the non-leaders
with the forwarder on CPU 1. Native jobs (no `MMPI_CLUSTER`) and every other process are left
alone. Measured with it: benchmarks/RESULTS.md, "Placement".
"""

import os

_PIN = os.environ.get("MMPI_BENCH_PIN", "")


def _role_cpu(pin: str) -> int | None:
    """The CPU this process goes to under `pin` ("LNF"), or None if it is not pinned."""
    if len(pin) != 3 or not pin.isdigit():
        raise SystemExit(f"MMPI_BENCH_PIN={pin!r}: expected three CPU digits, leaders, "
                         "non-leaders and forwarder (e.g. 011)")
    try:
        with open("/proc/self/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
    except OSError:
        return None
    if b"forwarder" in argv:  # python -m forwarder
        return int(pin[2])
    if os.environ.get("MMPI_CLUSTER") and os.environ.get("PMI_RANK") is not None:
        return int(pin[0] if os.environ["PMI_RANK"] == "0" else pin[1])
    return None


if _PIN:
    _cpu = _role_cpu(_PIN)
    if _cpu is not None:
        os.sched_setaffinity(0, {_cpu})
