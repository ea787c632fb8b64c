"""The report and exit status: NPB-style lines, a clear verdict, non-zero status on failure."""

from __future__ import annotations

import math
import types

import pytest

from nas_ports import __main__ as cli
from nas_ports._npb import Check, Result, World, format_report


def result(*checks: Check) -> Result:
    """Build a finished EP-like result carrying `checks`."""
    return Result(
        name="EP",
        klass="S",
        size="33554432",
        iterations=0,
        seconds=0.5,
        mops=67.1,
        optype="Random numbers generated",
        checks=list(checks),
        active=1,
    )


GOOD = Check("sx", 1.0000000001, 1.0, 1e-8)
BAD = Check("sy", 1.1, 1.0, 1e-8)


def test_checks_use_the_relative_error_and_reject_nan() -> None:
    """A check passes within the relative tolerance; NaN never passes."""
    assert GOOD.ok
    assert not BAD.ok
    assert not Check("nan", math.nan, 1.0, 1e-8).ok
    assert not result().verified  # nothing checked is not a success


def test_report_states_the_verdict_and_the_placement() -> None:
    """The report carries the NPB summary, each value against its reference, and the verdict."""
    bridged = World(comm=None, rank=0, size=4, bridged=True, low_size=3, high_size=1)
    text = format_report(result(GOOD, BAD), bridged)
    assert " EP Benchmark Completed." in text
    assert "Total processes =                        4" in text
    assert "bridged: 3 on the low cluster (ranks 0-2), 1 on the high cluster (rank 3)" in text
    assert "<-- FAILED" in text
    assert text.rstrip().endswith("VERIFICATION FAILED")
    native = World(comm=None, rank=0, size=1, bridged=False)
    assert "VERIFICATION SUCCESSFUL" in format_report(result(GOOD), native)


@pytest.mark.parametrize("checks, status", [((GOOD,), 0), ((GOOD, BAD), 1)])
def test_exit_status_follows_verification(monkeypatch, capsys, checks, status) -> None:
    """main() returns 0 only when rank 0 verified the run."""
    fake = types.SimpleNamespace(run=lambda world, klass: result(*checks))
    monkeypatch.setattr(cli, "_kernel_module", lambda kernel: fake)
    assert cli.main(["ep", "--class", "S"]) == status
    out = capsys.readouterr().out
    assert ("VERIFICATION SUCCESSFUL" in out) == (status == 0)


def test_unknown_class_is_an_argument_error(capsys) -> None:
    """Classes outside S, W, A, B are refused by the command line itself."""
    with pytest.raises(SystemExit) as exc:
        cli.main(["ep", "--class", "Z"])
    assert exc.value.code == 2
