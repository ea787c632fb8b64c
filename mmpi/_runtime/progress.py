"""Asynchronous progress: a thread of the rank advances bridged operations while it computes.

MMPI_PROGRESS=off|leaders|all|auto; docs/progress.md has the model.

Without it, what a non-blocking call leaves to do (a collective's crossing and later steps,
a large message's chunks) advances only when the program calls into mmpi, so it starts at
Wait, after the computation the program meant to overlap with it.

Rule 1: one thread at a time in the bridge. Every public call of a bridged object counts
        itself in `GATE.busy` (`guard` wraps the classes once, when progress is on); the
        thread makes a pass of `Engine.progress` (and completes what has arrived) only while
        no call is under way: it marks `GATE.passing`, then looks at `busy`, and gives the
        pass up if a call began. A call marks `busy`, then looks at `passing`, and waits on
        LOCK (held for the pass) if it sees one. Each side writes its flag before it reads
        the other's, and the GIL orders those steps, so at least one of them sees the other
        (an interpreter without a GIL would need a real lock here). A program's call never
        waits for more than one pass, and takes no lock otherwise. The pass's own calls (a
        step or a completion calling the API) skip this.
Rule 2: polite. With nothing in flight the thread sleeps until a call leaves something in
        flight (a non-blocking collective, an operation not complete, a posted receive), but
        makes one pass every _IDLE_CHECK (what came unasked: a dynamic broadcast's bytes to
        pass on, _engine.fanout); while work is in flight its naps grow from MIN_NAP to MAX_NAP as
        long as passes find nothing, and shrink back when one moves something.
Rule 3: the thread needs MPI_THREAD_MULTIPLE (the program may call MPI on native objects
        while the thread is in the bridge); under a lower level progress stays off, said once.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from threading import get_ident

from .._backend import python as _python
from .._engine import op as _op
from ..wire.knobs import KNOBS, env_choice, env_float

MODES = KNOBS["MMPI_PROGRESS"].choices  # off, leaders, all, auto
MIN_NAP = env_float("MMPI_PROGRESS_NAP_US") * 1e-6
MAX_NAP = env_float("MMPI_PROGRESS_MAX_NAP_US") * 1e-6
_IDLE_CHECK = 0.1  # a sleeping thread looks for work this often even if nobody woke it

LOCK = threading.Lock()  # held by the thread for a pass (Rule 1)
GATE = _python.Gate(LOCK, _op)  # the backend's once a thread starts (start)


def mode_from_env(environ=os.environ) -> str:
    """The mode asked for (MMPI_PROGRESS), checked."""
    return env_choice("MMPI_PROGRESS", environ)


def choose(mode: str, *, cores: int, procs: int, ranks: int) -> tuple[str, str]:
    """The mode to run (off, leaders or all) for the asked `mode`, and why (for auto).

    `cores`: the CPUs this rank may use; `procs`: the job's processes on the busiest host
    (ranks and forwarders); `ranks`: the job's ranks on it. The model is docs/progress.md's.
    """
    if mode != "auto":
        return mode, f"MMPI_PROGRESS={mode}"
    spare = cores - procs
    if spare >= ranks:
        return "all", f"auto: {spare} spare core(s) for {ranks} rank(s): a thread each"
    if procs >= 2 * cores:
        return "off", (f"auto: {procs} processes on {cores} core(s): every wake of a thread "
                       "takes a core a rank needs")
    return "leaders", (f"auto: {procs} processes on {cores} core(s): the leaders' threads "
                       "carry the crossings")


def start(engine, mode: str, leader: bool) -> str:
    """Start this rank's progress thread if `mode` asks for one here; return the mode run."""
    if mode == "off" or (mode == "leaders" and not leader):
        return mode
    from .._startup.native import MPI

    if MPI.Query_thread() < MPI.THREAD_MULTIPLE:
        if engine.local_rank == 0:
            print(f"mmpi: MMPI_PROGRESS={mode} needs MPI_THREAD_MULTIPLE, which MPI did not "
                  "give (mpi4py.rc.thread_level); progress stays off", file=sys.stderr,
                  flush=True)
        return "off"
    global GATE
    GATE = engine.backend.Gate(LOCK, _op)  # compiled: 40-115 ns a call against 220-310
    guard_all()
    _op.ACTIVE = []
    GATE.thread = _Progress(engine)
    GATE.thread.start()
    return mode


def stop() -> None:
    """Stop the thread (before finalize), waiting for its pass to end."""
    t, GATE.thread = GATE.thread, None
    if t is not None:
        t.halt()


