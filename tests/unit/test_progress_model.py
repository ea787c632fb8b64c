"""Tests of the progress threads' model (mmpi._runtime.progress.choose) and their mode's checks."""
# ruff: noqa: D103  (test names say what they check)

import pytest

from mmpi._runtime import progress as _progress
from mmpi.errors import UsageError


@pytest.mark.parametrize("cores,procs,ranks,mode", [
    (64, 9, 8, "all"),        # a core for every rank's thread
    (16, 9, 8, "leaders"),    # spare cores, not one per rank: the leaders' threads
    (8, 9, 8, "leaders"),     # about one core per process
    (2, 5, 4, "off"),         # this machine: five processes on two cores
])
def test_auto_follows_the_model(cores, procs, ranks, mode):
    got, why = _progress.choose("auto", cores=cores, procs=procs, ranks=ranks)
    assert got == mode and why.startswith("auto:")


def test_an_explicit_mode_is_kept():
    for mode in ("off", "leaders", "all"):
        assert _progress.choose(mode, cores=2, procs=5, ranks=4)[0] == mode


def test_the_mode_is_checked_by_name():
    assert _progress.mode_from_env({}) == "off"
    assert _progress.mode_from_env({"MMPI_PROGRESS": " Leaders "}) == "leaders"
    with pytest.raises(UsageError, match="MMPI_PROGRESS='x'"):
        _progress.mode_from_env({"MMPI_PROGRESS": "x"})


def _gates():
    from mmpi._backend import compiled, python

    gates = [pytest.param(python.Gate, id="python")]
    built = compiled.backend()
    return gates if built is None else gates + [pytest.param(built.Gate, id="compiled")]


@pytest.mark.parametrize("make", _gates())
def test_a_pass_and_a_program_call_never_overlap(make):
    # Rule 1 of mmpi._runtime.progress, with this test's threads in the roles: no MPI, no engine.
    import threading

    from mmpi._engine import op as _op

    saved = _op.ACTIVE
    _op.ACTIVE = []
    gate = make(_progress.LOCK, _op)
    seen = []
    call = gate.locked(lambda: seen.append(gate.passing) or 7)
    begin = gate.locked(lambda: _progress._Progress._begin(gate))
    try:
        assert call() == 7 and gate.busy == 0
        assert begin() is False  # a call under way: no pass begins
        assert not _progress.LOCK.locked()
        assert _progress._Progress._begin(gate) is True  # this thread's pass
        gate.owner = threading.get_ident()
        other = threading.Thread(target=call)
        other.start()
        other.join(0.3)
        assert other.is_alive()  # the program's call waits for the pass
        assert call() == 7  # the pass's own call runs at once
        gate.passing = False
        _progress.LOCK.release()
        other.join(5)
        assert not other.is_alive() and seen == [False, True, False]
        assert gate.busy == 0
    finally:
        _op.ACTIVE = saved
        if _progress.LOCK.locked():
            _progress.LOCK.release()


@pytest.mark.parametrize("make", _gates())
def test_a_gated_call_is_the_call_and_wakes_an_idle_thread_for_work_it_left(make):
    # what a wrapped method keeps (binding, arguments, errors, names) and the end of the
    # outermost call (python.Gate.locked and _after, the reference; cgate.c the same in C)
    import threading
    import types

    from mmpi._engine import op as _op

    class Thread:
        idle = True
        engine = types.SimpleNamespace(background=[])
        wake = threading.Event()

    class Op:
        def __init__(self, done=False, matched=False):
            self.done, self.matched = done, matched

    class Thing:
        def method(self, a, b=2, *, c=3):
            """Its doc."""
            return (self, a, b, c)

        @staticmethod
        def static(x):
            return x + 1

        @classmethod
        def klass(cls, x):
            return (cls, x)

        def fails(self):
            raise KeyError("no")

    saved = _op.ACTIVE, _op.NEW_WORK
    gate = make(_progress.LOCK, _op)
    for name in ("method", "fails"):
        setattr(Thing, name, gate.locked(vars(Thing)[name]))
    Thing.static = staticmethod(gate.locked(vars(Thing)["static"].__func__))
    Thing.klass = classmethod(gate.locked(vars(Thing)["klass"].__func__))
    t = Thing()
    try:
        _op.ACTIVE = []
        assert t.method(1, c=5) == (t, 1, 2, 5) and Thing.method(t, 1, 4) == (t, 1, 4, 3)
        assert Thing.static(1) == 2 and t.klass(3) == (Thing, 3)
        assert Thing.method.__doc__ == "Its doc." and Thing.method.__name__ == "method"
        assert Thing.method.__mmpi_locked__
        with pytest.raises(KeyError):
            t.fails()
        assert gate.busy == 0
        gate.thread = Thread()
        _op.NEW_WORK = Op()  # a receive posted, not matched: wake
        t.method(0)
        assert Thread.wake.is_set() and _op.NEW_WORK is False
        Thread.wake.clear()
        _op.ACTIVE = [Op(done=True)] * 300  # completed ones forgotten; nothing left: no wake
        t.method(0)
        assert _op.ACTIVE == [] and not Thread.wake.is_set()
        _op.ACTIVE = [Op(done=False)]
        t.method(0)
        assert Thread.wake.is_set()
        Thread.wake.clear()
        Thread.idle = False  # awake: it looks for itself
        t.method(0)
        assert not Thread.wake.is_set()
    finally:
        _op.ACTIVE, _op.NEW_WORK = saved
