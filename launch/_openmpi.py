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
Rule 4: placement is carried out by files the plan writes in the rendezvous directory (the
        runner writes them before the DVM starts): a bound layout (``placement: paired``, a
        forwarder's ``cpus``) becomes a rankfile, ``rank i=HOST slot=SOCKET:CORE`` (or
        ``slot=CPU``), with ``--bind-to core:overload-allowed`` (the two clusters, or a forwarder
        and a rank, may share a core on one host: Hydra allows that, PRRTE must be told); an
        unbound one on other hosts a hostfile of one line per rank with ``--map-by seq``. The
        DVM spans every host named, with as many slots as the run puts there, and runs in the
        rendezvous directory: a rankfile is named relative to it.
Rule 5: interfaces: Open MPI's TCP transport (how jobs of one DVM reach each other) is held to
        the NICs named (``btl_tcp_if_include``), beside UCX_NET_DEVICES for UCX.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from ._placement import LOCALHOST, Layout

MPICH, OPENMPI = "mpich", "openmpi"
DVM_URI, DVM_PID = "dvm.uri", "dvm.pid"
ENV_OUTPUT_MARK = "MMPI_OUTPUT_MARK"  # ranks mark their own output (Rule 3)
ENV_TCP_NICS = "OMPI_MCA_btl_tcp_if_include"  # the NICs jobs of the DVM meet over (Rule 5)
BIND = "core:overload-allowed"  # Rule 4
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


def dvm_argv(command: str, rendezvous: str, environ: Mapping[str, str],
             hosts: Mapping[str, int] | None = None) -> tuple[str, ...]:
    """The DVM's command line: prte beside the launcher, reporting where to find it.

    `hosts` (host -> processes the run puts there) makes it span those hosts (Rule 4).
    """
    found = shutil.which(command, path=environ.get("PATH"))
    prte = str(Path(found).parent / "prte") if found else "prte"
    spans = ["--host", ",".join(f"{h}:{n}" for h, n in hosts.items())] if hosts else []
    return (prte, "--report-uri", f"{rendezvous}/{DVM_URI}",
            "--report-pid", f"{rendezvous}/{DVM_PID}", *spans)


def cluster_mapping(layout: Layout, rendezvous: str) -> tuple[list[str], dict[str, str]]:
    """The mpirun options placing a cluster as `layout` says, and the files they name (Rule 4)."""
    places = sorted(layout.places, key=lambda p: p.local)
    if any(p.socket is not None for p in places):
        name = f"rankfile.{layout.cluster}"
        text = "".join(f"rank {p.local}={p.host} slot={p.socket}:{p.core}\n" for p in places)
        return _rankfile(name), {name: text}
    if any(p.host != LOCALHOST for p in places):
        name = f"hostfile.{layout.cluster}"
        text = "".join(f"{p.host}\n" for p in places)
        return ["--hostfile", f"{rendezvous}/{name}", "--map-by", "seq"], {name: text}
    return [], {}


def forwarder_mapping(name: str, host: str, cpu: int | None) -> tuple[list[str], dict[str, str]]:
    """The mpirun options placing forwarder `name` on `host`, bound to `cpu` if given (Rule 4)."""
    if cpu is not None:
        file = f"rankfile.{name}"
        return _rankfile(file), {file: f"rank 0={host} slot={cpu}\n"}
    return (["--host", host] if host != LOCALHOST else []), {}


def tcp_nics(nics: Sequence[str]) -> dict[str, str]:
    """The environment holding Open MPI's TCP transport to `nics` (Rule 5)."""
    return {ENV_TCP_NICS: ",".join(dict.fromkeys(nics))} if nics else {}


def _rankfile(name: str) -> list[str]:
    # by its bare name: PRRTE's option parser refuses a "-" anywhere in it (as in
    # "/tmp/mmpi-..."), and the DVM, which runs in the rendezvous directory, reads it
    return ["--map-by", f"rankfile:file={name}", "--bind-to", BIND]


def job_args(rendezvous: str, env: Mapping[str, str]) -> list[str]:
    """The options of mpirun for a job of the DVM, its added environment named (Rule 2)."""
    args = ["--dvm", f"file:{rendezvous}/{DVM_URI}", "--oversubscribe"]
    for name in env:
        args += ["-x", name]
    return args


def uri_ready(rendezvous: Path) -> bool:
    """Whether the DVM has written its address (it is ready for jobs)."""
    path = rendezvous / DVM_URI
    try:
        return path.stat().st_size > 0 and path.read_text().endswith("\n")
    except OSError:
        return False


__all__ = ["MPICH", "OPENMPI", "DVM_URI", "DVM_PID", "ENV_OUTPUT_MARK", "detect",
           "prefix_env", "dvm_argv", "job_args", "cluster_mapping", "forwarder_mapping", "tcp_nics",
           "uri_ready"]
