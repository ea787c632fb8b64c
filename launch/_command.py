"""The program a job runs, checked before any rank starts: found, and runnable.

Hydra's own report of a command it cannot run is an `execvp` line per rank and status 255,
which say neither what was wrong nor what to do. When every rank runs on this host (so this
host's files and PATH are theirs), mmpi-run looks first, as the shell would, and answers with
the shell's statuses: 127 for a command not found, 126 for one that is not executable. A
Python file named as the command gets the fix: run it with `python`. Pure but for the file
system lookups; nothing is started.

A Python interpreter is looked into too (`python_program`): one given no program would read
it from standard input, which only rank 0 has (the others would run nothing, as separate
worlds), so that is refused wherever the ranks run; a script that is not there is refused
when every rank runs here, instead of every rank's "can't open file" after a whole start-up.
Both are mistakes on the command line: status 2, as Python's own for a missing script.

The launcher itself: a bare `mpiexec` (the default) is the one installed with this Python (the
`mpich` wheel's, beside mmpi-run) where there is one, before whatever `mpiexec` comes first on
PATH: another MPI's would not match the library mpi4py loads, and a wrapper such as pyenv's
shim costs a shell script per job.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import sysconfig
from collections.abc import Sequence
from pathlib import Path

from ._status import NOT_EXECUTABLE, NOT_FOUND, USAGE

_PYTHON = re.compile(r"python[0-9.]*[dmt]?\Z")  # python, python3, python3.11, python3.13t
_INFO = {"-h", "-?", "--help", "--help-env", "--help-xoptions", "--help-all", "-V",
         "--version"}


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


def python_program(args: Sequence[str]) -> tuple[str, str] | None:
    """What a Python command line (`args`, after the interpreter) runs, as Python reads it.

    ("script", path), ("-c", code), ("-m", module), ("-", "-") for standard input, ("info",
    option) for --help or --version; None when it names no program at all.
    """
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            return ("script", args[i + 1]) if i + 1 < len(args) else None
        if arg == "-":
            return ("-", "-")
        if arg in _INFO:
            return ("info", arg)
        if arg.startswith("--"):
            i += 2 if arg == "--check-hash-based-pycs" else 1
            continue
        if arg.startswith("-"):
            for k, flag in enumerate(arg[1:], 2):
                if flag in "cm":  # the rest of the word, else the next one, is the program
                    if not arg[k:] and i + 1 == len(args):
                        return None
                    return (f"-{flag}", arg[k:] or args[i + 1])
                if flag in "hV?":
                    return ("info", arg)
                if flag in "WX":  # its value: the rest of the word, else the next one
                    i += 1 if arg[k:] else 2
                    break
            else:
                i += 1
            continue
        return ("script", arg)
    return None


def check_interpreter(command: Sequence[str]) -> tuple[int, str] | None:
    """(USAGE, message) if `command` is a Python interpreter with no program to run."""
    if not _PYTHON.match(os.path.basename(command[0])):
        return None
    program = python_program(command[1:])
    shown = " ".join(command)
    if program is None:
        return USAGE, (f"{shown!r} names no program to run: give a script, -m module or -c "
                       f"code (mmpi-run ... {command[0]} prog.py)")
    if program[0] == "-":
        return USAGE, (f"{shown!r} would read the program from standard input, which only rank "
                       f"0 reads: give a script (mmpi-run ... {command[0]} prog.py)")
    return None


def check_script(command: Sequence[str], cwd: str | None = None) -> tuple[int, str] | None:
    """(USAGE, message) if `command` is Python with a script this host does not have."""
    if not _PYTHON.match(os.path.basename(command[0])):
        return None
    program = python_program(command[1:])
    if program is None or program[0] != "script":
        return None
    script = program[1]
    path = os.path.join(cwd or os.getcwd(), script)
    if not os.path.exists(path):
        return USAGE, f"cannot run {command[0]} {script}: no such file {path!r}"
    if os.path.isdir(path) and not any(
            os.path.isfile(os.path.join(path, f"__main__{ext}")) for ext in (".py", ".pyc")):
        return USAGE, (f"cannot run {command[0]} {script}: {path!r} is a directory without "
                       "__main__.py")
    if not os.access(path, os.R_OK):
        return USAGE, f"cannot run {command[0]} {script}: {path!r} cannot be read"
    return None


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


__all__ = ["check", "check_interpreter", "check_script", "launcher", "module_argv",
           "python_program"]
