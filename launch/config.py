"""The job description: YAML loaded into frozen dataclasses; every error names its key path.

Schema (every key except ``clusters`` is optional; the defaults are shown)::

    launcher:                    # the MPI launcher used for every job (Hydra's mpiexec)
      command: mpiexec
      args: []                   # extra arguments put right after the command
      mpi: auto                  # auto (what `command --version` says), mpich or openmpi
    transport: null              # `tcp`: UCX_TLS=self,tcp in all jobs (needed across network
                                 # namespaces, where UCX would otherwise pick shared memory)
    zipper:                      # the dual-homed nodes; each runs `forwarders` forwarder daemons
      - host: localhost
        forwarders: 1            # 1 to 16 (_checks.MAX_FORWARDERS)
        interfaces: {low: null, high: null}   # NIC on each subnet: both or neither
        wrapper: []              # put before the job's command line: [ip, netns, exec, zip]
        cpus: []                 # bind forwarder k of this node to CPU cpus[k mod len] (Hydra
                                 # `-bind-to user:`, Open MPI a rankfile's `slot=`); empty:
                                 # not bound. On a host it shares
                                 # with ranks, away from the leaders (see plan.py)
    clusters:                    # both `low` and `high` are required
      low:
        ranks: 2                 # required, 1 to 65536 (_checks.MAX_RANKS)
        hosts: [localhost]       # hosts: `name`, `name:slots` or a mapping (below); or `slurm`
        hostfile: null           # ...or a host file (relative to this file); not both
        placement: block         # block: fill each host in turn; paired: see plan.py
        oversubscribe: false     # allow more ranks than slots (physical cores for paired),
                                 # up to 32 per slot (_placement.OVERSUBSCRIBE)
        sockets: null            # default host shape for `paired` (both or neither)
        cores_per_socket: null
        interface: null          # network device of this cluster (sets UCX_NET_DEVICES, and
                                 # on Open MPI btl_tcp_if_include); checked where it is local
        wrapper: []              # put before the job's command line
        env: {}                  # extra environment for this cluster's ranks
      high: {ranks: 2}
    env: {}                      # extra environment for every job
    timeouts:
      connect: 60                # seconds a cluster or forwarder waits for the others at start-up
                                 # (at most 86400)
    mpi4py_hook: true            # `from mpi4py import MPI` gives the bridged world in the ranks;
                                 # false: only `from mmpi import MPI` does, and a rank that
                                 # imports mpi4py's MPI directly fails at once
    rank_map: null               # which cluster runs each virtual rank: a rank map file as
                                 # mmpi-place writes it (relative to this file), or inline
                                 # {low: [0, 2], high: [1, 3]}; null: low 0..x-1, high x..
    monitor: null                # a directory (relative to this file): every rank counts its
                                 # traffic and writes rank-<vrank>.json there; mmpi-run then
                                 # merges them into matrix.npz (like --monitor)
    progress: null               # off | leaders | all | auto: a thread per rank (leaders: the
                                 # cluster leaders only) advances non-blocking calls while the
                                 # program computes; auto: docs/progress.md's model decides;
                                 # null: the environment's MMPI_PROGRESS, else off

A host entry is a name (``node1``), a name with slots (``node1:4``) or a mapping
``{name: node2, slots: 4, sockets: 2, cores_per_socket: 8}``. A host named more than once gets
the sum of its entries' slots. A host file has one host per line in MPICH (``node1:4``) or
Open MPI (``node1 slots=4``) format, ``#`` comments. ``hosts: slurm`` takes the hosts of the
Slurm allocation (``SLURM_JOB_NODELIST``, slots from ``SLURM_TASKS_PER_NODE``). A host without
a slot count has as many slots as this machine has CPUs if it is ``localhost``, else 1.

A rank map must list every virtual rank 0..x+y-1 exactly once, with as many ranks in each
cluster as it has (after ``--low``/``--high``); its order within a cluster does not matter (a
cluster's local ranks follow its virtual ranks in increasing order). ``COMM_WORLD`` ranks stay
what the program expects; only where each one runs changes.

Environment values may be strings or numbers (numbers are converted); names starting with
``MMPI_`` are reserved for mmpi-run. Unknown keys are rejected at every level, with the
allowed key closest to a misspelt one (``rank`` -> ``ranks``). A job file is at most
MAX_JOB_FILE bytes, read with libyaml where PyYAML has it.
Rule: every check is a helper taking ``(value, path)``, so command-line overrides are
validated by exactly the same code as the file, with the same key paths in the message.
Whether the ranks fit on their hosts is checked by plan.py (it needs this machine's shape
for ``localhost``), with the cluster's key path too.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from types import MappingProxyType

import yaml

from mmpi.wire import text as textfile
from mmpi.wire.rendezvous import CLUSTERS

from ._checks import (
    ConfigError,
    a_list,
    boolean,
    env_mapping,
    forwarders,
    mapping,
    optional_str,
    positive_number,
    ranks,
    show,
    wrapper,
)
from ._host_entries import (
    LOCALHOST,
    SLURM,
    Host,
    from_hostfile,
    from_slurm,
    host_list,
    host_name,
    shape,
)

ROOT = "top level"
DEFAULT_SOURCE = "<default job>"
# A job file names clusters, hosts and a few settings: a few KiB. One of megabytes is a
# mistake (a log, a data file), and would take PyYAML's pure-Python loader minutes.
MAX_JOB_FILE = 1 << 20
# libyaml's loader where PyYAML was built with it: some fifty times faster than the pure one.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
PLACEMENTS = ("block", "paired")
TRANSPORTS = ("tcp",)

def _empty_env() -> Mapping[str, str]:
    return MappingProxyType({})


MPI_FLAVOURS = ("auto", "mpich", "openmpi")


@dataclass(frozen=True)
class Launcher:
    """The MPI launcher every job is started with."""

    command: str = "mpiexec"
    args: tuple[str, ...] = ()
    mpi: str = "auto"  # auto (what `command --version` says), mpich or openmpi (_openmpi)


@dataclass(frozen=True)
class Zipper:
    """A dual-homed node that runs `forwarders` forwarder daemons."""

    host: str = "localhost"
    forwarders: int = 1
    # {"low": nic, "high": nic} or empty: pinning only one NIC would cut off the other subnet.
    interfaces: Mapping[str, str] = field(default_factory=_empty_env)
    wrapper: tuple[str, ...] = ()
    cpus: tuple[int, ...] = ()  # forwarder k is bound to cpus[k % len]; () = not bound


@dataclass(frozen=True)
class Cluster:
    """One side of the job: `ranks` processes started by one mpiexec."""

    name: str
    ranks: int
    hosts: tuple[Host, ...] = LOCALHOST
    hostfile: str | None = None  # where `hosts` were read from, if from a host file
    interface: str | None = None
    env: Mapping[str, str] = field(default_factory=_empty_env)
    placement: str = "block"
    oversubscribe: bool = False
    sockets: int | None = None  # default shape of the hosts that do not give theirs
    cores_per_socket: int | None = None
    wrapper: tuple[str, ...] = ()


@dataclass(frozen=True)
class Timeouts:
    """Start-up deadlines, in seconds."""

    connect: float = 60


@dataclass(frozen=True)
class Config:
    """A validated job description."""

    low: Cluster
    high: Cluster
    launcher: Launcher = Launcher()
    zipper: tuple[Zipper, ...] = (Zipper(),)
    env: Mapping[str, str] = field(default_factory=_empty_env)
    timeouts: Timeouts = Timeouts()
    transport: str | None = None
    mpi4py_hook: bool = True  # `import mpi4py.MPI` gives the bridged namespace in the ranks
    source: str | None = None  # where it was read from, for messages
    owners: tuple[str, ...] | None = None  # a rank map: the cluster of each virtual rank
    rank_map: str | None = None  # where the rank map was given, for messages ("rank_map")
    monitor: str | None = None  # directory of the ranks' traffic counters (MMPI_MONITOR)
    progress: str | None = None  # the ranks' progress threads (MMPI_PROGRESS); None: not
    #                               said here, the environment's MMPI_PROGRESS or off

    @property
    def clusters(self) -> tuple[Cluster, Cluster]:
        """The clusters in virtual-rank order: low first."""
        return (self.low, self.high)

    @property
    def forwarders(self) -> int:
        """Total number of forwarder daemons over all zipper nodes."""
        return sum(z.forwarders for z in self.zipper)


# -- loading -------------------------------------------------------------------------------------


def load(path: str | Path | None = None) -> Config:
    """Load the job description from `path`, or the embedded default when `path` is None."""
    if path is None:
        text = resources.files(__package__).joinpath("default.yaml").read_text()
        return loads(text, source=DEFAULT_SOURCE)
    path = Path(path)
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_JOB_FILE + 1)  # no more: it may be a device or a pipe
            size = os.fstat(f.fileno()).st_size
        if len(data) > MAX_JOB_FILE:
            limit = f"{MAX_JOB_FILE >> 20} MiB"
            held = f"{size / (1 << 20):.1f} MiB" if size > MAX_JOB_FILE else f"over {limit}"
            raise ConfigError("", f"too large for a job file: {held} (at most {limit}; is it "
                              "the right file?)", source=str(path))
        text = textfile.decode(data)
    except OSError as exc:
        raise ConfigError("", f"cannot read the file: {exc.strerror}", source=str(path)) from exc
    except textfile.NotText as exc:
        raise ConfigError("", str(exc), source=str(path)) from None
    return loads(text, source=str(path), base_dir=path.parent)


def loads(
    text: str,
    *,
    source: str = "<string>",
    base_dir: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> Config:
    """Parse YAML text; relative host files are resolved against `base_dir`."""
    try:
        data = yaml.load(text, Loader=_LOADER)  # a safe loader, C or Python
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError("", f"invalid YAML{where}: {problem}", source=source) from exc
    try:
        return parse(data, base_dir=base_dir, source=source, environ=environ)
    except ConfigError as exc:
        if exc.source is None:
            raise ConfigError(exc.path, exc.problem, source=source) from None
        raise


def parse(
    data: object,
    *,
    base_dir: Path | None = None,
    source: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> Config:
    """Validate already-loaded YAML data and build a Config.

    Host files are read here (relative to `base_dir`); ``hosts: slurm`` reads `environ`
    (default: os.environ).
    """
    if data is None:
        raise ConfigError(ROOT, "expected a mapping, got an empty document")
    keys = {"launcher", "transport", "zipper", "clusters", "env", "timeouts", "mpi4py_hook",
            "rank_map", "monitor", "progress"}
    top = mapping(data, ROOT, keys, {"clusters"})
    clusters = mapping(top["clusters"], "clusters", set(CLUSTERS), set(CLUSTERS))
    environ = os.environ if environ is None else environ
    transport = top.get("transport")
    if transport is not None and transport not in TRANSPORTS:
        raise ConfigError(
            "transport", f"expected one of {list(TRANSPORTS)} or null, got {show(transport)}"
        )
    low = _cluster(clusters["low"], "low", base_dir, environ)
    high = _cluster(clusters["high"], "high", base_dir, environ)
    owners = _rank_map(top.get("rank_map"), "rank_map", base_dir, low.ranks, high.ranks)
    return Config(
        low=low,
        high=high,
        launcher=_launcher(top.get("launcher", {}), "launcher"),
        zipper=_zippers(top.get("zipper", [{}]), "zipper"),
        env=env_mapping(top.get("env", {}), "env"),
        timeouts=_timeouts(top.get("timeouts", {}), "timeouts"),
        transport=transport,
        mpi4py_hook=boolean(top.get("mpi4py_hook", True), "mpi4py_hook"),
        source=source,
        owners=owners,
        rank_map="rank_map" if owners is not None else None,
        monitor=directory_of(top.get("monitor"), "monitor", base_dir),
        progress=None if "progress" not in top else progress_mode(top["progress"], "progress"),
    )


PROGRESS_MODES = ("off", "leaders", "all", "auto")  # as mmpi._runtime.progress.MODES


def progress_mode(value: object, path: str) -> str:
    """One of PROGRESS_MODES (YAML reads a bare `off` as False)."""
    if value is False:
        value = "off"
    if not isinstance(value, str) or value not in PROGRESS_MODES:
        raise ConfigError(path, f"expected one of {list(PROGRESS_MODES)}, got {show(value)}")
    return value


# -- sections ------------------------------------------------------------------------------------


_CLUSTER_KEYS = {
    "ranks", "hosts", "hostfile", "interface", "env", "placement", "oversubscribe",
    "sockets", "cores_per_socket", "wrapper",
}  # fmt: skip


def _cluster(
    value: object, name: str, base_dir: Path | None, environ: Mapping[str, str]
) -> Cluster:
    path = f"clusters.{name}"
    m = mapping(value, path, _CLUSTER_KEYS, {"ranks"})
    hostfile = optional_str(m.get("hostfile"), f"{path}.hostfile", "a file name", spaces=True)
    if hostfile is not None:
        if m.get("hosts") is not None:
            raise ConfigError(path, "give either 'hosts' or 'hostfile', not both")
        if base_dir is not None:
            hostfile = str(base_dir / hostfile)  # an absolute hostfile wins the join
        hosts = from_hostfile(hostfile, f"{path}.hostfile")
    elif m.get("hosts") == SLURM:
        hosts = from_slurm(environ, f"{path}.hosts")
    else:
        hosts = host_list(m.get("hosts", ["localhost"]), f"{path}.hosts")
    placement = placement_of(m.get("placement", "block"), f"{path}.placement")
    sockets, cores = shape(m, path)
    return Cluster(
        name=name,
        ranks=ranks(m["ranks"], f"{path}.ranks"),
        hosts=hosts,
        hostfile=hostfile,
        interface=optional_str(m.get("interface"), f"{path}.interface", "a device name"),
        env=env_mapping(m.get("env", {}), f"{path}.env"),
        placement=placement,
        oversubscribe=boolean(m.get("oversubscribe", False), f"{path}.oversubscribe"),
        sockets=sockets,
        cores_per_socket=cores,
        wrapper=wrapper(m.get("wrapper", []), f"{path}.wrapper"),
    )


def _launcher(value: object, path: str) -> Launcher:
    m = mapping(value, path, {"command", "args", "mpi"})
    command = optional_str(m.get("command", "mpiexec"), f"{path}.command", "a command")
    if command is None:
        raise ConfigError(f"{path}.command", "expected a command, got null")
    args = a_list(m.get("args", []), f"{path}.args")
    for i, arg in enumerate(args):
        if not isinstance(arg, str):
            raise ConfigError(f"{path}.args[{i}]", f"expected a string, got {show(arg)}")
    mpi = m.get("mpi", "auto")
    if mpi not in MPI_FLAVOURS:
        raise ConfigError(f"{path}.mpi", f"expected one of {', '.join(MPI_FLAVOURS)}, got "
                          f"{show(mpi)}")
    return Launcher(command=command, args=tuple(args), mpi=mpi)


def _zippers(value: object, path: str) -> tuple[Zipper, ...]:
    items = a_list(value, path)
    if not items:
        raise ConfigError(path, "expected at least one zipper node, got an empty list")
    return tuple(_zipper(item, f"{path}[{i}]") for i, item in enumerate(items))


def _zipper(value: object, path: str) -> Zipper:
    m = mapping(value, path, {"host", "forwarders", "interfaces", "wrapper", "cpus"})
    nics = m.get("interfaces")
    nics = mapping({} if nics is None else nics, f"{path}.interfaces", set(CLUSTERS))
    interfaces = {
        c: nic
        for c in CLUSTERS
        if (nic := optional_str(nics.get(c), f"{path}.interfaces.{c}", "a device name"))
    }
    if len(interfaces) == 1:
        raise ConfigError(
            f"{path}.interfaces",
            "give the device on both subnets (low and high) or neither: "
            "pinning one would cut the forwarder off from the other subnet",
        )
    return Zipper(
        host=host_name(m.get("host", "localhost"), f"{path}.host"),
        forwarders=forwarders(m.get("forwarders", 1), f"{path}.forwarders"),
        interfaces=MappingProxyType(interfaces),
        wrapper=wrapper(m.get("wrapper", []), f"{path}.wrapper"),
        cpus=cpu_list(m.get("cpus", []), f"{path}.cpus"),
    )


def placement_of(value: object, path: str) -> str:
    """One of PLACEMENTS."""
    if value not in PLACEMENTS:
        raise ConfigError(path, f"expected one of {list(PLACEMENTS)}, got {show(value)}")
    return value


def cpu_list(value: object, path: str, origin: str = "") -> tuple[int, ...]:
    """CPU numbers to bind to: a list of integers >= 0 (None or [] for none).

    `origin` (" (from --flag)") follows the key path in errors, after the item's index.
    """
    items = a_list([] if value is None else value, path + origin)
    for i, cpu in enumerate(items):
        if isinstance(cpu, bool) or not isinstance(cpu, int) or cpu < 0:
            raise ConfigError(
                f"{path}[{i}]{origin}", f"expected a CPU number (0 or more), got {show(cpu)}"
            )
    return tuple(items)


def _rank_map(
    value: object, path: str, base_dir: Path | None, low: int, high: int
) -> tuple[str, ...] | None:
    """`rank_map`: a file (as mmpi-place writes it) or inline ``{low: [...], high: [...]}``."""
    from place.errors import RankMapError
    from place.rankmap import VERSION, rank_map_owners

    if value is None:
        return None
    if isinstance(value, str):
        return rank_map_file(value, path, base_dir, low, high)
    if not isinstance(value, Mapping):
        raise ConfigError(
            path, f"expected a rank map file or a mapping {{low: [...], high: [...]}}, got "
            f"{show(value)}"
        )
    data = {"version": VERSION, **value}  # inline, the version may be left out
    try:
        return tuple(rank_map_owners(data, low, high, where=path))
    except RankMapError as exc:
        raise ConfigError("", str(exc)) from None


def rank_map_file(
    value: object, path: str, base_dir: Path | None, low: int, high: int
) -> tuple[str, ...]:
    """A rank map file (relative to `base_dir`), checked against the cluster sizes."""
    from place.errors import RankMapError
    from place.rankmap import load_rank_map

    name = optional_str(value, path, "a rank map file", spaces=True)
    if name is None:
        raise ConfigError(path, "expected a rank map file, got null")
    if base_dir is not None:
        name = str(base_dir / name)
    try:
        return tuple(load_rank_map(name, low, high, where=f"{path} {name}"))
    except RankMapError as exc:
        raise ConfigError("", str(exc)) from None


def directory_of(value: object, path: str, base_dir: Path | None) -> str | None:
    """A directory mmpi-run writes to (made absolute against `base_dir`); None stays None."""
    name = optional_str(value, path, "a directory", spaces=True)
    if name is None:
        return None
    return os.path.abspath(base_dir / name if base_dir is not None else name)


def _timeouts(value: object, path: str) -> Timeouts:
    m = mapping(value, path, {"connect"})
    return Timeouts(connect=positive_number(m.get("connect", 60), f"{path}.connect"))


__all__ = [
    "ConfigError",
    "Config",
    "Cluster",
    "Host",
    "Launcher",
    "Timeouts",
    "Zipper",
    "load",
    "loads",
    "cpu_list",
    "directory_of",
    "parse",
    "placement_of",
    "progress_mode",
    "rank_map_file",
]
