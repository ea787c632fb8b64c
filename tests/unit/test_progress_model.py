"""Tests of the progress threads' model (mmpi._progress.choose) and their mode's checks."""
# ruff: noqa: D103  (test names say what they check)

import pytest

from mmpi import _progress
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


def test_a_pass_and_a_program_call_never_overlap():
    # Rule 1 of mmpi._progress, with this test's threads in the roles: no MPI, no engine.
    import threading

    from mmpi import _op

    saved = _op.ACTIVE
    _op.ACTIVE = []
    seen = []
    call = _progress._locked(lambda: seen.append(_progress._pass) or 7)
    begin = _progress._locked(lambda: _progress._Progress._begin(_progress.LOCK))
    try:
        assert call() == 7 and _progress._busy == 0
        assert begin() is False  # a call under way: no pass begins
        assert not _progress.LOCK.locked()
        assert _progress._Progress._begin(_progress.LOCK) is True  # this thread's pass
        _progress._owner = threading.get_ident()
        other = threading.Thread(target=call)
        other.start()
        other.join(0.3)
        assert other.is_alive()  # the program's call waits for the pass
        assert call() == 7  # the pass's own call runs at once
        _progress._pass = False
        _progress.LOCK.release()
        other.join(5)
        assert not other.is_alive() and seen == [False, True, False]
        assert _progress._busy == 0
    finally:
        _op.ACTIVE = saved
        _progress._owner = -1
        _progress._pass = False
        if _progress.LOCK.locked():
            _progress.LOCK.release()
