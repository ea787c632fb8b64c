"""Host entries of a cluster: `hosts:` lists, host files and Slurm allocations as `Host`s.

The text formats themselves are `_hosts.py`'s (pure parsing, `HostsError` with a line number);
here they become `Host` entries and every error a `ConfigError` with its key path, as the rest
of config.py's checks (Rule: a check takes ``(value, path)``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from mmpi.wire import text as textfile

from ._checks import ConfigError, a_list, mapping, positive_int, show
from ._hosts import HostsError, parse_hostfile, slurm_hosts

SLURM = "slurm"  # `hosts: slurm`


@dataclass(frozen=True)
class Host:
    """One host entry of a cluster; None means "not given" (placement supplies the default)."""

    name: str
    slots: int | None = None
    sockets: int | None = None
    cores_per_socket: int | None = None
    path: str = field(default="", compare=False)  # where it was given, for messages


LOCALHOST = (Host("localhost"),)  # a cluster's hosts when none are given


def shape(m: Mapping[str, object], path: str) -> tuple[int | None, int | None]:
    """Validate a host shape, `sockets` and `cores_per_socket`: both or neither."""
    sockets, cores = m.get("sockets"), m.get("cores_per_socket")
    if (sockets is None) != (cores is None):
        raise ConfigError(path, "give both 'sockets' and 'cores_per_socket', or neither")
    if sockets is None:
        return None, None
    return (
        positive_int(sockets, f"{path}.sockets"),
        positive_int(cores, f"{path}.cores_per_socket"),
    )


def from_hostfile(filename: str, path: str) -> tuple[Host, ...]:
    """The hosts of host file `filename` (`clusters.<name>.hostfile`), each named by its line."""
    try:
        text = textfile.read(filename)
    except OSError as exc:
        raise ConfigError(path, f"cannot read {filename}: {exc.strerror}") from exc
    except textfile.NotText as exc:
        raise ConfigError(path, f"{filename}: {exc}") from None
    try:
        entries = parse_hostfile(text)
    except HostsError as exc:
        raise ConfigError(path, f"{filename}: {exc}") from exc
    return tuple(
        Host(name, slots, path=f"{path} ({filename} line {line})") for line, name, slots in entries
    )


def from_slurm(environ: Mapping[str, str], path: str) -> tuple[Host, ...]:
    """The nodes of the Slurm allocation `environ` describes (`hosts: slurm`)."""
    try:
        entries = slurm_hosts(environ)  # type: ignore[arg-type]
    except HostsError as exc:
        raise ConfigError(path, f"'{SLURM}': {exc}") from exc
    return tuple(
        Host(name, slots, path=f"{path} (Slurm node {i})")
        for i, (name, slots) in enumerate(entries)
    )


def host_name(value: object, path: str) -> str:
    """`value` checked as a host name."""
    # A comma would silently split into two hosts in Hydra's `-hosts a,b`, a colon give slots.
    if not isinstance(value, str) or not value or any(c in ",:" or c.isspace() for c in value):
        raise ConfigError(path, f"expected a host name, got {show(value)}")
    return value


_HOST_WITH_SLOTS = re.compile(r"([^:]+):(\d+)\Z")


def _entry(value: object, path: str) -> Host:
    if isinstance(value, Mapping):
        m = mapping(value, path, {"name", "slots", "sockets", "cores_per_socket"}, {"name"})
        slots = m.get("slots")
        sockets, cores = shape(m, path)
        return Host(
            host_name(m["name"], f"{path}.name"),
            None if slots is None else positive_int(slots, f"{path}.slots"),
            sockets,
            cores,
            path=path,
        )
    if isinstance(value, str) and (m := _HOST_WITH_SLOTS.match(value)):
        return Host(host_name(m[1], path), positive_int(int(m[2]), f"{path} (slots)"), path=path)
    if not isinstance(value, str):
        raise ConfigError(
            path, f"expected a host name, 'name:slots' or a mapping with 'name', got {show(value)}"
        )
    return Host(host_name(value, path), path=path)


def host_list(value: object, path: str) -> tuple[Host, ...]:
    """A `hosts:` list: names, `name:slots` or mappings with `name`."""
    if isinstance(value, str):
        raise ConfigError(path, f"expected a list of hosts or '{SLURM}', got {show(value)}")
    items = a_list(value, path)
    if not items:
        raise ConfigError(path, "expected at least one host name, got an empty list")
    return tuple(_entry(h, f"{path}[{i}]") for i, h in enumerate(items))


__all__ = ["LOCALHOST", "SLURM", "Host", "from_hostfile", "from_slurm", "host_list", "host_name",
           "shape"]
