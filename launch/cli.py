"""mmpi-run: run one MPI program across the low and high clusters, bridged by forwarders.

Exit status: the program's (the first failing job's) status, 0 on success; 1 for a bad job
description or a job that cannot start; 2 for bad usage; 130 on Ctrl-C; 3 for a bug in mmpi-run.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import traceback
from collections.abc import Sequence

from mmpi.errors import MMPIError
from mmpi.wire import rendezvous as _rendezvous

from . import config as _config
from .plan import RENDEZVOUS_PLACEHOLDER, make_plan
from .runner import run

PROG = "mmpi-run"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        usage=f"{PROG} [-c job.yaml] [--low N] [--high N] [--forwarders N] "
        "[--placement block|paired] [--forwarder-cpus LIST] [--dry-run] [--] command ...",
        description="Run one MPI program across two clusters whose networks are joined only "
        "by forwarder daemons on zipper nodes: starts the forwarder job(s), then one mpiexec "
        "job per cluster, and stops them all when one fails.",
        epilog="Without -c, everything runs on this machine: 2 low ranks, 2 high ranks and "
        "1 forwarder. The YAML schema is described in launch/config.py.",
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
        return exc.code if isinstance(exc.code, int) else 2
    command = list(args.command)
    if command[:1] == ["--"]:  # REMAINDER keeps the separator
        command = command[1:]
    if not command:
        parser.print_usage(sys.stderr)
        print(f"{PROG}: error: no command given: what should run on the ranks?", file=sys.stderr)
        return 2
    # The one place where exceptions become exit statuses.
    try:
        return _main(args, command)
    except MMPIError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except Exception:
        traceback.print_exc()
        print(f"{PROG}: internal error (a bug in mmpi-run), see above", file=sys.stderr)
        return 3


def _main(args: argparse.Namespace, command: list[str]) -> int:
    config = _config.load(args.config)
    config = _config.with_overrides(
        config, low=args.low, high=args.high, forwarders=args.forwarders,
        placement=args.placement, forwarder_cpus=args.forwarder_cpus,
    )
    if args.dry_run:
        sys.stdout.write(make_plan(config, command, RENDEZVOUS_PLACEHOLDER).describe())
        return 0
    rendezvous = _rendezvous.make_dir()
    try:
        plan = make_plan(config, command, str(rendezvous))
        return run(plan, rendezvous=rendezvous)
    finally:
        # run() removes it too, but not when make_plan failed first.
        shutil.rmtree(rendezvous, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
