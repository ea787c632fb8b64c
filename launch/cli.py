"""mmpi-run: run one MPI program across the low and high clusters, bridged by forwarders.

Exit statuses are listed in _status.py (and by ``mmpi-run --help``): the program's own, 128 + N
for death by signal N, and a few of mmpi-run's own.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import os
import shutil
import socket
import sys
import traceback
from collections.abc import Sequence
from typing import NoReturn

from mmpi.errors import MMPIError
from mmpi.wire import knobs as _knobs
from mmpi.wire import rendezvous as _rendezvous

from . import _command, _doctor, _monitoring, _openmpi, _status, hygiene
from . import config as _config
from ._overrides import with_overrides
from ._placement import LOCALHOST
from .plan import RENDEZVOUS_PLACEHOLDER, make_plan
from .runner import run

PROG = "mmpi-run"
# MMPI_* names that are not knobs but may well be in the environment (what mmpi-run sets in
# the jobs, the install's): never taken for a misspelt knob.
_NOT_KNOBS = {value for name, value in vars(_rendezvous).items() if name.startswith("ENV_")} | {
    "MMPI_SKIP_MPI_FINALIZE", "MMPI_VERBOSE", "MMPI_OUTPUT_MARK", "MMPI_NO_COMPILE"}


class _Parser(argparse.ArgumentParser):
    """argparse, with the mistake on the first line and the usage after it."""

    def error(self, message: str) -> NoReturn:
        """Print what was wrong, then the usage, and exit with the usage status."""
        self.exit(_status.USAGE, f"{self.prog}: error: {message}\n{self.format_usage()}")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=PROG,
        usage=f"{PROG} [-c job.yaml] [--low N] [--high N] [--forwarders N] "
        "[--placement block|paired] [--forwarder-cpus LIST] [--no-mpi4py-hook] "
        "[--rank-map MAP] [--monitor DIR] [--progress MODE] [--verbose] [--log FILE] "
        "[--dry-run] [--] command ...",
        description="Run one MPI program across two clusters whose networks are joined only by\n"
        "forwarder daemons on zipper nodes: starts the forwarder job(s), then one mpiexec job\n"
        "per cluster, and stops them all when one fails.",
        epilog="Without -c, everything runs on this machine: 2 low ranks, 2 high ranks and 1\n"
        "forwarder. The YAML schema is described in launch/config.py; a job file for this\n"
        "machine to start from: examples/two-clusters.yaml.\n\n" + _status.HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("-c", "--config", metavar="job.yaml", help="job description (YAML)")
    parser.add_argument("--low", type=int, metavar="N", help="number of ranks in cluster low")
    parser.add_argument("--high", type=int, metavar="N", help="number of ranks in cluster high")
    parser.add_argument(
        "--forwarders", type=int, metavar="N", help="forwarders on the (single) zipper node"
    )
    parser.add_argument(
        "--placement", metavar="block|paired",
        help="placement of both clusters' ranks (paired: rank i of each cluster bound to the "
        "same core)",
    )
    parser.add_argument(
        "--forwarder-cpus", type=_cpu_list, metavar="LIST",
        help="bind the forwarders of the (single) zipper node to these CPUs, e.g. 1 or 2,3",
    )
    parser.add_argument(
        "--no-mpi4py-hook", dest="mpi4py_hook", action="store_false", default=None,
        help="leave `from mpi4py import MPI` alone in the ranks: only `from mmpi import MPI` "
        "gives the bridged world, and a rank that imports mpi4py's MPI directly fails at once",
    )
    parser.add_argument(
        "--rank-map", metavar="MAP",
        help="run each virtual rank in the cluster this rank map gives it (a JSON file as "
        "mmpi-place writes it: {\"version\": 1, \"low\": [...], \"high\": [...]}); the "
        "program's ranks stay what it expects, only where each one runs changes",
    )
    parser.add_argument(
        "--monitor", metavar="DIR",
        help="count every rank's traffic per peer; each rank writes DIR/rank-<vrank>.json, "
        "and after a successful run mmpi-run merges them into DIR/matrix.npz and prints a "
        "summary (read it with mmpi-monitor and mmpi-place)",
    )
    parser.add_argument(
        "--progress", choices=_config.PROGRESS_MODES,
        help="a thread per rank advances non-blocking calls while the program computes: on "
        "the cluster leaders (leaders), every rank (all), or as docs/progress.md's model "
        "chooses for the hosts (auto); default: the job file's, else the environment's "
        "MMPI_PROGRESS, else off",
    )
    parser.add_argument(
        "-v", "--verbose", action="store_true",
        help="show all output of every rank, also the tracebacks of ranks that failed as a "
        "consequence of the first failure (by default only the first cause is shown)",
    )
    parser.add_argument(
        "--log", metavar="FILE",
        help="write all output of every rank and forwarder to FILE (by default it is kept only "
        "when the job fails, as mmpi-run.<time>.log in the current directory)",
    )
    parser.add_argument(
        "--doctor", action="store_true",
        help="check what can be checked of the job described (-c, else this machine) before "
        "running it: the MPI, the hosts (resolving, ssh, the same install), the rendezvous "
        "directory, interfaces, ports, /dev/shm, and a tiny test job; a line per check, what "
        "is fine and what to do; exit status 0 only when every check passed",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="print the mpiexec command lines and the rank -> host/core map, and exit",
    )
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the program and its arguments")
    return parser


def _cpu_list(text: str) -> list[int]:
    """`--forwarder-cpus`: comma-separated CPU numbers (checked further by the config)."""
    try:
        return [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected CPU numbers like 1 or 2,3, got {text!r}"
        ) from None


def main(argv: Sequence[str] | None = None) -> int:
    """Run mmpi-run with `argv` (default: sys.argv[1:]) and return the exit status."""
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, or a usage error argparse already reported
        return exc.code if isinstance(exc.code, int) else _status.USAGE
    command = list(args.command)
    if command[:1] == ["--"]:  # REMAINDER keeps the separator
        command = command[1:]
    if args.doctor:
        return _doctor_main(args, command)
    if not command:
        print(f"{PROG}: error: no command given: what should run on the ranks?", file=sys.stderr)
        parser.print_usage(sys.stderr)
        return _status.USAGE
    # The one place where exceptions become exit statuses.
    try:
        return _main(args, command)
    except MMPIError as exc:
        for line in str(exc).splitlines():  # one line per mistake (the knobs)
            print(f"{PROG}: {line}", file=sys.stderr)
        return _status.ERROR
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return _status.INTERRUPTED
    except Exception:
        traceback.print_exc()
        print(f"{PROG}: internal error (a bug in mmpi-run), see above", file=sys.stderr)
        return _status.INTERNAL


def _main(args: argparse.Namespace, command: list[str]) -> int:
    config = _config.load(args.config)
    config = with_overrides(
        config, low=args.low, high=args.high, forwarders=args.forwarders,
        placement=args.placement, forwarder_cpus=args.forwarder_cpus,
        mpi4py_hook=args.mpi4py_hook, rank_map=args.rank_map, monitor=args.monitor,
        progress=args.progress,
    )
    _check_knobs(config)
    bad = _command.check_interpreter(command)
    if bad is not None:
        print(f"{PROG}: {bad[1]}", file=sys.stderr)
        return bad[0]
    config = dataclasses.replace(config, launcher=dataclasses.replace(
        config.launcher, command=_command.launcher(config.launcher.command)))
    mpi = _openmpi.detect(config.launcher.command, config.launcher.mpi)
    plan = make_plan(config, command, RENDEZVOUS_PLACEHOLDER, mpi=mpi)
    if args.dry_run:
        sys.stdout.write(plan.describe())
        return 0
    # Everything that can be checked here is, before anything is made or started.
    _check_interfaces(config)
    if plan.on_this_host_only():  # else the command is for other hosts to find
        bad = _command.check(command) or _command.check_script(command)
        if bad is not None:
            print(f"{PROG}: {bad[1]}", file=sys.stderr)
            return bad[0]
    if args.verbose:  # the ranks say what they chose (the progress mode)
        os.environ["MMPI_VERBOSE"] = "1"
    # Directories of earlier runs whose mmpi-run and watchdog were both killed.
    hygiene.sweep_stale()
    rendezvous = _rendezvous.make_dir()
    try:
        hygiene.claim(rendezvous)
        plan = make_plan(config, command, str(rendezvous), mpi=mpi)
        if plan.monitor is not None:  # once the plan holds: an earlier run's files go
            _monitoring.prepare(plan.monitor)
        if plan.owners is not None:  # before anything starts: the forwarders read it
            _rendezvous.write_layout(rendezvous, plan.owners)
        status = run(
            plan, rendezvous=rendezvous, log=args.log, log_dir=os.getcwd(), verbose=args.verbose
        )
    finally:
        # run() removes it too, but not when make_plan failed first.
        shutil.rmtree(rendezvous, ignore_errors=True)
    if status == 0 and plan.monitor is not None:
        print(f"{PROG}: traffic of the job (--monitor {plan.monitor}):", file=sys.stderr)
        print(_monitoring.merge(plan.monitor), file=sys.stderr)
    return status


def _doctor_main(args: argparse.Namespace, command: list[str]) -> int:
    """mmpi-run --doctor: the job's checks, one line each (launch/_doctor.py)."""
    if command:
        print(f"{PROG}: error: --doctor runs its own test job; give no command "
              f"(got {' '.join(command)!r})", file=sys.stderr)
        return _status.USAGE
    try:
        config = with_overrides(
            _config.load(args.config), low=args.low, high=args.high,
            forwarders=args.forwarders, placement=args.placement,
            forwarder_cpus=args.forwarder_cpus, mpi4py_hook=args.mpi4py_hook)
        _check_knobs(config)
    except MMPIError as exc:
        for line in str(exc).splitlines():
            print(f"FAIL job description: {line}")
        print("0 checks run: the job description must hold first")
        return _status.ERROR
    config = dataclasses.replace(config, launcher=dataclasses.replace(
        config.launcher, command=_command.launcher(config.launcher.command)))
    flags = [f"--{name}={value}" for name, value in (("low", args.low), ("high", args.high),
                                                        ("forwarders", args.forwarders))
             if value is not None]
    text, status = _doctor.report(_doctor.examine(
        config, args.config, mmpi_run=[*_self_command(), *flags]))
    sys.stdout.write(text)
    return status


