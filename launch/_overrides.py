"""Command-line overrides of a job's configuration (`mmpi-run --low 3 ...`), checked as the file is.

Each override replaces one value of the frozen `Config` the file gave, through the same checks
as the file's own keys, and an error names the key it stands for and the option it came from
(``clusters.low.ranks (from --low)``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

from ._checks import ConfigError, boolean
from ._checks import forwarders as forwarder_count
from ._checks import ranks as rank_count
from .config import Config, cpu_list, directory_of, placement_of, progress_mode, rank_map_file


def with_overrides(
    config: Config,
    *,
    low: int | None = None,
    high: int | None = None,
    forwarders: int | None = None,
    placement: str | None = None,
    forwarder_cpus: Sequence[int] | None = None,
    mpi4py_hook: bool | None = None,
    rank_map: str | None = None,
    monitor: str | None = None,
    progress: str | None = None,
) -> Config:
    """Apply command-line overrides, validated by the file's own checks.

    ``--low``, ``--high``, ``--forwarders``, ``--placement`` (both clusters),
    ``--forwarder-cpus`` (the single zipper node's ``cpus``), ``--no-mpi4py-hook``,
    ``--rank-map`` (a rank map file, checked against the cluster sizes after ``--low`` and
    ``--high``) and ``--monitor`` (a directory, relative to the current one).
    """
    if mpi4py_hook is not None:
        hook = boolean(mpi4py_hook, "mpi4py_hook (from --no-mpi4py-hook)")
        config = dataclasses.replace(config, mpi4py_hook=hook)
    if low is not None:
        n = rank_count(low, "clusters.low.ranks (from --low)")
        config = dataclasses.replace(config, low=dataclasses.replace(config.low, ranks=n))
    if high is not None:
        n = rank_count(high, "clusters.high.ranks (from --high)")
        config = dataclasses.replace(config, high=dataclasses.replace(config.high, ranks=n))
    if forwarders is not None:
        path = "zipper[0].forwarders (from --forwarders)"
        config = _single_zipper(config, path, "forwarders", forwarder_count(forwarders, path))
    if placement is not None:
        placement_of(placement, "clusters.low.placement (from --placement)")  # both alike
        config = dataclasses.replace(
            config,
            low=dataclasses.replace(config.low, placement=placement),
            high=dataclasses.replace(config.high, placement=placement),
        )
    if forwarder_cpus is not None:
        cpus = cpu_list(list(forwarder_cpus), "zipper[0].cpus", " (from --forwarder-cpus)")
        config = _single_zipper(config, "zipper[0].cpus (from --forwarder-cpus)", "cpus", cpus)
    if progress is not None:
        config = dataclasses.replace(
            config, progress=progress_mode(progress, "progress (from --progress)"))
    if monitor is not None:
        directory = directory_of(monitor, "monitor (from --monitor)", Path.cwd())
        config = dataclasses.replace(config, monitor=directory)
    if rank_map is not None:
        owners = rank_map_file(rank_map, "--rank-map", None, config.low.ranks, config.high.ranks)
        config = dataclasses.replace(config, owners=owners, rank_map="--rank-map")
    elif config.owners is not None and (low is not None or high is not None):
        for c in config.clusters:  # the file's rank map against the new sizes
            n = config.owners.count(c.name)
            if n != c.ranks:
                raise ConfigError(
                    config.rank_map or "rank_map",
                    f"{c.name} lists {n} rank{'s' * (n != 1)} but the job has {c.ranks} in the "
                    f"{c.name} cluster (from --{c.name})",
                    source=config.source,
                )
    return config


def _single_zipper(config: Config, path: str, key: str, value: object) -> Config:
    """`config` with its one zipper node's `key` set to `value` (a command-line override).

    A job with several zipper nodes must set them in its file: which one would be meant?
    """
    if len(config.zipper) != 1:
        raise ConfigError(
            path,
            f"the job has {len(config.zipper)} zipper nodes; set zipper[i].{key} in the file "
            "instead",
            source=config.source,
        )
    return dataclasses.replace(
        config, zipper=(dataclasses.replace(config.zipper[0], **{key: value}),)
    )


__all__ = ["with_overrides"]
