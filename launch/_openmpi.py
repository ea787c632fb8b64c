"""Open MPI: which MPI the launcher is, and how a job's three parts meet in one PRRTE DVM.

Open MPI 5 joins separately launched jobs with Open_port/Comm_accept/Comm_connect only when
they run inside one PRRTE "distributed virtual machine" (``ompi-server`` is gone). So on Open
MPI mmpi-run starts a DVM first (``prte --report-uri F --report-pid P``, in the rendezvous
directory) and every job into it (``mpirun --dvm file:F``); the runner stops the DVM last.

Rule 1: the MPI is the launcher's (``launcher.mpi`` in the job file, else what
        ``<command> --version`` says): Open MPI's names itself "(Open MPI)", anything else is
        taken for MPICH (Hydra).
Rule 2: a DVM's processes inherit the DVM's environment, not mpirun's: what the plan adds to a
        job is named with ``-x NAME``. PRRTE needs its install prefixes where it was not built
        (a wheel), and its root allowances as root; the plan gives both, from the launcher's
        location, unless the environment sets them.
Rule 3: PRRTE can only tag output by job, not per rank in a way a reader can split (it labels
        chunks, not lines, and interleaves them): the ranks mark their own writes instead
        (MMPI_OUTPUT_MARK, the ranks' sitecustomize) with the mark Hydra's -prepend-pattern
        gives, so one reader serves both.
Rule 4: supported here: every job on this host (a DVM of one node). Hosts, binding and CPU
        lists are refused by name until they are mapped to PRRTE's options.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

MPICH, OPENMPI = "mpich", "openmpi"
DVM_URI, DVM_PID = "dvm.uri", "dvm.pid"
ENV_OUTPUT_MARK = "MMPI_OUTPUT_MARK"  # ranks mark their own output (Rule 3)
_ROOT_ENV = ("PRTE_ALLOW_RUN_AS_ROOT", "PRTE_ALLOW_RUN_AS_ROOT_CONFIRM",
             "OMPI_ALLOW_RUN_AS_ROOT", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM")


def detect(command: str, said: str = "auto") -> str:
    """The MPI of launcher `command` (Rule 1): MPICH or OPENMPI."""
    if said != "auto":
        return said
    try:
        out = subprocess.run([command, "--version"], capture_output=True, text=True,
                             timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return MPICH  # the launch itself will name what is wrong with the command
    return OPENMPI if "Open MPI" in out.stdout + out.stderr else MPICH


def prefix_env(command: str, environ: Mapping[str, str]) -> dict[str, str]:
    """What PRRTE and Open MPI need in the environment to run from a wheel, as root (Rule 2)."""
    env: dict[str, str] = {}
    found = shutil.which(command, path=environ.get("PATH"))
    if found:
        prefix = str(Path(found).resolve().parent.parent)
        for name in ("OPAL_PREFIX", "PRTE_PREFIX", "PMIX_PREFIX"):
            if name not in environ:
                env[name] = prefix
    if os.geteuid() == 0:
        env.update({name: "1" for name in _ROOT_ENV if name not in environ})
    return env


def dvm_argv(command: str, rendezvous: str, environ: Mapping[str, str]) -> tuple[str, ...]:
    """The DVM's command line: prte beside the launcher, reporting where to find it."""
    found = shutil.which(command, path=environ.get("PATH"))
    prte = str(Path(found).parent / "prte") if found else "prte"
    return (prte, "--report-uri", f"{rendezvous}/{DVM_URI}",
            "--report-pid", f"{rendezvous}/{DVM_PID}")


def job_args(rendezvous: str, env: Mapping[str, str]) -> list[str]:
    """The options of mpirun for a job of the DVM, its added environment named (Rule 2)."""
    args = ["--dvm", f"file:{rendezvous}/{DVM_URI}", "--oversubscribe"]
    for name in env:
        args += ["-x", name]
    return args


def refuse(what: str) -> str:
    """Why a setting is not carried out on Open MPI yet (Rule 4)."""
    return (f"{what} is not supported with Open MPI yet (every job runs on this host in one "
            "PRRTE DVM); leave it out, or use MPICH")


def uri_ready(rendezvous: Path) -> bool:
    """Whether the DVM has written its address (it is ready for jobs)."""
    path = rendezvous / DVM_URI
    try:
        return path.stat().st_size > 0 and path.read_text().endswith("\n")
    except OSError:
        return False


__all__ = ["MPICH", "OPENMPI", "DVM_URI", "DVM_PID", "ENV_OUTPUT_MARK", "detect",
           "prefix_env", "dvm_argv", "job_args", "refuse", "uri_ready"]
