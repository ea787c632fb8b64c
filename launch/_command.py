"""The program a job runs, checked before any rank starts: found, and runnable.

Hydra's own report of a command it cannot run is an `execvp` line per rank and status 255,
which say neither what was wrong nor what to do. When every rank runs on this host (so this
host's files and PATH are theirs), mmpi-run looks first, as the shell would, and answers with
the shell's statuses: 127 for a command not found, 126 for one that is not executable. A
Python file named as the command gets the fix: run it with `python`. Pure but for the file
system lookups; nothing is started.

The launcher itself: a bare `mpiexec` (the default) is the one installed with this Python (the
`mpich` wheel's, beside mmpi-run) where there is one, before whatever `mpiexec` comes first on
PATH: another MPI's would not match the library mpi4py loads, and a wrapper such as pyenv's
shim costs a shell script per job.
"""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
from collections.abc import Sequence
from pathlib import Path

from ._status import NOT_EXECUTABLE, NOT_FOUND


def check(command: Sequence[str], cwd: str | None = None) -> tuple[int, str] | None:
    """(status, message) if `command` cannot run on this host, else None."""
    name = command[0]
    cwd = cwd or os.getcwd()
    hint = ""
    if name.endswith(".py"):
        hint = f"; to run a Python program, name the interpreter: mmpi-run ... python {name}"
    if "/" in name:
        path = os.path.join(cwd, name)
        if not os.path.exists(path):
            return NOT_FOUND, f"cannot run {name!r}: no such file{hint}"
        if os.path.isdir(path) or not os.access(path, os.X_OK):
            what = "a directory" if os.path.isdir(path) else "not executable"
            return NOT_EXECUTABLE, f"cannot run {name!r}: it is {what}{hint}"
        return None
    if shutil.which(name) is not None:
        return None
    if os.path.isfile(os.path.join(cwd, name)):  # as the shell, Hydra looks on PATH only
        return NOT_FOUND, (f"cannot run {name!r}: not a command on PATH (it is a file here)"
                           f"{hint or f'; ./{name} runs it if it is executable'}")
    return NOT_FOUND, f"cannot run {name!r}: command not found on PATH{hint}"


def launcher(command: str) -> str:
    """`command`, or for a bare `mpiexec` the one installed beside this Python if any."""
    if command != "mpiexec":
        return command
    beside = Path(sysconfig.get_path("scripts")) / command
    return str(beside) if beside.is_file() and os.access(beside, os.X_OK) else command


def module_argv(python: str, module: str) -> tuple[str, ...]:
    """`python -m module`, with no directory of the user's first on the module's path.

    `python -m` puts the working directory first on sys.path, where a user's `forwarder.py`
    or `bench.py` would run in place of ours: -P (Python 3.11 on) leaves it out; before
    3.11, the same by dropping that entry before the module is looked up.
    """
    if sys.version_info >= (3, 11):
        return (python, "-P", "-m", module)
    return (python, "-c", "import runpy, sys; del sys.path[0]; "
            f"runpy.run_module({module!r}, run_name='__main__', alter_sys=True)")


__all__ = ["check", "launcher", "module_argv"]
