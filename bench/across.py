"""The native across-jobs baseline: two one-rank MPI jobs joined by Comm_accept/Comm_connect.

A forwarded message travels between separately launched jobs, and MPI between two jobs can
take a different, slower transport path than inside one. So mmpi-bench measures the
point-to-point benchmarks a third way, with plain MPI between two jobs, and reports the
bridged figures against that too.

``python -m bench.across MPIEXEC WORKER...`` starts ``MPIEXEC -n 1 WORKER...`` twice;
the workers find each other through a port file in a private temporary directory (named in
``MMPI_BENCH_ACROSS``) and merge the intercommunicator into a 2-rank communicator. On Open MPI
both jobs run in a DVM started for them (Open MPI connects the jobs of one DVM only).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from launch import DVMError, detect_mpi, openmpi_dvm

ENV = "MMPI_BENCH_ACROSS"  # "<directory>:<accept|connect>"
ROLES = ("accept", "connect")
CONNECT_TIMEOUT = 60.0


def join(mpi):
    """In a worker started by main(): the merged 2-rank communicator (accept side is rank 0)."""
    directory, _, role = os.environ[ENV].rpartition(":")
    port_file = Path(directory) / "port"
    if role == "accept":
        port = mpi.Open_port()
        tmp = port_file.with_name("port.tmp")
        tmp.write_text(port)
        tmp.rename(port_file)  # atomically: the other side never reads half a port name
        inter = mpi.COMM_WORLD.Accept(port)
        mpi.Close_port(port)
    elif role == "connect":
        deadline = time.monotonic() + CONNECT_TIMEOUT
        while not port_file.exists():
            if time.monotonic() > deadline:
                raise SystemExit(f"across: no port file in {directory} after "
                                 f"{CONNECT_TIMEOUT:g} s")
            time.sleep(0.01)
        inter = mpi.COMM_WORLD.Connect(port_file.read_text())
    else:
        raise SystemExit(f"across: {ENV} names role {role!r}, expected one of {ROLES}")
    return inter.Merge(high=role == "connect")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the two jobs; fail (stopping the other) as soon as one fails."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) < 2:
        print("usage: python -m bench.across MPIEXEC WORKER...", file=sys.stderr)
        return 2
    mpiexec, worker = argv[0], argv[1:]
    with tempfile.TemporaryDirectory(prefix="mmpi-bench-across-") as d, \
            contextlib.ExitStack() as stack:
        os.chmod(d, 0o700)
        dvm: list[str] = []
        if detect_mpi(mpiexec) == "openmpi":  # Open MPI joins jobs of one DVM only
            try:
                dvm = stack.enter_context(openmpi_dvm(mpiexec, Path(d), {ENV: ""}))
            except DVMError as exc:
                print(f"across: {exc}", file=sys.stderr)
                return 1
        procs = [subprocess.Popen([mpiexec, *dvm, "-n", "1", *worker],
                                  env={**os.environ, ENV: f"{d}:{role}"}) for role in ROLES]
        try:
            while True:
                codes = [p.poll() for p in procs]
                if any(c not in (None, 0) for c in codes) or all(c == 0 for c in codes):
                    break
                time.sleep(0.05)
        finally:
            for p in procs:
                if p.poll() is None:
                    p.terminate()
            for p in procs:
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
    failed = [(r, p.returncode) for r, p in zip(ROLES, procs, strict=True) if p.returncode]
    for role, code in failed:
        print(f"across: the {role} job exited with status {code}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
