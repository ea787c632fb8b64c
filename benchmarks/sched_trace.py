"""Who runs on the cores while a bridged job runs: the kernel's scheduler switches, summed up.

`python benchmarks/sched_trace.py [--seconds S] [--delay D] [-- COMMAND ...]`, as root. With a
COMMAND (say `mmpi-bench alltoall --sizes 64K --target-ms 3000`), it starts it, waits until a
bridged job of it is up (a forwarder and its ranks) and D seconds more (default 1), records
the scheduler's `sched_switch` events for S seconds (default 0.3) through the kernel's
tracefs, and waits for COMMAND to end; without one, it records the bridged job running now.
It prints, for every thread of the job that ran, its share of a core, how long its turns on a
core last and how they ended (R: still runnable, as after a `sched_yield` or a preemption;
S: asleep); and for the forwarder's busiest thread (the poller), how long it waited between
turns, how long its own turn before each wait had been, and who ran on its core meanwhile.
The raw trace is kept in `/tmp/sched_trace.txt`.

Why: on 2 cores a 2+2 job is five busy-polling processes, and the fair scheduler gives each
the same share of a core whatever it has to do (a `sched_yield` hands nothing to a process
that has had more than its share), so the forwarder's waits for a core set the pace of most
bridged collectives (benchmarks/RESULTS.md, "The forwarder's share of the cores").
"""

from __future__ import annotations

import argparse
import bisect
import collections
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

TRACEFS = Path("/sys/kernel/tracing")
RAW = Path("/tmp/sched_trace.txt")
_SWITCH = re.compile(r"\[(\d+)\].*? (\d+\.\d+): sched_switch: .*?prev_pid=(\d+) .*?"
                     r"prev_state=(\S+) ==> .*?next_pid=(\d+)")


def record(seconds: float) -> str:
    """The text of a tracefs trace of `sched_switch` over `seconds`."""
    if not (TRACEFS / "trace").exists():
        # not mounted on every machine; if this fails too, the writes below say why
        subprocess.run(["mount", "-t", "tracefs", "nodev", str(TRACEFS)], check=False)
    (TRACEFS / "tracing_on").write_text("0")
    (TRACEFS / "trace").write_text("")
    (TRACEFS / "buffer_size_kb").write_text("65536")
    (TRACEFS / "events/sched/sched_switch/enable").write_text("1")
    (TRACEFS / "tracing_on").write_text("1")
    time.sleep(seconds)
    (TRACEFS / "tracing_on").write_text("0")
    (TRACEFS / "events/sched/sched_switch/enable").write_text("0")
    return (TRACEFS / "trace").read_text()


def job_threads() -> dict[int, str]:
    """Map the thread ids of the bridged job running to roles ('forwarder', 'low:0', ...)."""
    roles = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().split(b"\0")
            env = dict(e.split(b"=", 1) for e in (proc / "environ").read_bytes().split(b"\0")
                       if b"=" in e)
            tids = [int(t.name) for t in (proc / "task").iterdir()]
        except OSError:
            continue
        if b"forwarder" in cmd and b"-m" in cmd:
            role = "forwarder"
        elif b"MMPI_CLUSTER" in env and b"PMI_RANK" in env and b"python" in cmd[0]:
            role = f"{env[b'MMPI_CLUSTER'].decode()}:{env[b'PMI_RANK'].decode()}"
        else:
            continue
        roles.update({t: role for t in tids})
    return roles


def turns(text: str) -> tuple[dict[int, list], float]:
    """Each thread's turns on a core by thread id, and the span of the trace in seconds.

    A turn is (cpu, start, end, how it ended).
    """
    on: dict[int, tuple[int, float]] = {}
    out: dict[int, list] = collections.defaultdict(list)
    first = last = None
    for m in _SWITCH.finditer(text):
        cpu, t, prev, state, nxt = int(m[1]), float(m[2]), int(m[3]), m[4], int(m[5])
        first = t if first is None else first
        last = t
        if cpu in on and on[cpu][0] == prev:
            out[prev].append((cpu, on[cpu][1], t, state))
        on[cpu] = (nxt, t)
    return out, (last - first) if first is not None else 0.0


def _pct(xs: list[float], q: float) -> float:
    return sorted(xs)[min(len(xs) - 1, int(len(xs) * q))]


