"""mmpi-run's exit statuses, in one place: the CLI documents them, the runner returns them.

Rule: a status the shell gives meaning to keeps it (128 + N for death by signal N, 130 for
Ctrl-C); the program's own statuses pass through; mmpi-run's own conditions use the BSD
sysexits numbers, which programs rarely return.
"""

from __future__ import annotations

OK = 0
ERROR = 1  # the job description (file, option values, MMPI_* knobs) is invalid, or a job
#            could not be started
USAGE = 2  # bad command line: options, no command, a Python without a program or its script
NOT_BRIDGED = 69  # EX_UNAVAILABLE: the bridge failed, or the ranks never joined it
INTERNAL = 70  # EX_SOFTWARE: a bug in mmpi-run
NOT_EXECUTABLE = 126  # the shell's: the command is there but cannot be run
NOT_FOUND = 127  # the shell's: no such command
INTERRUPTED = 130  # Ctrl-C (128 + SIGINT)


def killed(signum: int) -> int:
    """The shell's status for a process killed by signal `signum`."""
    return 128 + signum


HELP = f"""\
exit status:
  0        every rank finished successfully
  1-125    the status of the rank that failed first (1 for an uncaught exception)
  128+N    the process that failed first (a rank or a forwarder) was killed by signal N
           (137 SIGKILL, 134 SIGABRT, 139 SIGSEGV), or mmpi-run itself was (130 Ctrl-C,
           143 SIGTERM)
  {ERROR}        the job description is invalid (the job file, an option's value, an MMPI_*
           knob in the environment), or a job could not be started
  {USAGE}        bad command line: an option, no command, a Python given no program, or a
           script that is not there (mmpi-run python nope.py)
  {NOT_BRIDGED}       the job did not run bridged: a forwarder failed, hung, was stopped or did
           not exit, or no rank ever joined the bridge (the clusters ran as separate worlds)
  {INTERNAL}       internal error (a bug in mmpi-run)
  {NOT_EXECUTABLE}      the command is not executable (a directory, a file without x)
  {NOT_FOUND}      the command was not found (a Python program needs `python` in front)
"""

__all__ = ["ERROR", "HELP", "INTERNAL", "INTERRUPTED", "NOT_BRIDGED", "NOT_EXECUTABLE",
           "NOT_FOUND", "OK", "USAGE", "killed"]
