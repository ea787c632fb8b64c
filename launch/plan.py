r"""Turn a job description into the exact mpiexec command lines and environments; no side effects.

The plan is the contract between mmpi-run, the forwarder and the ranks (mmpi/wire/rendezvous.py):

- forwarder i (``fwd<i>``), one per daemon over all zipper nodes, started first::

      [WRAPPER...] mpiexec [args] -n 1 [-hosts ZIPPER] [-bind-to user:CPU] PYTHON -P -m forwarder
              --rendezvous DIR --index i --connect-timeout T
      env: MMPI_RENDEZVOUS=DIR [UCX_NET_DEVICES=<low nic>,<high nic>] [UCX_TLS=self,tcp]
           + the job's env

- then cluster ``low``, then cluster ``high``::

      [WRAPPER...] mpiexec [args] -n N [-hosts h1:n1,h2:n2 [-rankmap i,j,...]]
              [-bind-to core -map-by socket] -prepend-pattern MARK COMMAND...
      env: MMPI_RENDEZVOUS=DIR MMPI_CLUSTER=c MMPI_CONNECT_TIMEOUT=T MMPI_FORWARDERS=F
           MMPI_MPI4PY_HOOK=1|0 PYTHONPATH=<mmpi/_startup>[:<the user's PYTHONPATH>]
           MPIR_CVAR_CH4_COMM_CONNECT_TIMEOUT=ceil(T) [UCX_NET_DEVICES=<interface>]
           [UCX_TLS=self,tcp] + the job's env + the cluster's env
      stdin: mmpi-run's own for the cluster that holds virtual rank 0 (Hydra hands it to its
           rank 0, as a plain mpiexec does); /dev/null for every other job

Unmodified mpi4py programs: the ``sitecustomize`` in ``mmpi/_startup`` (first on the ranks'
PYTHONPATH, ahead of the user's own, which is kept: the cluster's ``env``, else the job's,
else mmpi-run's environment) makes ``import mpi4py.MPI`` give the bridged namespace;
``MMPI_MPI4PY_HOOK=0`` (``mpi4py_hook: false``, ``--no-mpi4py-hook``) makes such an import
fail at once instead. The forwarders never get it: they use mpi4py's own MPI.

The host flags come from _placement.py (``-hosts`` with the ranks placed on each host, left out
when every host is ``localhost``; the binding flags for ``placement: paired``). A forwarder is
bound to a CPU only when its zipper node lists ``cpus``: on a host shared with ranks it does
best beside the ranks that only wait, away from the leaders (docs/performance.md,
"Placement"). A wrapper
(``ip netns exec NS``, ``srun ...``) is put before the whole command line. A ``Launch.env``
holds only these additions (the runner merges them over ``os.environ``).

Why UCX_NET_DEVICES and not Hydra's ``-iface``: with MPICH's ch4/UCX device, ``-iface`` only
changes how Hydra's own proxies connect; the MPI traffic goes where UCX decides. UCX_TLS=self,tcp
(``transport: tcp``) keeps UCX off shared memory and CMA, which would otherwise be chosen
between processes of one machine even when they live in different network namespaces; it
also sets MMPI_SKIP_MPI_FINALIZE (a workaround for an MPICH/UCX teardown crash over TCP).

Rule: MMPI_* variables always come from the plan; the job's ``env`` and the cluster's ``env``
may override the MPICH/UCX settings, the cluster's last.

Why ``-prepend-pattern`` rather than ``-prepend-rank``: Hydra (MPICH 5.0.2) prefixes every
*chunk* it reads from a rank, not every line, and interleaves chunks of different ranks in
mid-line: with PYTHONUNBUFFERED=1, ``print("hi")`` from ranks 0 and 1 can reach us as
``[0] hi[1] hi\n[0] \n``. The pattern ``\x1f[%r] `` keeps the familiar ``[k] `` prefix but
starts with a byte no program prints, so the runner can cut the stream into per-rank chunks
without guessing and rebuild whole lines. Hydra expands the pattern in mpiexec itself, so it
never travels to remote hosts.
"""

from __future__ import annotations

import math
import os
import shlex
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from mmpi.wire import rendezvous as rv
from place.rankmap import format_ranks

from . import _openmpi, _placement
from ._command import module_argv
from ._hosts import Machine, detect_machine
from ._monitoring import MATRIX_FILE
from ._placement import Layout
from .config import DEFAULT_SOURCE, Config, ConfigError

