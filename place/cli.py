"""mmpi-monitor (merge, show, plot a monitored job's matrices) and mmpi-place (advise a layout).

Exit status: 0 done; 1 a problem with the input, named in one line; 2 bad usage; 130 Ctrl-C;
3 a bug in the tool (with its traceback).
"""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path

from mmpi.errors import MMPIError

from .matrices import MATRIX_FILE, load_job, merge_rank_files, save_matrices


def monitor_main(argv: Sequence[str] | None = None) -> int:
    """Run mmpi-monitor."""
    return _run("mmpi-monitor", _monitor_parser(), argv)


def place_main(argv: Sequence[str] | None = None) -> int:
    """Run mmpi-place."""
    return _run("mmpi-place", _place_parser(), argv)


def _run(prog: str, parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> int:
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except (MMPIError, OSError) as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    except Exception:
        traceback.print_exc()
        print(f"{prog}: this is a bug in {prog}; please report it with the traceback above",
              file=sys.stderr)
        return 3


# -- mmpi-monitor -------------------------------------------------------------------------------
def _monitor_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="mmpi-monitor",
        description="Merge, summarise and plot the traffic matrices of a monitored job "
        "(mmpi-run --monitor DIR, or MMPI_MONITOR=DIR: one rank-<vrank>.json per rank).")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    m = sub.add_parser("merge", help=f"check the rank files, write DIR/{MATRIX_FILE}, "
                       "print a summary")
    m.add_argument("dir", metavar="DIR")
    m.add_argument("-o", "--output", metavar="FILE",
                   help=f"write the matrices here instead of DIR/{MATRIX_FILE}")
    m.add_argument("-q", "--quiet", action="store_true", help="print no summary")
    m.set_defaults(func=_merge)
    s = sub.add_parser("show", help="print the summary of DIR (or of a .npz file)")
    s.add_argument("path", metavar="DIR|FILE")
    s.add_argument("--phase", metavar="NAME", help="one phase only (default: all)")
    s.set_defaults(func=_show)
    g = sub.add_parser("plot", help="draw the matrices as heatmaps (needs matplotlib)")
    g.add_argument("path", metavar="DIR|FILE")
    g.add_argument("-o", "--output", metavar="FILE.png", required=True)
    g.add_argument("--phase", metavar="NAME", help="one phase only (default: all)")
    g.add_argument("--messages", action="store_true", help="plot message counts, not bytes")
    g.set_defaults(func=_plot)
    return p


def _merge(args: argparse.Namespace) -> int:
    job = merge_rank_files(args.dir)
    out = Path(args.output) if args.output else Path(args.dir) / MATRIX_FILE
    save_matrices(job, out)
    if not args.quiet:
        from .report import summarize

        print(summarize(job))
        print(f"wrote {out}")
    return 0


def _show(args: argparse.Namespace) -> int:
    from .report import summarize

    job = load_job(args.path)
    if args.phase:
        job.phase_index(args.phase)
    print(summarize(job, args.phase))
    return 0


def _plot(args: argparse.Namespace) -> int:
    from .plot import plot_job

    job = load_job(args.path)
    if args.phase:
        job.phase_index(args.phase)
    plot_job(job, args.output, args.phase, "msgs" if args.messages else "bytes")
    print(f"wrote {args.output}")
    return 0


# -- mmpi-place ---------------------------------------------------------------------------------
def _place_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="mmpi-place",
        description="Propose which application ranks run in which cluster so that the fewest "
        "bytes cross the zipper, from a monitored run's matrices, and write it as a rank map "
        "for mmpi-run --rank-map.",
        epilog='The rank map is JSON: {"version": 1, "low": [ranks...], "high": [ranks...]}.')
    p.add_argument("path", metavar="DIR", help="what mmpi-run --monitor wrote (or a .npz)")
    p.add_argument("--low", type=_count, required=True, metavar="X",
                   help="ranks in the low cluster")
    p.add_argument("--high", type=_count, required=True, metavar="Y",
                   help="ranks in the high cluster")
    p.add_argument("-o", "--output", metavar="MAP", help="write the proposed rank map here")
    p.add_argument("--phase", metavar="NAME", help="place for one phase's traffic only")
    p.add_argument("--kind", choices=("p2p", "total"), default="p2p",
                   help="traffic to keep local: p2p (default; collectives cross between "
                   "leaders whatever the layout) or total")
    p.set_defaults(func=_place)
    return p


def _place(args: argparse.Namespace) -> int:
    from .advice import advise, format_advice
    from .rankmap import write_rank_map

    job = load_job(args.path)
    if args.phase:
        job.phase_index(args.phase)
    if args.output and not Path(args.output).resolve().parent.is_dir():
        raise OSError(f"cannot write {args.output}: no such directory")
    advice = advise(job, args.low, args.high, args.kind, args.phase)
    print(format_advice(advice))
    if args.output:
        write_rank_map(args.output, advice.owners)
        print(f"wrote {args.output} (mmpi-run --rank-map {args.output})")
    return 0


def _count(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of ranks, got {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"expected at least 1 rank, got {v}")
    return v