def running() -> bool:
    """Whether this rank has a progress thread."""
    return GATE.thread is not None


def _wanted(engine) -> bool:
    """Whether anything waits for progress."""
    active = _op.ACTIVE
    if active and any([not op.done for op in active]):
        return True
    return engine.in_flight()


class _Progress(threading.Thread):
    """The progress thread of one rank (Rules 1 and 2)."""

    def __init__(self, engine) -> None:
        super().__init__(name="mmpi-progress", daemon=True)
        self.engine = engine
        self.wake = threading.Event()
        self.idle = False
        self._halting = False
        self.passes = 0  # passes made, and passes that moved something (for tests, docs)
        self.moved = 0

    def halt(self) -> None:
        self._halting = True
        self.wake.set()
        if self is not threading.current_thread():
            self.join()

    def run(self) -> None:
        gate = GATE
        gate.owner = get_ident()  # before any pass (see the backend's Gate.locked)
        engine = self.engine
        nap = MIN_NAP
        look = False
        while not self._halting:
            # `idle` first: a call that ends from here on wakes the thread (no lost wake-up)
            self.idle = True
            if gate.busy or not (look or _wanted(engine)) or not self._begin(gate):
                # Nothing in flight, or the program is in a call, which progresses itself:
                # sleep until a call leaves something in flight. Waiting for the call's end
                # instead would hand the interpreter, and the core, to this thread at every
                # call's end: a context switch each on a busy host.
                look = not self.wake.wait(_IDLE_CHECK)
                self.wake.clear()
                self.idle = False
                nap = MIN_NAP
                # No nap before looking again: a program that waits at once is in its Wait
                # by now, and the thread goes back to sleep; a nap here cost a second
                # hand-over of the interpreter per call (Ibcast of 1 MiB 1.6x slower at 2+2)
                continue
            self.idle = look = False
            try:
                if engine.finalized or engine.broken is not None:
                    return
                self.passes += 1
                moved = engine.progress()
                active = _op.ACTIVE
                if active:  # complete what has arrived: a Wait then finds it done
                    _op.ACTIVE = [op for op in active if not op.poll()]
                    moved = moved or len(_op.ACTIVE) < len(active)
            except BaseException as exc:  # noqa: BLE001 - the program meets it at its next call
                if engine.broken is None:  # not the bridge's loss, which the program is told
                    print(f"mmpi: rank {engine.vrank}: the progress thread stopped: {exc!r}",
                          file=sys.stderr, flush=True)
                return
            finally:
                gate.passing = False
                gate.lock.release()
            if moved:
                self.moved += 1
                nap = MIN_NAP
            else:
                nap = min(2 * nap, MAX_NAP)
            time.sleep(nap)

    @staticmethod
    def _begin(gate) -> bool:
        """Begin a pass unless a call is under way (Rule 1); the pass then holds the lock."""
        if not gate.lock.acquire(blocking=False):  # (the last pass's end has not let go yet)
            return False
        gate.passing = True
        if gate.busy:  # a call began meanwhile: it goes first
            gate.passing = False
            gate.lock.release()
            return False
        return True


def guard(cls) -> None:
    """Run every public method defined on `cls` and its mmpi bases under LOCK (Rule 1)."""
    for klass in cls.__mro__:
        if not klass.__module__.startswith("mmpi"):
            continue
        for name, attr in list(vars(klass).items()):
            if name.startswith("_") and name not in ("__reduce__",):
                continue
            if isinstance(attr, staticmethod):
                if not getattr(attr.__func__, "__mmpi_locked__", False):
                    setattr(klass, name, staticmethod(GATE.locked(attr.__func__)))
            elif isinstance(attr, classmethod):
                if not getattr(attr.__func__, "__mmpi_locked__", False):
                    setattr(klass, name, classmethod(GATE.locked(attr.__func__)))
            elif callable(attr) and not isinstance(attr, type):
                if not getattr(attr, "__mmpi_locked__", False):
                    setattr(klass, name, GATE.locked(attr))


def guard_all() -> None:
    """Guard every bridged class whose calls reach the engine."""
    from .._api import comm, intercomm, request, topology
    from .._api import message as _message
    from .._api import prequest as _prequest
    from .._rma import window as _window

    classes = [comm.Comm, intercomm.Intercomm, _window.BridgedWin, request.Request,
               request.BridgedRequest, _prequest.Prequest, _prequest.PartitionedSend,
               _prequest.PartitionedRecv, _message.Message]
    classes += [v for v in vars(topology).values()
                if isinstance(v, type) and issubclass(v, comm.Comm)]
    for cls in classes:
        guard(cls)