FORWARDER = "forwarder"
CLUSTER = "cluster"
DVM = "dvm"  # Open MPI's PRRTE DVM (_openmpi)
ROLES = (FORWARDER, CLUSTER, DVM)

# Hydra output prefix for cluster jobs; runner.py splits the stream on CHUNK_MARK.
CHUNK_MARK = "\x1f"
PREPEND_PATTERN = CHUNK_MARK + "[%r] "

LOCALHOST = "localhost"
RENDEZVOUS_PLACEHOLDER = "<rendezvous-dir>"  # what --dry-run shows instead of a real directory
CONNECT_TIMEOUT_CVAR = "MPIR_CVAR_CH4_COMM_CONNECT_TIMEOUT"
NET_DEVICES = "UCX_NET_DEVICES"
PYTHONPATH = "PYTHONPATH"
# MMPI_SKIP_MPI_FINALIZE: over UCX TCP, MPICH 5.0.2 segfaults in MPI_Finalize after
# Connect/Accept in most runs; ranks then end after the bridge's own goodbye instead
# (see mmpi/_runtime/bootstrap.py). Harmless for the forwarder, which ignores it.
TRANSPORT_ENV = {"tcp": {"UCX_TLS": "self,tcp", "MMPI_SKIP_MPI_FINALIZE": "1"}}


@dataclass(frozen=True)
class Launch:
    """One process the runner starts: normally one mpiexec job."""

    name: str
    role: str  # FORWARDER or CLUSTER
    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)  # only what the plan adds to os.environ
    ranks: int = 1  # processes the job starts
    first_vrank: int = 0  # virtual rank of the job's local rank 0 (clusters)
    stdin: bool = False  # gets mmpi-run's standard input (else /dev/null)
    # Virtual rank of each local rank (clusters); () = first_vrank, first_vrank + 1, ...
    vranks: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(
                f"launch {self.name!r}: role must be one of {ROLES}, got {self.role!r}"
            )
        if not self.argv:
            raise ValueError(f"launch {self.name!r}: empty argv")
        # Freeze what callers hand in, so a Plan cannot change after it was described.
        object.__setattr__(self, "argv", tuple(self.argv))
        object.__setattr__(self, "env", MappingProxyType(dict(self.env)))
        object.__setattr__(self, "vranks", tuple(self.vranks))
        if self.vranks and (len(self.vranks), self.vranks[0]) != (self.ranks, self.first_vrank):
            raise ValueError(f"launch {self.name!r}: vranks {self.vranks} do not fit "
                             f"{self.ranks} ranks from {self.first_vrank}")

    def vrank(self, local: int) -> int:
        """Virtual rank of the job's local rank `local`."""
        if self.vranks and 0 <= local < len(self.vranks):
            return self.vranks[local]
        return self.first_vrank + local

    def describe(self) -> str:
        """Render this launch: a heading, the command line and the added environment."""
        if self.role == CLUSTER:
            vranks = [self.vrank(i) for i in range(self.ranks)]
            what = f"cluster, {self.ranks} ranks, virtual ranks {format_ranks(vranks)}"
        else:
            what = self.role
        if self.stdin:
            what += ", standard input"
        lines = [f"{self.name} ({what})", "  $ " + " ".join(_quote(a) for a in self.argv)]
        lines += [f"    {k}={_quote(v)}" for k, v in self.env.items()]
        return "\n".join(lines)


