"""mmpi-run: start the forwarders and both cluster jobs of an mmpi program, and watch them."""

from __future__ import annotations

from ._command import launcher, module_argv
from ._dvm import DVMError
from ._dvm import running as openmpi_dvm
from ._openmpi import detect as detect_mpi
from ._openmpi import prefix_env as openmpi_env
from ._overrides import with_overrides
from .config import Config, ConfigError, Host, load
from .plan import Launch, Plan, make_plan
from .runner import LaunchError, run

__all__ = [
    "launcher",
    "module_argv",
    "Config",
    "ConfigError",
    "Host",
    "Launch",
    "DVMError",
    "detect_mpi",
    "openmpi_dvm",
    "openmpi_env",
    "LaunchError",
    "Plan",
    "load",
    "make_plan",
    "run",
    "with_overrides",
]