def _self_command() -> list[str]:
    """How to run this mmpi-run again (the console script beside this Python, else the module)."""
    import sysconfig

    beside = os.path.join(sysconfig.get_path("scripts"), PROG)
    return [beside] if os.path.isfile(beside) else [sys.executable, "-m", "launch"]


def _check_knobs(config: _config.Config) -> None:
    """ConfigError with a line per MMPI_* knob of our environment that the jobs would refuse.

    The jobs inherit the environment, and their readers would stop them only after a whole
    start-up (mmpi/wire/knobs.py has the bounds, shared with those readers). A knob the plan
    sets itself (--progress, --monitor) is not taken from here, so not checked.
    """
    skip: tuple[str, ...] = ()
    if config.progress is not None:
        skip += ("MMPI_PROGRESS", *_knobs.SET_BY_MMPI_RUN)
    if config.monitor is not None:
        skip += ("MMPI_MONITOR",)
    for name in sorted(os.environ):  # a misspelt knob would be ignored: say so, and go on
        if name.startswith("MMPI_") and name not in _knobs.KNOBS and name not in _NOT_KNOBS:
            close = difflib.get_close_matches(name, list(_knobs.KNOBS), n=1, cutoff=0.85)
            if close:
                print(f"{PROG}: warning: {name} is not a knob of mmpi, so it is ignored (did "
                      f"you mean {close[0]}?)", file=sys.stderr)
    problems = _knobs.problems(os.environ, skip)
    if problems:
        raise _config.ConfigError("", "\n".join(problems))


def _check_interfaces(config: _config.Config) -> None:
    """ConfigError naming the key path of an interface this host lacks where it is used here.

    A missing NIC otherwise surfaces only inside MPI, as peers that cannot reach each other.
    """
    here = {name for _, name in socket.if_nameindex()}
    # not behind a wrapper: `ip netns exec NS` runs it where other interfaces are
    wanted = [(f"clusters.{c.name}.interface", c.interface) for c in config.clusters
              if c.interface and not c.wrapper and all(h.name == LOCALHOST for h in c.hosts)]
    wanted += [(f"zipper[{i}].interfaces.{c}", nic) for i, z in enumerate(config.zipper)
               if z.host == LOCALHOST and not z.wrapper for c, nic in z.interfaces.items()]
    for path, nic in wanted:
        if nic not in here:
            raise _config.ConfigError(path, f"this host has no network interface {nic!r} "
                                            f"(it has {', '.join(sorted(here))})")


if __name__ == "__main__":
    raise SystemExit(main())
