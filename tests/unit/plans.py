"""Plans made for the plan tests: a fixed machine, paths and interpreter, no side effects."""

from __future__ import annotations

import pytest

from launch._hosts import Machine
from launch._openmpi import MPICH
from launch._overrides import with_overrides
from launch.config import ConfigError, load, parse
from launch.plan import Plan, make_plan

PY = "/usr/bin/python3"
DIR = "/tmp/mmpi-test"
MACHINE = Machine(cpus=2, sockets=1, cores_per_socket=2)  # "localhost" in these tests


def plan_for(
    data: dict | None = None,
    command=("python", "prog.py"),
    machine=MACHINE,
    environ: dict | None = None,
    mpi: str = MPICH,
    **overrides,
) -> Plan:
    """Plan `command` for the job `data` (default: the embedded job) with CLI overrides."""
    config = load() if data is None else parse(data, environ={})
    config = with_overrides(config, **overrides)
    return make_plan(config, list(command), DIR, python=PY, machine=machine, environ=environ,
                     mpi=mpi)


def clusters(low: dict | None = None, high: dict | None = None, **top) -> dict:
    """Job data with 2 ranks per cluster; `low`/`high` add cluster keys, `top` top-level keys."""
    return {
        "clusters": {"low": {"ranks": 2, **(low or {})}, "high": {"ranks": 2, **(high or {})}},
        **top,
    }


def error_of(data: dict, **kwargs) -> str:
    """The ConfigError planning `data` raises."""
    with pytest.raises(ConfigError) as info:
        plan_for(data, **kwargs)
    return str(info.value)
