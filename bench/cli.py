"""mmpi-bench: run each benchmark natively and bridged, one job after the other, and compare.

The driver never touches MPI itself. It plans up to seven jobs of ``python -m bench.worker``
- point-to-point benchmarks on 2 native ranks, on two one-rank jobs joined by Comm_connect (the
native across-jobs baseline, see across.py), then bridged on 1+1; concurrent pairs on 2N native
ranks, then bridged on N+N (--pairs); the rest on low+high native ranks, then bridged on
low+high - runs them strictly one at a time (concurrent jobs would share
the same cores and measure each other), reads the ``MMPI-BENCH`` lines from their output, and
reports tables, optionally JSON and PNG plots.

Exit status: 0 when every job finished; 1 when a job failed or timed out (what was measured is
still reported), or --plot is asked for without matplotlib; 2 for bad usage; 130 on Ctrl-C; 3 for
a bug in mmpi-bench.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from launch import detect_mpi, hygiene, launcher, openmpi_env

from . import _busy, loggp, report, targets
from ._catalog import BENCHES, MARKER
from ._plan import DEFAULT_PAIRS, Run, describe_layouts, plan_runs, plan_specs

PROG = "mmpi-bench"
DEFAULT_TIMEOUT = 1200.0
_STOP_GRACE = 10.0  # seconds between SIGTERM and SIGKILL for a job that overran
_ENV_DROP = ("MMPI_RENDEZVOUS", "MMPI_CLUSTER")  # a worker must not think it was bridged


class BenchError(Exception):
    """A problem to report in one line and exit 1 for."""


class _Terminated(BaseException):
    """SIGTERM or SIGHUP arrived: stop the running job on the way out, like Ctrl-C."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


@dataclass
class Outcome:
    """What one job produced."""

    run: Run
    status: str = "not run"  # ok | failed | timeout | not run
    returncode: int | None = None
    seconds: float = 0.0
    env: dict | None = None
    results: list[dict] = field(default_factory=list)
    tail: list[str] = field(default_factory=list)
    load_before: tuple[float, float, float] | None = None
    others_before: float | None = None  # runnable processes not ours as the job started
    load_after: tuple[float, float, float] | None = None

    def summary(self) -> dict:
        """Return the JSON form (the results go into the merged rows instead)."""
        return {
            "mode": self.run.mode, "group": self.run.group, "argv": list(self.run.argv),
            "status": self.status, "returncode": self.returncode,
            "seconds": round(self.seconds, 2), "results": len(self.results),
            "loadavg_before": self.load_before, "loadavg_after": self.load_after,
            "others_running_before": self.others_before,
            "worker": {k: v for k, v in (self.env or {}).items() if k != "type"},
        }


# -- command line -------------------------------------------------------------------------------
def _parser() -> argparse.ArgumentParser:
    names = ", ".join(BENCHES)
    p = argparse.ArgumentParser(
        prog=PROG,
        description="Run MPI benchmarks natively (one mpiexec job) and bridged (mmpi-run, "
        "across the zipper) one after the other, and report both with their ratio.",
        epilog=f"Benchmarks: {names}. Point-to-point ones (latency, bw, bibw) run on 2 native "
        "ranks and on 1+1 bridged ranks; pairs on --pairs ranks per side (1 to N concurrent "
        "pairs); the others on low+high ranks both ways.",
    )
    p.add_argument("benchmarks", nargs="*", metavar="BENCH", help="benchmarks to run")
    p.add_argument("--all", action="store_true", help="run every benchmark")
    p.add_argument("--low", type=_positive_int, default=2, metavar="N",
                   help="ranks in the low cluster (default 2)")
    p.add_argument("--forwarders", type=_positive_int, default=1, metavar="N",
                   help="forwarders in bridged runs (default 1)")
    p.add_argument("--high", type=_positive_int, default=2, metavar="N",
                   help="ranks in the high cluster (default 2)")
    p.add_argument("--pairs", type=_positive_int, default=DEFAULT_PAIRS, metavar="N",
                   help="ranks per cluster of the pairs benchmark, which measures 1 to N "
                   f"concurrent cross-cluster pairs (default {DEFAULT_PAIRS})")
    p.add_argument("--bind", action="store_true",
                   help="bind processes to cores: native ranks with mpiexec -bind-to core, "
                   "bridged ranks paired (rank i of each cluster on core i) and the "
                   "forwarders on the last cores (the across-jobs baseline and the pairs "
                   "layout stay unbound)")
    p.add_argument("--sizes", type=parse_sizes, metavar="LIST",
                   help="message sizes instead of the defaults, e.g. 8,64K,1M")
    p.add_argument("--iters-scale", type=_positive_float, default=1.0, metavar="F",
                   help="scale the time spent per point (e.g. 0.02 for a smoke test)")
    p.add_argument("--target-ms", type=_positive_float, default=100.0, metavar="MS",
                   help="time to spend on each point, all repetitions (default 100)")
    p.add_argument("--reps", type=_positive_int, default=5, metavar="N",
                   help="repetitions per point; the median is reported (default 5)")
    p.add_argument("--max-iters", type=_positive_int, default=10000, metavar="N",
                   help="most iterations in one repetition (default 10000)")
    p.add_argument("--compute", choices=("sleep", "busy"), default="sleep",
                   help="the computation of the overlap benchmarks (ibcast ... isendrecv): "
                        "sleep, or numpy arithmetic that keeps a core busy (default sleep)")
    p.add_argument("--json", metavar="FILE", help="write every figure and the environment")
    p.add_argument("--plot", metavar="DIR", help="write PNG charts (needs matplotlib)")
    p.add_argument("--from-json", metavar="FILE",
                   help="measure nothing: print the tables (and --plot) of an earlier --json")
    p.add_argument("--targets", nargs="+", metavar="FILE",
                   help="measure nothing: print each --json file's ratio per performance "
                   "target, then per target the median, range and runs meeting it")
    p.add_argument("--timeout", type=_positive_float, default=DEFAULT_TIMEOUT, metavar="S",
                   help=f"seconds allowed per job (default {DEFAULT_TIMEOUT:.0f})")
    p.add_argument("--dry-run", action="store_true", help="print the planned jobs and exit")
    p.add_argument("-v", "--verbose", action="store_true", help="echo the jobs' own output")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines on stderr")
    return p


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return value


