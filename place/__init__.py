"""Monitoring and placement tools: a monitored job's traffic matrices, and where its ranks go.

``mmpi-monitor merge DIR`` checks the rank files a monitored job wrote and makes ``matrix.npz``
(`matrices`); ``mmpi-monitor plot`` draws it (`plot`); ``mmpi-place`` proposes the layout that
keeps the most traffic inside the clusters (`partition`, `advice`) and writes it as a rank map
(`rankmap`), which ``mmpi-run --rank-map`` reads with `load_rank_map`.
"""

from __future__ import annotations

from .errors import MonitorError, PlacementError, RankMapError
from .matrices import JobMatrices, load_job, load_matrices, merge_rank_files, save_matrices
from .partition import Split, bisect, cut_bytes, separator
from .rankmap import load_rank_map, rank_map_data, rank_map_owners, write_rank_map

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
