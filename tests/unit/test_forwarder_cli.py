"""The forwarder's relay mode: chosen by flag or environment, a bad one refused by name."""

import pytest

from forwarder import cli
from forwarder.daemon import Forwarder
from mmpi.errors import BridgeError


@pytest.mark.parametrize("env,expected", [
    ({}, "split"),
    ({"MMPI_FWD_MODE": "single"}, "single"),
    ({"MMPI_FWD_THREADS": "2"}, "direction"),  # the older knob still means what it meant
    ({"MMPI_FWD_THREADS": "1"}, "single"),
    ({"MMPI_FWD_MODE": "split", "MMPI_FWD_THREADS": "1"}, "split"),
])
def test_default_mode_from_environment(monkeypatch, env, expected):
    monkeypatch.delenv("MMPI_FWD_MODE", raising=False)
    monkeypatch.delenv("MMPI_FWD_THREADS", raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert cli._default_mode() == expected


def test_unknown_mode_is_refused_by_name(tmp_path):
    with pytest.raises(BridgeError, match="unknown relay mode 'both'"):
        Forwarder(tmp_path, mode="both")