_SIZE = re.compile(r"^(\d+)\s*([kmg]?)(i?b)?$", re.IGNORECASE)
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}


def parse_sizes(text: str) -> tuple[int, ...]:
    """Parse ``8,64K,1M`` (binary multiples, optional ``B``/``iB``) into sorted unique bytes."""
    sizes = set()
    for item in text.split(","):
        m = _SIZE.match(item.strip())
        if not m:
            raise argparse.ArgumentTypeError(
                f"cannot read size {item.strip()!r}: use bytes or K/M/G, e.g. 8,64K,1M")
        size = int(m.group(1)) * _UNITS[m.group(2).lower()]
        if size < 1:
            raise argparse.ArgumentTypeError(f"sizes start at 1 byte, got {item.strip()!r}")
        sizes.add(size)
    return tuple(sorted(sizes))


def main(argv: Sequence[str] | None = None) -> int:
    """Run mmpi-bench with `argv` (default: sys.argv[1:]) and return the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, or a usage error argparse already reported
        return exc.code if isinstance(exc.code, int) else 2
    names = list(BENCHES) if args.all else list(dict.fromkeys(args.benchmarks))
    unknown = [n for n in names if n not in BENCHES]
    if unknown or not (names or args.from_json or args.targets):
        parser.print_usage(sys.stderr)
        what = (f"unknown benchmark {unknown[0]!r}" if unknown else "no benchmark given")
        print(f"{PROG}: error: {what}; choose from {', '.join(BENCHES)} or use --all",
              file=sys.stderr)
        return 2
    # The one place where exceptions become exit statuses.
    try:
        with _signals_raise():
            return _main(args, names, argv)
    except (BenchError, report.PlotUnavailable) as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except _Terminated as exc:
        print(f"{PROG}: received {signal.Signals(exc.signum).name}", file=sys.stderr)
        return 128 + exc.signum
    except Exception:
        traceback.print_exc()
        print(f"{PROG}: internal error (a bug in mmpi-bench), see above", file=sys.stderr)
        return 3


def _main(args: argparse.Namespace, names: list[str], argv: list[str]) -> int:
    if args.plot:
        report.require_matplotlib()  # before minutes of measuring, not after
    if args.from_json:
        return _replay(args, names)
    if args.targets:
        return _targets(args.targets)
    specs = plan_specs(names, args.sizes)
    for name in names:
        if name not in specs and BENCHES[name].sizes:
            _note(args, f"{name}: none of the requested sizes is at least "
                        f"{BENCHES[name].min_size} B; skipped")
    if not specs:
        raise BenchError("nothing to run with these sizes")
    mmpi_run = [*_mmpi_run_cmd(), "--forwarders", str(args.forwarders)]
    mpiexec = _mpiexec()
    openmpi = detect_mpi(mpiexec) == "openmpi"
    runs = plan_runs(specs, args.low, args.high, worker_args(args),
                     mmpi_run=mmpi_run, mpiexec=mpiexec, pairs=args.pairs,
                     bind_cpus=_usable_cpus() if args.bind else (), forwarders=args.forwarders,
                     native_env=tuple(openmpi_env(mpiexec, os.environ).items()) if openmpi
                     else None)
    layouts = describe_layouts(args.low, args.high, args.forwarders, args.pairs, args.bind,
                               dvm=openmpi)
    if args.dry_run:
        for run in runs:
            print(f"# {run.mode} {run.group}\n"
                  f"{' '.join([*(f'{k}={v}' for k, v in run.env), *run.argv])}")
        return 0
    load, started = _loadavg(), report.now()
    others = _busy.others_running()
    warn = _busy.warning(others, _busy.cpus())
    if warn:
        print(f"{PROG}: warning: {warn}", file=sys.stderr)
    outcomes = [_run_reporting_failure(run, args) for run in runs]
    _report(args, argv, outcomes, load, layouts, started, others)
    return 0 if all(o.status == "ok" for o in outcomes) else 1


def _replay(args: argparse.Namespace, names: list[str]) -> int:
    try:
        with open(args.from_json) as f:
            doc = json.load(f)
        rows, env = doc["results"], doc["environment"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise BenchError(f"cannot read results from {args.from_json}: {exc}") from exc
    if names:
        rows = [r for r in rows if r["bench"] in names]
    layouts = doc.get("layouts") or {}
    sys.stdout.write(report.format_header(env, env.get("loadavg_start"))
                     + report.format_tables(rows, layouts))
    if args.plot:
        written = report.write_plots(rows, args.plot, layouts)
        _note(args, f"wrote {len(written)} plots to {args.plot}")
    return 0


def _targets(files: Sequence[str]) -> int:
    runs = []
    for name in files:
        try:
            with open(name) as f:
                runs.append((name, targets.ratios(json.load(f))))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise BenchError(f"{name}: not an mmpi-bench --json file ({exc})") from exc
    sys.stdout.write(targets.format_report(runs))
    return 0


def _run_reporting_failure(run: Run, args: argparse.Namespace) -> Outcome:
    outcome = run_job(run, args.timeout, progress=None if args.quiet else _progress,
                      echo=args.verbose)
    if outcome.status != "ok":
        print(f"{PROG}: {run.mode} {run.group} job {outcome.status} "
              f"(exit status {outcome.returncode}); its last output:", file=sys.stderr)
        sys.stderr.write("".join(f"  | {line}" for line in outcome.tail[-25:]))
    return outcome


def _report(args: argparse.Namespace, argv: list[str], outcomes: list[Outcome],
            load: tuple[float, float, float] | None, layouts: dict[str, str],
            started: str, others_at_start: float | None = None) -> None:
    """Tables on stdout; JSON and plots when asked for. Partial results are reported too."""
    rows = report.merge({m: [r for o in outcomes if o.run.mode == m for r in o.results]
                         for m in report.MODES})
    env = report.environment(_first(outcomes, None), argv)
    env.update(loadavg_start=load, date=started, finished=report.now())
    others = [n for n in (others_at_start, *(o.others_before for o in outcomes))
              if n is not None]
    ncpus = _busy.cpus()
    env["busy"] = {"cpus": ncpus, "most_others_running": max(others) if others else None,
                   "warning": _busy.warning(max(others) if others else None, ncpus)}
    sys.stdout.write(report.format_header(env, load) + report.format_tables(rows, layouts))
    found = loggp.fits(rows)
    if found:
        sys.stdout.write("\n" + loggp.format_fits(found) + loggp.check(found, rows))
    if args.json:
        doc = report.document(
            rows, env, layouts=layouts,
            settings={"low": args.low, "high": args.high, "pairs": args.pairs,
                      "sizes": args.sizes,
                      "target_ms": args.target_ms, "reps": args.reps,
                      "iters_scale": args.iters_scale, "max_iters": args.max_iters,
                      "timeout": args.timeout, "window": _first(outcomes, "window")},
            runs=[o.summary() for o in outcomes])
        if found:
            doc["loggp"] = [r.as_json(p) for p, regs in found.items() for r in regs]
            doc["loggp_residuals"] = [{"path": p, "from": r.lo, "to": r.hi,
                                       "residual": r.residual, "one_way": r.rt_residual,
                                       "noise": list(r.noise)}
                                      for p, regs in found.items() for r in regs]
        _note(args, f"wrote {report.write_json(args.json, doc)}")
    if args.plot:
        written = report.write_plots(rows, args.plot, layouts)
        _note(args, f"wrote {len(written)} plots to {args.plot}")


def _first(outcomes: list[Outcome], key: str | None):
    """Return the first worker's environment record (key None), or one entry of it."""
    envs = [o.env for o in outcomes if o.env]
    if key is None:
        return envs[0] if envs else None
    return next((e[key] for e in envs if key in e), None)


