"""Command line: ``python -m nas_ports {ep,is,cg,mg,lu} --class {S,W,A,B}``."""

from __future__ import annotations

import argparse
import importlib
import sys
import traceback
from collections.abc import Sequence
from types import ModuleType

from . import CLASSES, KERNELS, MissingExtra
from ._npb import World, format_report

# `is` is a Python keyword, so the IS kernel lives in is_.py.
_MODULES = {"ep": "ep", "is": "is_", "cg": "cg", "mg": "mg", "lu": "lu"}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m nas_ports",
        description="Run an NPB 3.4 kernel (Python port) on mmpi's MPI.COMM_WORLD.",
    )
    p.add_argument("kernel", choices=KERNELS, help="benchmark to run")
    p.add_argument(
        "--class", dest="klass", choices=CLASSES, default="S", help="problem class (default S)"
    )
    return p


def _kernel_module(kernel: str) -> ModuleType:
    """Import one kernel's module (and with it MPI)."""
    return importlib.import_module(f"{__package__}.{_MODULES[kernel]}")


def main(argv: Sequence[str] | None = None) -> int:
    """Run one kernel; return 0 when rank 0 verified it, 1 when not, 3 on an internal error.

    A kernel whose packages (the ``nas`` extra) are missing says so and returns 1.
    """
    args = _parser().parse_args(argv)
    # Import the kernel (and with it MPI) only after the arguments are known to be good.
    try:
        module = _kernel_module(args.kernel)
    except MissingExtra as exc:  # before MPI starts: every rank says so and exits
        print(f"python -m nas_ports: {exc}", file=sys.stderr)
        return 1
    from mmpi import MPI

    world = World.from_mpi(MPI)
    try:
        result = module.run(world, args.klass)
    except (SystemExit, KeyboardInterrupt):
        raise
    except Exception:
        traceback.print_exc()
        sys.stderr.flush()
        # One rank failing must not leave the others blocked in a receive.
        abort = getattr(world.comm, "Abort", None)
        if world.size > 1 and abort is not None:
            abort(3)
        return 3
    if world.rank != 0:
        return 0
    print(format_report(result, world), flush=True)
    return 0 if result.verified else 1


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    except KeyboardInterrupt:
        raise SystemExit(130) from None
