"""`mmpi-forwarder`: command-line entry of the forwarder daemon (run as an MPI job of 1)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from mmpi.wire import MMPIError, backoff
from mmpi.wire import rendezvous as R
from mmpi.wire.knobs import env_choice, env_int


def _default_mode() -> str:
    """MMPI_FWD_MODE, else the older MMPI_FWD_THREADS (1: single, 2: direction), else split."""
    if os.environ.get("MMPI_FWD_MODE", "").strip():
        return env_choice("MMPI_FWD_MODE")
    threads = env_choice("MMPI_FWD_THREADS")
    return {"1": "single", "2": "direction"}.get(threads or "", "split")


def main(argv: Sequence[str] | None = None) -> int:
    """Parse arguments, run one forwarder, map errors to exit codes."""
    ap = argparse.ArgumentParser(prog="mmpi-forwarder", description=__doc__)
    ap.add_argument("--rendezvous", default=os.environ.get(R.ENV_RENDEZVOUS),
                    help="the job's private rendezvous directory (set by mmpi-run)")
    ap.add_argument("--index", type=int, default=0, help="forwarder number within the job")
    ap.add_argument("--connect-timeout", type=float, default=60.0,
                    help="seconds to wait for both clusters to connect")
    ap.add_argument("--chunk", type=int, default=None, help="chunk size of large messages")
    ap.add_argument("--mode", choices=("split", "direction", "single"), default=None,
                    help="relay threads: split = one for all envelopes, small and single-chunk "
                         "messages plus one per direction for multi-chunk transfers (default); "
                         "direction = one per direction; single = one for everything "
                         "(default: MMPI_FWD_MODE)")
    ap.add_argument("--relay", choices=("auto", "compiled", "python"),
                    default=None,
                    help="the relay loop: compiled (C, built at install where a compiler is "
                         "present), python (the reference), or auto: compiled if built "
                         "(default; MMPI_RELAY)")
    args, _ = ap.parse_known_args(argv)  # extra words (e.g. test markers) are ignored
    if not args.rendezvous:
        ap.error("--rendezvous is required (or MMPI_RENDEZVOUS in the environment)")
    try:
        from .daemon import Forwarder  # here: it reads knobs that may be wrong

        # the knobs here, inside the try: a bad one is one line, as any error
        backoff.policy()
        chunk = args.chunk or env_int("MMPI_CHUNK")
        return Forwarder(args.rendezvous, index=args.index,
                         connect_timeout=args.connect_timeout, chunk=chunk,
                         mode=args.mode or _default_mode(),
                         relay=args.relay or env_choice("MMPI_RELAY")).run()
    except MMPIError as exc:
        print(f"mmpi-forwarder[{args.index}]: {exc}", file=sys.stderr, flush=True)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
