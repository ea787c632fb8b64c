"""Where hosts come from: host files (MPICH and Open MPI formats), Slurm's node lists, this machine.

Everything here is pure text parsing except `detect_machine`, which reads /sys (or lscpu).
Parse errors are `HostsError` with a line number where there is one; config.py turns them into
ConfigErrors with the key path.
"""

from __future__ import annotations

import itertools
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path


class HostsError(ValueError):
    """A host file or a Slurm variable cannot be understood."""


# -- host files ----------------------------------------------------------------------------------

_NAME = r"[A-Za-z0-9_.\-]+"  # a host name: no ":", "," or spaces
_MPICH_LINE = re.compile(rf"({_NAME})(?::(\d+))?\Z")
_OMPI_FIELD = re.compile(r"(slots|max_slots|max-slots)=(\d+)\Z")


def parse_hostfile(text: str) -> list[tuple[int, str, int | None]]:
    """Parse a host file: ``(line number, host, slots or None)`` per host line.

    Accepted, one host per line, ``#`` starting a comment:

    - MPICH / Hydra: ``node1`` or ``node1:4``
    - Open MPI: ``node1 slots=4`` (``max_slots=N`` is accepted and ignored: whether to go
      beyond the slots is the job's ``oversubscribe`` setting)
    """
    hosts: list[tuple[int, str, int | None]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        fields = line.split("#", 1)[0].split()
        if not fields:
            continue
        first, rest = fields[0], fields[1:]
        m = _MPICH_LINE.match(first)
        if not m or (rest and m[2] is not None):
            expected = "expected 'host', 'host:slots' or 'host slots=N'"
            raise HostsError(f"line {number}: {expected}, got {line.strip()!r}")
        slots = int(m[2]) if m[2] is not None else None
        for extra in rest:
            f = _OMPI_FIELD.match(extra)
            if not f:
                raise HostsError(
                    f"line {number}: unknown field {extra!r} (expected slots=N or max_slots=N)"
                )
            if f[1] == "slots":
                slots = int(f[2])
        if slots == 0:
            raise HostsError(f"line {number}: host {m[1]!r} has 0 slots")
        hosts.append((number, m[1], slots))
    if not hosts:
        raise HostsError("no host in the file")
    return hosts


# -- Slurm ---------------------------------------------------------------------------------------

_BRACKETS = re.compile(r"\[([^\]]*)\]")


def expand_nodelist(text: str) -> list[str]:
    """Expand Slurm's compressed host list: ``node[01-03,07],gpu5`` -> node01 node02 ... gpu5.

    Several bracket groups in one name expand to every combination, as Slurm does
    (``r[1-2]n[1-2]`` -> r1n1 r1n2 r2n1 r2n2). Zero padding follows the range's first bound.
    """
    names: list[str] = []
    for item in _split_top_level(text.strip()):
        if not item:
            raise HostsError(f"empty host name in {text!r}")
        parts = _BRACKETS.split(item)  # literal, group, literal, group, ..., literal
        if any(c in p for p in parts[::2] for c in "[]"):
            raise HostsError(f"unbalanced brackets in {item!r}")
        choices = [[p] if i % 2 == 0 else _expand_ranges(p, item) for i, p in enumerate(parts)]
        names.extend("".join(combo) for combo in itertools.product(*choices))
    return names


def _split_top_level(text: str) -> list[str]:
    """Split at the commas that are not inside brackets."""
    items, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif ch == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    items.append(text[start:])
    return items


def _expand_ranges(group: str, item: str) -> list[str]:
    out: list[str] = []
    for part in group.split(","):
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if not m:
            raise HostsError(f"bad range {part!r} in {item!r}")
        lo, hi = m[1], m[2] if m[2] is not None else m[1]
        if int(hi) < int(lo):
            raise HostsError(f"descending range {part!r} in {item!r}")
        width = len(lo) if lo.startswith("0") else 0
        out.extend(str(n).zfill(width) for n in range(int(lo), int(hi) + 1))
    return out


def parse_tasks_per_node(text: str) -> list[int]:
    """Expand ``SLURM_TASKS_PER_NODE``: ``2(x3),1`` -> [2, 2, 2, 1]."""
    counts: list[int] = []
    for part in text.strip().split(","):
        m = re.fullmatch(r"(\d+)(?:\(x(\d+)\))?", part.strip())
        if not m:
            raise HostsError(f"bad SLURM_TASKS_PER_NODE entry {part!r} in {text!r}")
        counts.extend([int(m[1])] * int(m[2] or 1))
    return counts


def slurm_hosts(environ: dict[str, str] | os._Environ[str]) -> list[tuple[str, int | None]]:
    """Return the hosts of our Slurm allocation, with their task counts if Slurm gives them."""
    nodelist = environ.get("SLURM_JOB_NODELIST") or environ.get("SLURM_NODELIST")
    if not nodelist:
        raise HostsError("SLURM_JOB_NODELIST is not set: not inside a Slurm allocation?")
    names = expand_nodelist(nodelist)
    tasks = environ.get("SLURM_TASKS_PER_NODE")
    if not tasks:
        return [(name, None) for name in names]
    counts = parse_tasks_per_node(tasks)
    if len(counts) != len(names):
        raise HostsError(
            f"SLURM_TASKS_PER_NODE={tasks!r} gives {len(counts)} counts for "
            f"{len(names)} nodes in SLURM_JOB_NODELIST={nodelist!r}"
        )
    return list(zip(names, counts, strict=True))


# -- this machine --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Machine:
    """What placement needs to know about the machine mmpi-run runs on (for ``localhost``)."""

    cpus: int  # logical CPUs: the slots of localhost
    sockets: int
    cores_per_socket: int  # physical cores


def detect_machine(sys_cpu: str = "/sys/devices/system/cpu") -> Machine:
    """Read this machine's sockets and physical cores from /sys, else lscpu, else guess 1 socket."""
    cpus = os.cpu_count() or 1
    topology = _from_sys(Path(sys_cpu)) or _from_lscpu()
    if topology is None:
        return Machine(cpus, 1, cpus)
    return Machine(cpus, *topology)


def _from_sys(root: Path) -> tuple[int, int] | None:
    cores: set[tuple[str, str]] = set()
    try:
        for cpu in root.glob("cpu[0-9]*"):
            topo = cpu / "topology"
            if not topo.is_dir():
                continue  # offline CPUs have no topology
            cores.add(
                (
                    (topo / "physical_package_id").read_text().strip(),
                    (topo / "core_id").read_text().strip(),
                )
            )
    except OSError:
        return None
    return _shape(cores)


def _from_lscpu() -> tuple[int, int] | None:
    try:
        out = subprocess.run(
            ["lscpu", "-p=SOCKET,CORE"], capture_output=True, text=True, timeout=5
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    cores = {tuple(line.split(",")[:2]) for line in out.splitlines() if line[:1].isdigit()}
    return _shape(cores)  # type: ignore[arg-type]


def _shape(cores: set[tuple[str, str]]) -> tuple[int, int] | None:
    if not cores:
        return None
    sockets = len({s for s, _ in cores})
    return sockets, max(1, len(cores) // sockets)


__all__ = [
    "HostsError",
    "Machine",
    "detect_machine",
    "expand_nodelist",
    "parse_hostfile",
    "parse_tasks_per_node",
    "slurm_hosts",
]