def _note(args: argparse.Namespace, text: str) -> None:
    if not args.quiet:
        print(f"{PROG}: {text}", file=sys.stderr)


def worker_args(args: argparse.Namespace) -> tuple[str, ...]:
    """Return the measuring options every worker gets."""
    return ("--target-ms", f"{args.target_ms:g}", "--reps", str(args.reps),
            "--iters-scale", f"{args.iters_scale:g}", "--max-iters", str(args.max_iters),
            "--compute", getattr(args, "compute", "sleep"))


def _usable_cpus() -> list[int]:
    """The CPU numbers this process may run on, ascending (all of them where unknown)."""
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


def _mmpi_run_cmd() -> list[str]:
    exe = shutil.which("mmpi-run")
    return [exe] if exe else [sys.executable, "-m", "launch"]


def _mpiexec() -> str:
    exe = shutil.which(launcher("mpiexec"))
    if not exe:
        raise BenchError("mpiexec is not on PATH: install the mpich wheel (pip install mpich) "
                         "or a system MPI")
    return exe


# -- running ------------------------------------------------------------------------------------
def parse_line(line: str) -> dict | None:
    """Return the JSON record in a worker line, wherever a launcher's prefix put the marker."""
    at = line.find(MARKER + " ")
    if at < 0:
        return None
    try:
        record = json.loads(line[at + len(MARKER) + 1:])
    except ValueError:
        return None
    return record if isinstance(record, dict) and "type" in record else None


