"""What the rank side asks of its backend: the transport's hot loops, and the compiled lanes.

One backend serves a process, chosen once (`mmpi._backend.get`): `python.PythonBackend`, the
reference, or `compiled.CompiledBackend`, the same calls in C (this folder's C files, built
as the extension `mmpi._backend._compiled` where a compiler was found at install). Callers
hold a `Backend` and never ask which one it is; both run the same tests.

A *link* is a forwarder's control channel in the form the backend's calls take
(`Backend.link`): mpi4py's intercommunicator for the Python backend, its integer handle for
the compiled one.

`Lanes` are whole calls in one compiled call (a communicator's common sends and receives, the
small blocking collectives, the direct Alltoall). Their reference is the engine's and the
collectives' own steps, above this layer, so a backend without lanes (`lanes` None: the
Python backend) leaves every call to those steps; a caller asks once, when it sets up
(a communicator, a collective's front), not on every call.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol


class Gate(Protocol):
    """The progress thread's gate around every public call (mmpi/_runtime/progress.py Rule 1)."""

    busy: int
    passing: bool
    owner: int
    thread: Any

    def locked(self, fn: Callable) -> Callable:
        """`fn`, run behind the gate."""


class Backend(Protocol):
    """The transport's hot loops: the same behaviour in Python and in C."""

    name: str  # "python" or "compiled"
    lanes: Any  # the compiled lanes (Sender, Receiver, Front, small_coll, ...), or None

    def link(self, comm: Any) -> Any:
        """Forwarder link `comm` (a control intercommunicator) as this backend's calls take it."""

    def drain(self, link: Any, contexts: dict | None) -> list | None:
        """Every message waiting on `link`, in arrival order, or None if there is none.

        Items are (MPI tag, bytearray, src, user tag, context id); src is -1 unless the item
        is a plain eager message whose envelope was read here. With `contexts` (the engine's,
        by id) a backend may complete a posted receive that takes such a message whole,
        which then is not in the list.
        """

    def wait_link(self, link: Any, rounds: int) -> bool:
        """Whether a message waits on `link`: probed up to `rounds` times, with yields."""

    def wait_ops(self, link: Any, contexts: dict, ops: list, rounds: int
                 ) -> tuple[bool, list | None]:
        """A wait's first rounds for receives `ops`, completed from `link` where possible.

        (whether anything came, what was left for Python to hand on or None). A backend
        may return (False, None) at once: the engine's wait then does these rounds itself.
        """

    def send_eager(self, link: Any, mpitag: int, src: int, dst: int, tag: int, cid: int,
                   flags: int, aux: int, payload: Any) -> None:
        """Envelope and a copy of `payload` to the forwarder on `link`; complete at once."""

    def reap(self) -> bool:
        """Forget the completed `send_eager` sends; True once none is left."""

    def pending(self) -> int:
        """`send_eager` sends not known to be complete."""

    def Gate(self, lock: Any, op: Any) -> Gate:  # noqa: N802 - a class in both backends
        """A new gate for the progress thread (`op`: mmpi's operation module)."""


__all__ = ["Backend", "Gate"]
