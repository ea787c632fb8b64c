"""What reaches the screen and the log: output live, the noise of a failure held back.

When one rank fails, the others follow, each with a traceback (``RankGone``, ``ForwarderLost``),
an ``Abort(...)`` notice, UCX's error lines and Hydra's banner: dozens of lines that bury the
one that says what went wrong. So, unless ``--verbose``:

- every line goes to the log file at once, as it would to the screen;
- program output goes to the screen at once too, except *noise*: a traceback and what follows
  it (an MPICH error stack, chained tracebacks), ``Abort(...) on node ...`` notices and all
  that the process says after one on that stream, UCX log lines, and Hydra's banner. Those are
  held, per process and stream;
- a process whose stream carries on with ordinary output after held lines survived them (a
  program that printed a traceback and went on): its held lines are shown first, in order;
- at the end the runner shows the held lines of the cause (`show`) and drops the rest (they
  are in the log), or shows everything still held if the job succeeded (`release`). The
  cause's traceback is shown without the frames inside mmpi (where the error was raised for
  the program's call says nothing to its author) and without its last line when the
  runner's report quotes that line already.

Rule: nothing is ever lost: a line is either shown or logged, and logged lines are all lines.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

Source = tuple[str, "int | None"]  # (job name, local rank or None for the job's own lines)

_TRACEBACK = "Traceback (most recent call last):"
# A SyntaxError in the program itself comes without that header: its first line is the frame.
BARE_FRAME = re.compile(r'  File ".*", line \d+')
_FRAME = re.compile(r'  File "(.*)", line \d+')
# Frames in these files are mmpi's own (the ranks run the mmpi that mmpi-run is part of).
_INTERNAL = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "mmpi", "")
_CHAINED = (
    "During handling of the above exception, another exception occurred:",
    "The above exception was the direct cause of the following exception:",
)
_STACK_ENTRY = re.compile(r"\w+\(\d+\)\.*:.*")  # MPICH: "MPIR_Wait(745)......: message"
_ABORT = re.compile(r"Abort\(-?\d+\) on node \d+ ")
_IGNORED = "Exception ignored in"  # Python's report of an error it cannot raise (atexit...)
# UCX: "[vm:15130:0:15156]  cma_ep.c:85 ..." and "[1795263317.010223] [vm:3367 :0]  ..."
_UCX = re.compile(r"(?:\[\d+\.\d+\] )?\[[^\s:\]]+:\d+\s*:\d+(?::\d+)?\]")
# Hydra's banner when a process of the job ends badly, and its advice after it.
_BANNER = re.compile(
    r"|=+|=   .*|YOUR APPLICATION TERMINATED WITH THE EXIT STRING: .*"
    r"|This typically refers to a problem with your application\."
    r"|Please see the FAQ page for debugging suggestions"
)

# Open MPI: its launcher's boxed notices ("prte has exited due to ..."), between lines of
# dashes, and a process's "[host:pid] *** An error occurred in ..." report.
_OMPI_BOX = re.compile(r"-{40,}")
_OMPI_REPORT = re.compile(r"\[[^\s\]]+:\d+\] \*\*\* .*")

_NORMAL, _IN_TRACEBACK, _AFTER_EXCEPTION, _ABORTING, _IN_BOX = range(5)


@dataclass
class _Stream:
    """One process's stream: where it is in a traceback, and what is held back."""

    state: int = _NORMAL
    # (arrival, label, text, a launcher's notice: never shown as the cause's words)
    held: list[tuple[int, str, str, bool]] = field(default_factory=list)
    notice: bool = False  # the line is_noise just held is a launcher's notice

    def is_noise(self, text: str, from_mpiexec: bool) -> bool:
        self.notice = False
        if self.state == _ABORTING:  # MPI_Abort was called: the rest is its last words
            return True
        if self.state == _IN_BOX:
            if _OMPI_BOX.fullmatch(text):
                self.state = _NORMAL
            self.notice = True
            return True
        if from_mpiexec and _OMPI_BOX.fullmatch(text):
            self.state = _IN_BOX
            self.notice = True
            return True
        if self.state == _IN_TRACEBACK:
            if text and not text[0].isspace() and text != _TRACEBACK and text not in _CHAINED:
                self.state = _AFTER_EXCEPTION  # "Error: message", the traceback's last line
            return True
        if self.state == _AFTER_EXCEPTION:
            if text == "" or text in _CHAINED or _STACK_ENTRY.fullmatch(text):
                return True
            self.state = _NORMAL
        if text == _TRACEBACK or BARE_FRAME.fullmatch(text):
            self.state = _IN_TRACEBACK
            return True
        if text.startswith(_IGNORED):
            self.state = _AFTER_EXCEPTION  # its traceback follows
            return True
        if _ABORT.match(text):
            self.state = _ABORTING
            return True
        if _UCX.match(text) or _OMPI_REPORT.fullmatch(text):
            return True
        return from_mpiexec and bool(_BANNER.fullmatch(text))