def run_job(run: Run, timeout: float, *, progress: Callable[[Run, dict], None] | None = None,
            echo: bool = False) -> Outcome:
    """Run one job to completion (or `timeout`), collecting its records."""
    outcome = Outcome(run, load_before=_loadavg(), others_before=_busy.others_running())
    shm_before = hygiene.shm_files()
    env = {k: v for k, v in os.environ.items() if k not in _ENV_DROP}
    env.update(run.env)
    t0 = time.monotonic()
    proc = subprocess.Popen(run.argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, errors="replace", env=env,
                            start_new_session=True,  # its own group: we can stop all of it
                            preexec_fn=hygiene.die_with_parent())
    overran = threading.Event()

    def overrun() -> None:
        overran.set()
        _stop_group(proc)

    timer = threading.Timer(timeout, overrun)
    timer.daemon = True
    timer.start()
    tail: deque[str] = deque(maxlen=60)
    done = False
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            record = parse_line(line)
            if record is None:
                tail.append(line)
                if echo:
                    sys.stderr.write(line)
            elif record["type"] == "env":
                outcome.env = record
            elif record["type"] == "result":
                outcome.results.append(record)
                if progress:
                    progress(run, record)
            elif record["type"] == "done":
                done = True
        proc.wait()
    except BaseException:
        _stop_group(proc)
        hygiene.remove_new_shm(shm_before)
        raise
    finally:
        timer.cancel()
        if proc.stdout:
            proc.stdout.close()
    outcome.returncode = proc.returncode
    outcome.seconds = time.monotonic() - t0
    outcome.tail = list(tail)
    outcome.load_after = _loadavg()
    if overran.is_set():
        outcome.status = "timeout"
        outcome.tail.append(f"(stopped after the {timeout:g} s timeout)\n")
    elif proc.returncode != 0 or not done:
        outcome.status = "failed"
    elif outcome.env and outcome.env.get("bridged") != (run.mode == "bridged"):
        outcome.status = "failed"
        outcome.tail.append(f"(the {run.mode} job reported bridged={outcome.env.get('bridged')})\n")
    else:
        outcome.status = "ok"
    if outcome.status != "ok":
        hygiene.remove_new_shm(shm_before)
    return outcome


@contextlib.contextmanager
def _signals_raise() -> Iterator[None]:
    def handler(signum: int, _frame) -> None:
        raise _Terminated(signum)

    # A signal that was ignored when we started (nohup) stays ignored.
    saved = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGHUP)
             if signal.getsignal(s) is not signal.SIG_IGN}
    try:
        yield
    finally:
        for signum, previous in saved.items():
            signal.signal(signum, previous)


def _stop_group(proc: subprocess.Popen) -> None:
    """SIGTERM the job's process group (mmpi-run and mpiexec stop their ranks), then SIGKILL."""
    for sig, grace in ((signal.SIGTERM, _STOP_GRACE), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(grace)
            return
        except subprocess.TimeoutExpired:
            continue


def _loadavg() -> tuple[float, float, float] | None:
    try:
        return os.getloadavg()
    except OSError:
        return None


def _progress(run: Run, rec: dict) -> None:
    where = f"{run.mode:<7} {rec['bench']:<9}"
    point = "" if rec["bench"] == "barrier" else f" {rec['size']:>8} B"
    if "pairs" in rec:
        point += f" x{rec['pairs']}"
    print(f"{PROG}: {where}{point}: {rec['value']:.2f} {rec['unit']} ({rec['iters']} iters)",
          file=sys.stderr, flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
