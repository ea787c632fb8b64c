"""Where a crossing's time goes: CPU per message in each process, and the rest of the way.

CPU per message in the sending rank, the forwarder and the receiving rank, and the rest of
the one-way time (waiting for a core, MPI's own transfer).

    python benchmarks/breakdown.py [--sizes 8,64K] [--relay auto|compiled|python]
                                   [--rank-path auto|compiled|python] [--rounds 3]

For each size it runs bridged 1+1 jobs (`mmpi-run`): a stream of N one-way messages in windows
of 64 (osu_bw), once with N and once with 3N messages, and a ping-pong. Each rank reads its own
CPU time (getrusage: user + system) around the timed part. The forwarder polls whether there is
work or not, so its CPU time says how much of a core it got, not what a message costs: its
figure is its *busy* time (the polls that moved something, from its summary line), the
difference between the two streams divided by the 2N extra messages, so that start-up and
shutdown cancel out. A figure is the median over the rounds. On a machine with
fewer cores than processes (this one: 2 cores, 3 processes), the one-way latency minus the CPU
of the three hops is time spent waiting for a core or inside MPI's transfer.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import time

WINDOW = 64
MARK = "BREAKDOWN"


def _cpu() -> float:
    use = resource.getrusage(resource.RUSAGE_SELF)
    return use.ru_utime + use.ru_stime


# -- the MPI side (under mmpi-run) ---------------------------------------------------------------
def worker(kind: str, size: int, count: int) -> None:
    """One rank's side: `count` messages of `size` bytes of `kind`, timed."""
    import numpy as np

    from mmpi import MPI

    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    peer = 1 - rank
    buf = np.ones(size, np.uint8)
    ack = np.zeros(1, np.uint8)
    comm.Barrier()
    if kind == "stream":
        windows = max(1, count // WINDOW)
        for w in range(windows + 2):  # two windows of warm-up
            if w == 2:
                t0, c0 = time.perf_counter(), _cpu()
            if rank == 0:
                MPI.Request.Waitall([comm.Isend(buf, 1, 1) for _ in range(WINDOW)])
                comm.Recv(ack, 1, 2)
            else:
                MPI.Request.Waitall([comm.Irecv(buf, 0, 1) for _ in range(WINDOW)])
                comm.Send(ack, 0, 2)
        n = windows * WINDOW
    else:  # pingpong
        for i in range(count + 50):
            if i == 50:
                t0, c0 = time.perf_counter(), _cpu()
            if rank == 0:
                comm.Send(buf, peer, 1)
                comm.Recv(buf, peer, 1)
            else:
                comm.Recv(buf, peer, 1)
                comm.Send(buf, peer, 1)
        n = 2 * count  # one-way messages
    wall, cpu = time.perf_counter() - t0, _cpu() - c0
    print(f"{MARK} " + json.dumps({"rank": rank, "kind": kind, "size": size, "messages": n,
                                   "wall": wall, "cpu": cpu}), flush=True)


# -- the driver ----------------------------------------------------------------------------------
def _job(kind: str, size: int, count: int, relay: str) -> tuple[dict, float]:
    """Run one bridged 1+1 job; its ranks' records, and the forwarder's busy seconds."""
    exe = shutil.which("mmpi-run") or "mmpi-run"
    env = dict(os.environ, MMPI_RELAY=relay, MMPI_VERBOSE="1")
    p = subprocess.run([exe, "--low", "1", "--high", "1", sys.executable, __file__, "--worker",
                        kind, str(size), str(count)], capture_output=True, text=True, env=env,
                       timeout=600)
    if p.returncode:
        raise SystemExit(f"breakdown: the {kind} job failed:\n{p.stdout[-2000:]}{p.stderr[-2000:]}")
    recs = {}
    for line in p.stdout.splitlines():
        if MARK in line:
            r = json.loads(line.split(MARK, 1)[1])
            recs[r["rank"]] = r
    m = re.search(r"done in .*; cpu [0-9.]+ s, busy ([0-9.]+) s", p.stdout)
    used = re.search(r"relay (\w+)", p.stdout)
    path = re.search(r"crossing path (\w+)", p.stdout + p.stderr)
    if len(recs) != 2 or not m:
        raise SystemExit(f"breakdown: no figures from the {kind} job:\n{p.stdout[-2000:]}")
    recs["relay"] = (used.group(1) if used else "?") + "/" + (path.group(1) if path else "?")
    return recs, float(m.group(1))


def measure(size: int, relay: str, base: int) -> dict:
    """One round for one size: CPU per message per process, one-way latency."""
    small, s_fwd = _job("stream", size, base, relay)
    large, l_fwd = _job("stream", size, 3 * base, relay)
    ping, _ = _job("pingpong", size, max(200, base // 20), relay)
    extra = large[0]["messages"] - small[0]["messages"]
    return {
        "relay": large["relay"],
        "send_us": 1e6 * large[0]["cpu"] / large[0]["messages"],
        "fwd_us": 1e6 * (l_fwd - s_fwd) / extra,
        "recv_us": 1e6 * large[1]["cpu"] / large[1]["messages"],
        "stream_us": 1e6 * large[1]["wall"] / large[1]["messages"],
        "oneway_us": 1e6 * ping[0]["wall"] / ping[0]["messages"],
        "ping_cpu_us": 1e6 * (ping[0]["cpu"] + ping[1]["cpu"]) / ping[0]["messages"],
    }


def _size(text: str) -> int:
    text = text.strip().upper()
    scale = {"K": 1 << 10, "M": 1 << 20}.get(text[-1:], 1)
    return int(text[:-1] if scale > 1 else text) * scale


def main(argv=None) -> int:
    """Run the breakdown (or, with --worker, one job's side of it)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--worker", nargs=3, metavar=("KIND", "SIZE", "COUNT"), help=argparse.SUPPRESS)
    ap.add_argument("--sizes", default="8,64K")
    ap.add_argument("--relay", default="auto", choices=("auto", "compiled", "python"))
    ap.add_argument("--rank-path", default="auto", choices=("auto", "compiled", "python"),
                    help="the ranks' crossing path (MMPI_RANK_PATH)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--messages", type=int, default=20000,
                    help="messages of the shorter stream (the longer has three times as many)")
    args = ap.parse_args(argv)
    if args.worker:
        kind, size, count = args.worker
        worker(kind, int(size), int(count))
        return 0
    os.environ["MMPI_RANK_PATH"] = args.rank_path  # for the jobs' ranks
    print("# size  relay/ranks       send cpu/msg fwd busy/msg  recv cpu/msg  stream/msg  one way "
          " ping cpu/hop (us; medians of rounds)")
    for size in map(_size, args.sizes.split(",")):
        base = args.messages if size <= 4096 else max(640, args.messages // 20)
        rounds = [measure(size, args.relay, base) for _ in range(args.rounds)]
        med = {k: statistics.median(r[k] for r in rounds) for k in rounds[0] if k != "relay"}
        print(f"{size:<7} {rounds[0]['relay']:<17} {med['send_us']:12.2f} {med['fwd_us']:12.2f} "
              f"{med['recv_us']:13.2f} {med['stream_us']:11.2f} {med['oneway_us']:8.2f} "
              f"{med['ping_cpu_us']:13.2f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
