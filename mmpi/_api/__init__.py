"""What programs call: communicators and their method groups, requests, groups, topologies.

The classes here stand in for mpi4py's (`Comm`, `Intercomm`, `Cartcomm`, `Request`, `Group`,
...); a communicator is a `core.Core` (a group of world ranks and two contexts over the
engine) behind them.
"""
