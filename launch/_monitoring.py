"""mmpi-run --monitor DIR: make DIR ready before the run, merge the ranks' files after it.

Every rank of a monitored job (MMPI_MONITOR=DIR, set by the plan) writes ``rank-<vrank>.json``
at finalize; after a successful run mmpi-run checks and merges them into ``DIR/matrix.npz``
with the placement tools' own code (``place.matrices``, the format documented there) and
prints their summary. Rank files and a matrix left in DIR by an earlier run are removed
before the jobs start, so that a smaller job's matrix never takes an earlier job's ranks in.
On hosts other than this one, the ranks write to the same path: DIR must be shared (or the
files copied here) for the merge to find them.

Rule: nothing is written or removed through a link, nor in a directory another user could
have prepared: DIR must be the caller's own directory (not a symbolic link, not writable by
every user without the sticky bit); old files are unlinked, never followed, and every file
is written under a fresh name opened with O_EXCL | O_NOFOLLOW, then renamed into place.
"""

from __future__ import annotations

import os
import pwd
import re
import stat
from pathlib import Path

from mmpi.errors import MMPIError

_RANK_FILE = re.compile(r"rank-\d+\.json\Z")
MATRIX_FILE = "matrix.npz"  # place.matrices.MATRIX_FILE, without importing numpy to start


class MonitorDirError(MMPIError, OSError):
    """The monitor directory cannot be made ready, or its files cannot be merged."""


def prepare(directory: str) -> int:
    """Create `directory` if needed and remove an earlier run's files; return how many."""
    path = Path(directory)
    try:
        path.mkdir(parents=True, exist_ok=True)
        _check_own(directory, os.lstat(path))
        old = [p for p in path.iterdir() if _RANK_FILE.match(p.name) or p.name == MATRIX_FILE]
        for p in old:
            p.unlink()  # a link planted there goes, its target stays
    except OSError as exc:
        raise MonitorDirError(f"--monitor {directory}: {exc.strerror or exc}") from exc
    return len(old)


def _check_own(directory: str, st: os.stat_result) -> None:
    """MonitorDirError unless `st` is a directory of ours that no other user may plant in."""
    if stat.S_ISLNK(st.st_mode):
        raise MonitorDirError(f"--monitor {directory}: is a symbolic link; name the directory "
                              "itself (mmpi-run writes nothing through a link)")
    if not stat.S_ISDIR(st.st_mode):
        raise MonitorDirError(f"--monitor {directory}: exists and is not a directory")
    if st.st_uid != os.getuid():
        raise MonitorDirError(f"--monitor {directory}: belongs to {_user(st.st_uid)}, not to "
                              "you; choose a directory of your own")
    if st.st_mode & stat.S_IWOTH and not st.st_mode & stat.S_ISVTX:
        raise MonitorDirError(f"--monitor {directory}: every user may write in it; choose a "
                              "directory only you can write to")


def _user(uid: int) -> str:
    try:
        return f"user {pwd.getpwuid(uid).pw_name!r}"
    except KeyError:
        return f"uid {uid}"


def merge(directory: str) -> str:
    """Merge the rank files of `directory` into its matrix file; return the summary."""
    from place.errors import MonitorError
    from place.matrices import merge_rank_files, save_matrices
    from place.report import summarize

    out = Path(directory) / MATRIX_FILE
    try:
        job = merge_rank_files(directory)
        save_matrices(job, out)
    except (MonitorError, OSError) as exc:
        raise MonitorDirError(f"--monitor: cannot merge the rank files: {exc}") from exc
    return f"{summarize(job)}\nwrote {out} (mmpi-monitor plot, mmpi-place read it)"


__all__ = ["MATRIX_FILE", "MonitorDirError", "merge", "prepare"]
