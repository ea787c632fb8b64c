"""Cluster-aware collectives, by family: rooted, all-to-all, reductions, pickled objects.

Every collective follows MagPIe's wide-area-optimal shape: the part inside a cluster uses the
native (non-blocking) MPI collective on that cluster's own communicator; only what must cross
goes through the forwarder, between one contact rank per cluster, as a single aggregated
message per direction (see `transport` for how it moves). Each family module's public
functions check their arguments and return the call's steps, a generator run by `run`.
"""