@dataclass(frozen=True)
class Plan:
    """The launches of one mmpi job, in the order they must be started."""

    launches: tuple[Launch, ...]
    layouts: tuple[Layout, ...] = ()  # where each cluster's ranks run, low first
    owners: tuple[str, ...] | None = None  # a rank map: mmpi-run writes rv.LAYOUT_FILE
    monitor: str | None = None  # the ranks write their counters here; merged after the run
    dvm: Launch | None = None  # Open MPI: the PRRTE DVM every job runs in, started first
    # name -> text of the files the runner writes in the rendezvous directory before any
    # launch (Open MPI's rankfiles and hostfiles)
    files: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "launches", tuple(self.launches))
        object.__setattr__(self, "layouts", tuple(self.layouts))
        object.__setattr__(self, "files", MappingProxyType(dict(self.files)))
        names = [launch.name for launch in self.launches]
        if len(set(names)) != len(names):
            raise ValueError(f"launch names must be unique, got {names}")

    @property
    def forwarders(self) -> tuple[Launch, ...]:
        """The forwarder launches."""
        return tuple(x for x in self.launches if x.role == FORWARDER)

    @property
    def clusters(self) -> tuple[Launch, ...]:
        """The cluster launches, low first."""
        return tuple(x for x in self.launches if x.role == CLUSTER)

    def on_this_host_only(self) -> bool:
        """Whether every rank runs on this host (so its files and PATH are theirs)."""
        return all(p.host == _placement.LOCALHOST for x in self.layouts for p in x.places)

    def describe(self) -> str:
        """Render the plan for --dry-run: the jobs (command line, environment), the rank map."""
        head = f"mmpi-run plan: {len(self.launches)} jobs, started in this order"
        parts = [head, *(launch.describe() for launch in self.launches)]
        if self.dvm is not None:
            parts.insert(1, "before them, the Open MPI DVM they all run in (stopped last):\n"
                         + self.dvm.describe())
        for name, text in self.files.items():
            parts.append(f"file {name} in the rendezvous directory, written first:\n"
                         + "\n".join(f"    {line}" for line in text.splitlines()))
        if self.layouts:
            policies = ", ".join(f"{x.cluster} {x.placement}" for x in self.layouts)
            parts += [f"rank map (placement: {policies}):", _placement.describe(self.layouts)]
        if self.owners is not None:
            parts.append(
                f"layout file: {rv.LAYOUT_FILE} in the rendezvous directory, written before the "
                "jobs start: " + " ".join(self.owners)
            )
        if self.monitor is not None:
            parts.append(
                f"monitor: every rank writes {self.monitor}/rank-<vrank>.json; after a "
                f"successful run mmpi-run merges them into {self.monitor}/{MATRIX_FILE}"
            )
        return "\n".join(parts) + "\n"


def _busiest_host(procs: Mapping[str, int], layouts) -> tuple[int, int]:
    """Ranks, and ranks and forwarders (`procs`, per host), on the busiest host."""
    host = max(procs, key=procs.__getitem__)
    ranks = sum(1 for layout in layouts for place in layout.places if place.host == host)
    return ranks, procs[host]


def _processes_per_host(config: Config, layouts) -> dict[str, int]:
    """Host -> the ranks and forwarders the run puts there, hosts in the order first named."""
    count: dict[str, int] = {}
    for layout in layouts:
        for place in layout.places:
            count[place.host] = count.get(place.host, 0) + 1
    for zipper in config.zipper:
        count[zipper.host] = count.get(zipper.host, 0) + zipper.forwarders
    return count


