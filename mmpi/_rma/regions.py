"""A dynamic window's memory: the regions a target has attached, found by address.

Rule 1: a window made by `Win.Create_dynamic` starts with no memory; each rank attaches and
        detaches its own regions (`Attach`, `Detach`: local calls, as in MPI). An origin
        addresses target memory by its absolute address at the target (`MPI.Get_address`
        there, sent over by the program) with a displacement unit of 1, as MPI says.
Rule 2: the target resolves an operation's bytes to the one attached region that holds them
        all; an operation that reaches outside every region is the program's error, raised
        on the target (whose memory it would have written) naming the origin and the bytes.
"""

from __future__ import annotations

from .._startup.native import MPI
from ..errors import UsageError


class Regions:
    """The regions attached to one rank's dynamic window: address -> writable bytes."""

    __slots__ = ("_by_address",)

    def __init__(self) -> None:
        self._by_address: dict[int, memoryview] = {}

    def attach(self, view: memoryview) -> None:
        """Expose `view` (format 'B', writable) at its own address."""
        if len(view):
            self._by_address[MPI.Get_address(view)] = view

    def detach(self, view: memoryview, rank: int) -> None:
        """Stop exposing the region `view` starts (attached before)."""
        where = MPI.Get_address(view) if len(view) else 0
        if len(view) and self._by_address.pop(where, None) is None:
            raise UsageError(f"Win.Detach on rank {rank}: no memory attached at address "
                             f"{where:#x}")

    def find(self, lo: int, hi: int, source: int, rank: int) -> tuple[memoryview, int]:
        """(region, offset of `lo` in it) for the bytes lo..hi (absolute addresses)."""
        for base, view in self._by_address.items():
            if base <= lo and hi <= base + len(view):
                return view, base
        raise UsageError(f"Win (dynamic) on rank {rank}: rank {source} reached bytes "
                         f"{lo:#x}..{hi:#x}, outside the memory attached here")


__all__ = ["Regions"]
