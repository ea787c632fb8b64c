"""Monitoring and placement tools: a monitored job's traffic matrices, and where its ranks go.

``mmpi-monitor merge DIR`` checks the rank files a monitored job wrote and makes ``matrix.npz``
(`matrices`); ``mmpi-monitor plot`` draws it (`plot`); ``mmpi-place`` proposes the layout that
keeps the most traffic inside the clusters (`partition`, `advice`) and writes it as a rank map
(`rankmap`), which ``mmpi-run --rank-map`` reads with `load_rank_map`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from .errors import MonitorError, PlacementError, RankMapError
from .rankmap import load_rank_map, rank_map_data, rank_map_owners, write_rank_map

# numpy is imported only when the matrices or the partitioner are asked for: mmpi-run reads
# rank maps (`rankmap`) on every start that has one and should not pay for it.
_LAZY = {
    "JobMatrices": "matrices", "load_job": "matrices", "load_matrices": "matrices",
    "merge_rank_files": "matrices", "save_matrices": "matrices",
    "Split": "partition", "bisect": "partition", "cut_bytes": "partition",
    "separator": "partition",
}  # fmt: skip

if TYPE_CHECKING:
    from .matrices import JobMatrices, load_job, load_matrices, merge_rank_files, save_matrices
    from .partition import Split, bisect, cut_bytes, separator


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{module}", __name__), name)


__all__ = [
    "JobMatrices",
    "MonitorError",
    "PlacementError",
    "RankMapError",
    "Split",
    "bisect",
    "cut_bytes",
    "load_job",
    "load_matrices",
    "load_rank_map",
    "merge_rank_files",
    "rank_map_data",
    "rank_map_owners",
    "save_matrices",
    "separator",
    "write_rank_map",
]
