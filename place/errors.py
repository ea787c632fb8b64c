"""Errors of the monitoring and placement tools; each names the file, field or rank at fault."""

from __future__ import annotations

from mmpi.errors import MMPIError


class MonitorError(MMPIError, ValueError):
    """A monitor directory, rank file or matrix file does not follow its documented format."""


class RankMapError(MMPIError, ValueError):
    """A rank map is refused: a rank twice or missing, wrong cluster sizes, unknown keys."""


class PlacementError(MMPIError, ValueError):
    """A placement cannot be computed as asked (cluster sizes, a missing partitioner)."""
