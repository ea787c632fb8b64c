"""The job file's values checked one by one, each error naming its key path (config.py's parts).

Each check takes the value as YAML gave it and its key path (``clusters.low.ranks``), and
returns it typed or raises ConfigError saying what was expected and what was found.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Collection, Mapping
from types import MappingProxyType

from mmpi.errors import MMPIError
from mmpi.wire.knobs import MAX_RANKS

RESERVED_ENV_PREFIX = "MMPI_"
# Counts are bounded by what can run, so that a typo (an extra digit, a pasted number) is an
# error here, not a plan of a million processes. Every rank is a process that mmpi-run places
# and watches and that every forwarder serves (mmpi/wire/knobs.py holds the number, shared
# with the ranks' own knobs). A forwarder is a process and an mpiexec job of its own relaying
# both ways: more than MAX_FORWARDERS on one node only take each other's cores.
MAX_FORWARDERS = 16
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


class ConfigError(MMPIError, ValueError):
    """The job description is invalid; the message names the file and the key path."""

    def __init__(self, path: str, problem: str, *, source: str | None = None) -> None:
        self.path = path
        self.problem = problem
        self.source = source
        parts = [p for p in (source, path) if p]
        super().__init__(": ".join([*parts, problem]))


def show(value: object) -> str:
    """Describe an offending value the way it looked in the YAML."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def mapping(
    value: object, path: str, allowed: Collection[str], required: Collection[str] = ()
) -> dict[str, object]:
    """A mapping with only `allowed` keys and every `required` one."""
    if not isinstance(value, Mapping):
        raise ConfigError(path, f"expected a mapping, got {show(value)}")
    for key in value:
        if key not in allowed:
            close = difflib.get_close_matches(str(key), sorted(allowed), n=1, cutoff=0.6)
            hint = f"did you mean {close[0]!r}?" if close else f"expected one of {sorted(allowed)}"
            raise ConfigError(path, f"unknown key {key!r} ({hint})")
    for key in sorted(required):
        if key not in value:
            raise ConfigError(path, f"missing required key {key!r}")
    return dict(value)


def a_list(value: object, path: str) -> list[object]:
    """A list."""
    if not isinstance(value, list):
        raise ConfigError(path, f"expected a list, got {show(value)}")
    return value


def positive_int(value: object, path: str) -> int:
    """An integer >= 1."""
    # bool is an int in Python; `ranks: true` is a mistake, not 1.
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(path, f"expected a positive integer, got {show(value)}")
    return value


def ranks(value: object, path: str) -> int:
    """The ranks of one cluster: 1 to MAX_RANKS."""
    return _count(value, path, MAX_RANKS, "ranks in one cluster (each is a process that every "
                  "forwarder serves)")


def forwarders(value: object, path: str) -> int:
    """The forwarders of one zipper node: 1 to MAX_FORWARDERS."""
    return _count(value, path, MAX_FORWARDERS, "forwarders on one zipper node (each relays both "
                  "ways in a process of its own: more only take each other's cores)")


def _count(value: object, path: str, maximum: int, what: str) -> int:
    number = positive_int(value, path)
    if number > maximum:
        raise ConfigError(path, f"expected at most {maximum} {what}, got {show(number)}")
    return number


MAX_SECONDS = 86400  # a start-up that waits longer than a day is stuck, not slow


def positive_number(value: object, path: str) -> float:
    """A number of seconds > 0, at most MAX_SECONDS."""
    # `not 0 < value <= MAX` also refuses NaN and .inf
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
            0 < value <= MAX_SECONDS):
        raise ConfigError(path, f"expected a positive number of seconds up to "
                                f"{MAX_SECONDS} (a day), got {show(value)}")
    return value


def optional_str(value: object, path: str, what: str, *, spaces: bool = False) -> str | None:
    """None, or a non-empty string (without spaces unless `spaces`), described as `what`."""
    if value is None:
        return None
    if not isinstance(value, str) or not value or (not spaces and any(c.isspace() for c in value)):
        raise ConfigError(path, f"expected {what}, got {show(value)}")
    return value


def boolean(value: object, path: str) -> bool:
    """A YAML boolean: true or false."""
    if not isinstance(value, bool):
        raise ConfigError(path, f"expected true or false, got {show(value)}")
    return value


def wrapper(value: object, path: str) -> tuple[str, ...]:
    """A command-line prefix: a list of non-empty strings."""
    items = a_list(value, path)
    for i, arg in enumerate(items):
        if not isinstance(arg, str) or not arg:
            raise ConfigError(f"{path}[{i}]", f"expected a non-empty string, got {show(arg)}")
    return tuple(items)  # type: ignore[arg-type]


def env_mapping(value: object, path: str) -> Mapping[str, str]:
    """Environment variables (not mmpi-run's own MMPI_*): names to string values."""
    if not isinstance(value, Mapping):
        raise ConfigError(
            path, f"expected a mapping of variable names to values, got {show(value)}"
        )
    env: dict[str, str] = {}
    for name, val in value.items():
        key = f"{path}.{name}"
        if not isinstance(name, str) or not _ENV_NAME.match(name):
            raise ConfigError(path, f"expected an environment variable name, got {show(name)}")
        if name.startswith(RESERVED_ENV_PREFIX):
            raise ConfigError(key, f"variables named {RESERVED_ENV_PREFIX}* are set by mmpi-run")
        # Numbers are accepted because `OMP_NUM_THREADS: 1` is what people write; booleans and
        # null are not, since "True"/"None" is never what they meant.
        if isinstance(val, bool) or not isinstance(val, (str, int, float)):
            raise ConfigError(key, f"expected a string, got {show(val)}")
        env[name] = str(val)
    return MappingProxyType(env)


__all__ = ["MAX_FORWARDERS", "MAX_RANKS", "RESERVED_ENV_PREFIX", "ConfigError", "a_list",
           "boolean", "env_mapping", "forwarders", "mapping", "optional_str", "positive_int",
           "positive_number", "ranks", "show", "wrapper"]
