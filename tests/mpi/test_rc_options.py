"""mpi4py.rc options (set before `from mpi4py import MPI`) hold bridged as they do natively."""
# ruff: noqa: D103  (test names say what they check)

import re

import pytest

pytestmark = pytest.mark.mpi
LINE = re.compile(r"(rank \d+: .*)$")


def _lines(text: str) -> list[str]:
    return sorted(m.group(1) for m in map(LINE.search, text.splitlines()) if m)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("opts", [
    ("errors=default",), ("errors=fatal",), ("errors=abort", "initialize=false"),
    ("finalize=false",), ("thread_level=serialized",),
    ("irecv_bufsz=64", "recv_mprobe=false", "fast_reduce=false")], ids=" ".join)
def test_rc_options_hold_bridged(native, bridged, opts):
    want = native("rc_options.py", *opts, n=4, timeout=100)
    assert want.returncode == 0, want.output[-3000:]
    got = bridged("rc_options.py", *opts, timeout=100)
    assert got.returncode == 0, got.output[-3000:]
    assert _lines(want.stdout) and _lines(got.stdout) == _lines(want.stdout), got.output[-3000:]
