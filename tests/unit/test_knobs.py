"""The MMPI_* tuning knobs: defaults, parsing, and errors that name the variable."""

import os
import subprocess
import sys

import pytest

from mmpi.errors import UsageError
from mmpi.wire.knobs import env_float, env_int


def test_unset_or_empty_gives_the_default(monkeypatch):
    monkeypatch.delenv("MMPI_X", raising=False)
    assert env_int("MMPI_X", 7) == 7
    monkeypatch.setenv("MMPI_X", "  ")
    assert env_float("MMPI_X", 2.5) == 2.5


def test_values_are_parsed(monkeypatch):
    monkeypatch.setenv("MMPI_X", " 12 ")
    assert env_int("MMPI_X", 7, minimum=1) == 12
    monkeypatch.setenv("MMPI_X", "0.25")
    assert env_float("MMPI_X", 1.0, above=True) == 0.25


@pytest.mark.parametrize("raw, kind, message", [
    ("ten", "int", "MMPI_X='ten': expected a whole number"),
    ("1.5", "int", "MMPI_X='1.5': expected a whole number"),
    ("0", "int", "MMPI_X='0': must be at least 1"),
    ("fast", "float", "MMPI_X='fast': expected a number"),
    ("-1", "float", "MMPI_X='-1': must be greater than 0"),
    ("0", "float", "MMPI_X='0': must be greater than 0"),
    ("nan", "float", "MMPI_X='nan': must be greater than 0"),
])
def test_bad_values_are_refused_by_name(monkeypatch, raw, kind, message):
    monkeypatch.setenv("MMPI_X", raw)
    with pytest.raises(UsageError) as err:
        if kind == "int":
            env_int("MMPI_X", 7, minimum=1)
        else:
            env_float("MMPI_X", 1.0, above=True)
    assert str(err.value) == message


def test_a_bad_knob_stops_the_import_with_its_name():
    env = dict(os.environ, MMPI_TESTS_PER_YIELD="many")
    r = subprocess.run([sys.executable, "-c", "import mmpi._engine.engine"], env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert "MMPI_TESTS_PER_YIELD='many': expected a whole number" in r.stderr


def test_the_forwarder_reports_a_bad_knob_and_exits(tmp_path):
    env = dict(os.environ, MMPI_FWD_POOL_MANY="x")
    r = subprocess.run([sys.executable, "-m", "forwarder", "--rendezvous", str(tmp_path)],
                       env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    assert r.stderr.strip() == "mmpi-forwarder[0]: MMPI_FWD_POOL_MANY='x': expected a whole number"
