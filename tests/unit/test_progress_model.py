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