def make_plan(
    config: Config,
    command: Sequence[str],
    rendezvous: str,
    python: str = sys.executable,
    machine: Machine | None = None,
    environ: Mapping[str, str] | None = None,
    mpi: str = _openmpi.MPICH,
) -> Plan:
    """Build the launches for `command` under `config`; `rendezvous` is the job directory.

    `machine` describes ``localhost`` for placement (default: this machine, from /sys);
    `environ` is mmpi-run's environment, for the user's PYTHONPATH and, on Open MPI, the launcher
    found on its PATH (default: os.environ).
    Raises ConfigError, naming the cluster, when the ranks do not fit on their hosts.
    `mpi` is the launcher's MPI (_openmpi.detect): on Open MPI every job goes into one DVM.
    """
    if not command:
        raise ValueError("make_plan: the command to run is empty")
    environ = os.environ if environ is None else environ
    rendezvous = str(rendezvous)
    timeout = _seconds(config.timeouts.connect)
    launcher = [config.launcher.command, *config.launcher.args]
    transport = TRANSPORT_ENV.get(config.transport or "", {})
    try:
        layouts = _placement.place(config.low, config.high, machine or detect_machine(),
                                   config.owners)
    except ConfigError as exc:  # named by the job file, as the file's own errors are
        if exc.source is None and config.source not in (None, DEFAULT_SOURCE):
            raise ConfigError(exc.path, exc.problem, source=config.source) from None
        raise
    launches: list[Launch] = []
    ompi = mpi == _openmpi.OPENMPI
    base = _openmpi.prefix_env(config.launcher.command, environ) if ompi else {}
    files: dict[str, str] = {}  # Open MPI's rankfiles and hostfiles (_openmpi Rule 4)

    index = 0
    for zipper in config.zipper:
        env: dict[str, str] = {**base, **transport}
        if zipper.interfaces:
            # One UCX port then advertises exactly the two subnets' NICs.
            nics = [zipper.interfaces[c] for c in rv.CLUSTERS]
            env[NET_DEVICES] = ",".join(dict.fromkeys(nics))
            if ompi:
                env.update(_openmpi.tcp_nics(nics))
        env.update(config.env)
        env[rv.ENV_RENDEZVOUS] = rendezvous
        hosts = [] if zipper.host == LOCALHOST else ["-hosts", zipper.host]
        for k in range(zipper.forwarders):
            cpu = zipper.cpus[k % len(zipper.cpus)] if zipper.cpus else None
            if ompi:
                dvm = _openmpi.job_args(rendezvous, env)
                where, more = _openmpi.forwarder_mapping(f"fwd{index}", zipper.host, cpu)
                files.update(more)
            else:
                dvm, where = [], [*hosts, *(["-bind-to", f"user:{cpu}"] if cpu is not None
                                            else [])]
            argv = [
                *zipper.wrapper, *launcher, *dvm, "-n", "1", *where,
                *module_argv(python, "forwarder"),
                "--rendezvous", rendezvous, "--index", str(index), "--connect-timeout", timeout,
            ]  # fmt: skip
            launches.append(Launch(f"fwd{index}", FORWARDER, tuple(argv), env))
            index += 1

    user_path = environ.get(PYTHONPATH, "")
    procs = _processes_per_host(config, layouts)
    host_ranks, host_procs = _busiest_host(procs, layouts)
    for cluster, layout in zip(config.clusters, layouts, strict=True):
        env = {**base, CONNECT_TIMEOUT_CVAR: str(math.ceil(config.timeouts.connect)),
               **transport}
        if cluster.interface:
            env[NET_DEVICES] = cluster.interface
            if ompi:
                env.update(_openmpi.tcp_nics([cluster.interface]))
        env.update(config.env)
        env.update(cluster.env)
        env.update(
            {
                rv.ENV_RENDEZVOUS: rendezvous,
                rv.ENV_CLUSTER: cluster.name,
                rv.ENV_CONNECT_TIMEOUT: timeout,
                rv.ENV_FORWARDERS: str(config.forwarders),
                rv.ENV_MPI4PY_HOOK: "1" if config.mpi4py_hook else "0",
                PYTHONPATH: _prepend_path(rv.startup_dir(), env.get(PYTHONPATH, user_path)),
            }
        )
        if config.monitor is not None:
            env[rv.ENV_MONITOR] = config.monitor
        if config.progress is not None:  # said in the job file or on the command line;
            # the ranks' model (auto) needs the busiest host's load
            env.update(MMPI_PROGRESS=config.progress, MMPI_HOST_RANKS=str(host_ranks),
                       MMPI_HOST_PROCS=str(host_procs))
        if ompi:  # the ranks mark their output (_openmpi Rule 3)
            env[_openmpi.ENV_OUTPUT_MARK] = "1"
            where, more = _openmpi.cluster_mapping(layout, rendezvous)
            files.update(more)
            mpirun = [*_openmpi.job_args(rendezvous, env), "-n", str(cluster.ranks), *where]
        else:
            mpirun = ["-n", str(cluster.ranks), *layout.hydra_args,
                      "-prepend-pattern", PREPEND_PATTERN]
        argv = [*cluster.wrapper, *launcher, *mpirun, *command]
        vranks = tuple(p.vrank for p in layout.places)
        launches.append(
            Launch(
                cluster.name, CLUSTER, tuple(argv), env, cluster.ranks, vranks[0],
                stdin=vranks[0] == 0, vranks=vranks,
            )
        )  # fmt: skip
    dvm = None
    if ompi:
        # placed jobs need the slots they name, in a DVM spanning their hosts (Rule 4)
        spans = procs if files or set(procs) != {LOCALHOST} else None
        dvm = Launch(DVM, DVM, _openmpi.dvm_argv(config.launcher.command, rendezvous, environ,
                                                 spans), {**base, **config.env})
    return Plan(tuple(launches), layouts, config.owners, config.monitor, dvm, files)


def _prepend_path(first: str, rest: str) -> str:
    """The search path `first`, then `rest` (if any)."""
    return first + os.pathsep + rest if rest else first


def _seconds(value: float) -> str:
    """Seconds as the shortest decimal text: 60, 2.5."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _quote(text: str) -> str:
    """Shell-quote `text`; non-printable characters use bash's $'...' so they stay visible."""
    if text.isprintable():
        return shlex.quote(text)
    body = "".join(ch if ch.isprintable() and ch not in "\\'" else _escape(ch) for ch in text)
    return f"$'{body}'"


def _escape(ch: str) -> str:
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


__all__ = ["Launch", "Plan", "make_plan", "FORWARDER", "CLUSTER", "PREPEND_PATTERN", "CHUNK_MARK"]
