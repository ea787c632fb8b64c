r"""A rank's output marked as Hydra marks it, where the launcher cannot (Open MPI's PRRTE).

mmpi-run reads each cluster's output as chunks that start with ``\x1f[k] `` (k the job's
rank) and names every line by its rank (launch/runner.py). Hydra writes that mark itself
(-prepend-pattern); under Open MPI (MMPI_OUTPUT_MARK=1, launch/_openmpi.py Rule 3) each rank
writes it, before every write to stdout and stderr and after every newline inside one.
Output a rank's C code writes to the descriptors directly is not marked (it is shown as the
launcher's own).
"""

import io
import os
import sys


class _Marked(io.RawIOBase):
    """File descriptor `fd`, each write marked with `mark`."""

    def __init__(self, fd: int, mark: bytes) -> None:
        super().__init__()
        self._fd, self._mark = fd, mark

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._fd

    def write(self, data) -> int:
        data = bytes(data)
        if not data:
            return 0
        body = data[:-1].replace(b"\n", b"\n" + self._mark) + data[-1:]
        view = memoryview(self._mark + body)
        while view:
            view = view[os.write(self._fd, view):]
        return len(data)


def install(rank: str) -> None:
    """Mark sys.stdout and sys.stderr from now on with rank `rank`'s mark."""
    mark = f"\x1f[{rank}] ".encode()
    for name, fd in (("stdout", 1), ("stderr", 2)):
        old = getattr(sys, name)
        if old is None:
            continue
        old.flush()
        raw = _Marked(fd, mark)
        new = io.TextIOWrapper(io.BufferedWriter(raw), encoding=old.encoding,
                               errors=old.errors, line_buffering=old.line_buffering,
                               write_through=name == "stderr")
        setattr(sys, name, new)
        setattr(sys, f"__{name}__", new)


def rank_here() -> str | None:
    """The rank of this process in its job, as Open MPI tells it (None: not under Open MPI)."""
    for name in ("OMPI_COMM_WORLD_RANK", "PMIX_RANK"):
        if os.environ.get(name, "").isdigit():
            return os.environ[name]
    return None