class Console:
    """Our stdout/stderr and the log, shared by the reader threads: whole lines, one at a time."""

    def __init__(self, log: IO[str] | None = None, *, verbose: bool = False) -> None:
        self._lock = threading.Lock()
        self._log = log
        self._verbose = verbose
        self._broken: set[str] = set()
        self._streams: dict[tuple[Source, str], _Stream] = {}
        self._arrivals = 0

    def line(
        self, source: Source, stream: str, label: str, text: str, *, from_mpiexec: bool = False
    ) -> None:
        """One line a job printed, without its newline; `label` goes first (``[low:1 v1] ``)."""
        with self._lock:
            self._to_log(label + text)
            if self._verbose:
                self._show(stream, label + text)
                return
            state = self._streams.setdefault((source, stream), _Stream())
            if state.is_noise(text, from_mpiexec):
                self._arrivals += 1
                state.held.append((self._arrivals, label, text, state.notice))
                return
            self._flush(stream, state.held)  # it carried on: what it said before was no end
            self._show(stream, label + text)

    def message(self, text: str) -> None:
        """One line of mmpi-run's own, on stderr and in the log."""
        line = f"mmpi-run: {text}"
        with self._lock:
            self._to_log(line)
            self._show("stderr", line)

    def show(self, source: Source, omit: str | None = None) -> None:
        """Show what `source` (the cause) has held back but the launchers' notices.

        Not the frames inside mmpi, nor a line equal to `omit` (the exception line that the
        report has just quoted).
        """
        with self._lock:
            for (src, stream), state in sorted(self._streams.items(), key=_first_held):
                if src == source:
                    kept = [x for x in _user_frames(state.held) if not (
                        x[3] or _BANNER.fullmatch(x[2]) or _ABORT.match(x[2]) or x[2] == omit)]
                    self._flush(stream, kept)
                    state.held.clear()

    def release(self) -> None:
        """Show every line still held, in the order they came (the job did not fail)."""
        with self._lock:
            held = sorted(
                (n, stream, label + text)
                for (_, stream), state in self._streams.items()
                for n, label, text, _ in state.held
            )
            for _, stream, line in held:
                self._show(stream, line)
            for state in self._streams.values():
                state.held.clear()

    def drop(self) -> None:
        """Forget what is still held: the report stands for it, the log has it."""
        with self._lock:
            for state in self._streams.values():
                state.held.clear()

    def _flush(self, stream: str, held: list[tuple[int, str, str, bool]]) -> None:
        for _, label, text, _ in held:
            self._show(stream, label + text)
        held.clear()

    def _to_log(self, text: str) -> None:
        if self._log is not None:
            try:
                self._log.write(text + "\n")
                self._log.flush()
            except (OSError, ValueError):
                self._log = None  # a full disk must not stop the job

    def _show(self, stream: str, text: str) -> None:
        if stream in self._broken:
            return
        # Looked up on every call so that redirections (pytest's capsys) are honoured.
        out = sys.stdout if stream == "stdout" else sys.stderr
        try:
            out.write(text + "\n")
            out.flush()
        except (OSError, ValueError):
            # `mmpi-run ... | head` closed the pipe: keep draining the jobs, print nothing.
            self._broken.add(stream)


def open_log(path: Path) -> IO[str] | None:
    """Open the log for writing; None (said on stderr) if it cannot be."""
    try:
        return open(path, "w", encoding="utf-8", errors="replace")  # noqa: SIM115
    except OSError as exc:
        print(f"mmpi-run: cannot write the log {path}: {exc.strerror}", file=sys.stderr)
        return None


def keep_log(path: Path, directory: str | os.PathLike[str] | None) -> Path | None:
    """Copy the run's log to ``mmpi-run.<time>.log`` in `directory` (else the temp dir)."""
    if directory is None or not path.exists():
        return None
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for where in (Path(directory), Path(tempfile.gettempdir())):
        for n in range(100):  # two runs that fail in the same second keep both logs
            dest = where / f"mmpi-run.{stamp}{f'-{n}' if n else ''}.log"
            try:
                with open(dest, "x") as out, open(path) as src:
                    shutil.copyfileobj(src, out)
            except FileExistsError:
                continue
            except OSError:
                break
            return dest.resolve() if where == Path(directory) else dest
    return None


def _user_frames(held: list[tuple[int, str, str, bool]]) -> list[tuple[int, str, str, bool]]:
    """`held` without the traceback frames in mmpi's own files (each with its source lines)."""
    kept, inside = [], False
    for item in held:
        text = item[2]
        if m := _FRAME.match(text):
            inside = m[1].startswith(_INTERNAL)
        elif not (inside and text.startswith("    ")):  # a frame's source line, its markers
            inside = False
        if not inside:
            kept.append(item)
    return kept


def _first_held(item: tuple[tuple[Source, str], _Stream]) -> int:
    held = item[1].held
    return held[0][0] if held else 0


__all__ = ["Console", "Source", "keep_log", "open_log"]