def report(runs: dict[int, list], span: float, roles: dict[int, str]) -> None:
    """Print the job's threads' turns, and the forwarder poller's waits between its own."""
    print(f"{span * 1e3:.0f} ms traced; turns on a core, in us")
    busy = {t: sum(e - s for _, s, e, _ in r) for t, r in runs.items() if t in roles}
    for tid in sorted(busy, key=busy.get, reverse=True):
        d = [(e - s) * 1e6 for _, s, e, _ in runs[tid]]
        ends = collections.Counter(st for *_, st in runs[tid])
        print(f"  {roles[tid]:>9} {tid:>7}: {busy[tid] / span * 100:5.1f}% of a core, "
              f"{len(d)} turns, median {statistics.median(d):.0f}, p90 {_pct(d, .9):.0f}, "
              f"max {max(d):.0f}; ended {dict(ends)}")
    fwd = [t for t in busy if roles[t] == "forwarder"]
    if not fwd:
        return
    poller = max(fwd, key=busy.get)
    mine = sorted(runs[poller], key=lambda r: r[1])
    # Each core's turns in time order; they do not overlap, so their ends are in order too and
    # the turns within a wait are found by bisection (a scan of all of them per wait took
    # seconds for a trace of 0.2 s).
    by_cpu = collections.defaultdict(list)
    for tid, rs in runs.items():
        for cpu, s, e, _ in rs:
            by_cpu[cpu].append((s, e, tid))
    ends = {}
    for cpu, ts in by_cpu.items():
        ts.sort()
        ends[cpu] = [e for _, e, _ in ts]
    rows = []
    for (cpu, began, end, _), (cpu2, start, _, _) in zip(mine, mine[1:], strict=False):
        others = collections.Counter()
        ts = by_cpu[cpu]
        i = bisect.bisect_right(ends[cpu], end)  # the first turn that ends after the wait begins
        while i < len(ts) and ts[i][0] < start:
            s, e, tid = ts[i]
            others[roles.get(tid, "other")] += min(e, start) - max(s, end)
            i += 1
        rows.append(((start - end) * 1e6, (end - began) * 1e6, others, cpu != cpu2))
    gaps = [r[0] for r in rows]
    print(f"forwarder poller {poller}: waits between turns median {statistics.median(gaps):.0f}, "
          f"p90 {_pct(gaps, .9):.0f}, p99 {_pct(gaps, .99):.0f} us; moved cores "
          f"{sum(r[3] for r in rows)} times")
    for lo, hi in ((0, 50), (50, 150), (150, 300), (300, float("inf"))):
        sel = [r for r in rows if lo <= r[0] < hi]
        if not sel:
            continue
        who = collections.Counter()
        for r in sel:
            who.update(r[2])
        print(f"  waits of {lo}-{hi} us: {len(sel)}, after its own turns of median "
              f"{statistics.median(r[1] for r in sel):.0f} us; meanwhile on its core (us "
              "per wait): " + ", ".join(f"{k} {v / len(sel) * 1e6:.0f}"
                                       for k, v in who.most_common(4)))


def _job_up(job: subprocess.Popen) -> dict[int, str]:
    """The roles of a bridged job of `job` once one is up; {} if `job` ends first."""
    while job.poll() is None:
        roles = job_threads()
        if "forwarder" in roles.values() and len(set(roles.values())) > 1:
            return roles
        time.sleep(0.1)
    return {}


def main(argv: list[str]) -> int:
    """Parse the options, trace, report; 2 if no bridged job showed up or tracing failed."""
    split = argv.index("--") if "--" in argv else len(argv)
    parser = argparse.ArgumentParser(prog="sched_trace.py",
                                     usage="%(prog)s [--seconds S] [--delay D] [-- COMMAND ...]")
    parser.add_argument("--seconds", type=float, default=0.3, help="how long to trace")
    parser.add_argument("--delay", type=float, default=1.0,
                        help="seconds between COMMAND's bridged job coming up and the trace")
    args = parser.parse_args(argv[1:split])
    cmd = argv[split + 1:]
    job = subprocess.Popen(cmd) if cmd else None
    try:
        if job is None:
            roles = job_threads()
        elif roles := _job_up(job):
            time.sleep(args.delay)
            roles = job_threads()  # every thread the job has by now
        if "forwarder" not in roles.values():
            print("sched_trace: no bridged job is running", file=sys.stderr)
            return 2
        try:
            text = record(args.seconds)
        except OSError as exc:
            print(f"sched_trace: cannot trace through {TRACEFS} ({exc}); it needs root and a "
                  "kernel with tracefs", file=sys.stderr)
            return 2
        RAW.write_text(text)
    finally:
        if job is not None:
            job.wait()
    runs, span = turns(text)
    report(runs, span, roles)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
