"""The MMPI_* tuning knobs: one registry, its defaults and ranges; errors name the variable."""

import math
import os
import subprocess
import sys

import pytest

from mmpi.errors import UsageError
from mmpi.wire import knobs
from mmpi.wire.knobs import KNOBS, env_choice, env_flag, env_float, env_int, problems


def test_unset_or_empty_gives_the_registry_default():
    assert env_int("MMPI_TESTS_PER_YIELD", environ={}) == 10
    assert env_float("MMPI_FORWARDER_TIMEOUT", environ={"MMPI_FORWARDER_TIMEOUT": "  "}) == 5.0
    assert env_choice("MMPI_PROGRESS", environ={}) == "off"
    assert env_flag("MMPI_CHECK_COLLECTIVES", environ={}) is True
    # a default the job gives (the forwarder's eager size) replaces the registry's
    assert env_int("MMPI_EAGER_MAX", 4096, environ={}) == 4096


def test_values_are_parsed():
    assert env_int("MMPI_CHUNK", environ={"MMPI_CHUNK": " 65536 "}) == 65536
    assert env_float("MMPI_LATE_US", environ={"MMPI_LATE_US": "0.25"}) == 0.25
    assert env_choice("MMPI_RELAY", environ={"MMPI_RELAY": " Python "}) == "python"
    assert env_flag("MMPI_DYNAMIC_BCAST", environ={"MMPI_DYNAMIC_BCAST": "0"}) is False


@pytest.mark.parametrize("name, raw, message", [
    ("MMPI_TESTS_PER_YIELD", "ten", "MMPI_TESTS_PER_YIELD='ten': expected a whole number"),
    ("MMPI_TESTS_PER_YIELD", "1.5", "MMPI_TESTS_PER_YIELD='1.5': expected a whole number"),
    ("MMPI_TESTS_PER_YIELD", "0", "MMPI_TESTS_PER_YIELD='0': must be from 1 to 10000"),
    ("MMPI_YIELD_US", "x", "MMPI_YIELD_US='x': expected a number"),
    ("MMPI_MAX_SLEEP_US", "-1", "MMPI_MAX_SLEEP_US='-1': must be from 0 to 1000000 "
     "microseconds (1 s)"),
    ("MMPI_SPIN_US", "1e400", "MMPI_SPIN_US='1e400': must be a finite number from 0 to "
     "1000000 microseconds (1 s)"),
    ("MMPI_SPIN_US", "nan", "MMPI_SPIN_US='nan': must be a finite number from 0 to 1000000 "
     "microseconds (1 s)"),
    ("MMPI_CHUNK", "7", "MMPI_CHUNK='7': must be from 4096 to 67108864 bytes (4 KiB to 64 MiB)"),
    ("MMPI_EAGER_MAX", "99999999999999", "MMPI_EAGER_MAX='99999999999999': must be from 0 to "
     "16777216 bytes (0 bytes to 16 MiB)"),
    ("MMPI_FORWARDER_TIMEOUT", "1", "MMPI_FORWARDER_TIMEOUT='1': must be from 2 to 3600 s"),
    ("MMPI_PROGRESS", "bogus", "MMPI_PROGRESS='bogus': expected one of off, leaders, all, auto"),
    ("MMPI_CHECK_COLLECTIVES", "2", "MMPI_CHECK_COLLECTIVES='2': expected one of 0, 1"),
])
def test_bad_values_are_refused_by_name(name, raw, message):
    with pytest.raises(UsageError) as err:
        knobs.parse(KNOBS[name], raw)
    assert str(err.value) == message
    assert problems({name: raw}) == [message]  # mmpi-run's check says the same


def test_a_huge_value_is_out_of_range_and_quoted_short():
    with pytest.raises(UsageError) as err:
        knobs.parse(KNOBS["MMPI_CHUNK"], "9" * 400)  # no OverflowError on the way
    assert str(err.value) == ("MMPI_CHUNK='" + "9" * 36 + "...: must be from 4096 to 67108864 "
                              "bytes (4 KiB to 64 MiB)")


def test_every_knob_is_checked_and_its_default_is_in_its_range():
    for knob in KNOBS.values():
        assert knob.name.startswith("MMPI_") and knob.what
        if knob.kind == knobs.CHOICE:
            assert knob.default is None or knob.default in knob.choices, knob.name
        elif knob.kind in (knobs.INT, knobs.NUMBER):
            assert knob.low <= knob.high < math.inf, knob.name
            assert knob.default is None or knob.low <= knob.default <= knob.high, knob.name


def test_problems_lists_every_bad_knob_and_skips_what_the_caller_sets():
    environ = {"MMPI_RELAY": "bogus", "MMPI_CHUNK": "0", "MMPI_PROGRESS": "x", "PATH": "/bin",
               "MMPI_SOMETHING_ELSE": "whatever"}
    found = problems(environ, skip=("MMPI_PROGRESS",))
    assert [line.split("=")[0] for line in found] == ["MMPI_CHUNK", "MMPI_RELAY"]


def test_monitor_must_be_a_directory_if_it_exists(tmp_path):
    (tmp_path / "file").write_text("")
    assert problems({"MMPI_MONITOR": str(tmp_path)}) == []
    assert problems({"MMPI_MONITOR": str(tmp_path / "new")}) == []
    assert problems({"MMPI_MONITOR": str(tmp_path / "file")}) == [
        f"MMPI_MONITOR={str(tmp_path / 'file')!r}: exists and is not a directory"]


def test_the_readers_refuse_a_knob_the_registry_does_not_hold():
    with pytest.raises(KeyError):
        env_int("MMPI_NO_SUCH_KNOB")


def test_a_bad_knob_stops_the_import_with_its_name():
    env = dict(os.environ, MMPI_TESTS_PER_YIELD="many")
    r = subprocess.run([sys.executable, "-c", "import mmpi._engine.engine"], env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert "MMPI_TESTS_PER_YIELD='many': expected a whole number" in r.stderr


def test_the_wire_package_reads_no_knob_at_import():
    # mmpi-run imports it, and must be the one to report a bad knob, in its own words
    env = dict(os.environ, MMPI_YIELD_US="x", MMPI_SPIN_US="-1", MMPI_MAX_SLEEP_US="inf")
    r = subprocess.run([sys.executable, "-c", "import mmpi.wire, launch.cli"], env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("env, message", [
    ({"MMPI_FWD_POOL_MANY": "x"}, "MMPI_FWD_POOL_MANY='x': expected a whole number"),
    ({"MMPI_RELAY": "bogus"}, "MMPI_RELAY='bogus': expected one of auto, compiled, python"),
    ({"MMPI_FWD_MODE": "both"}, "MMPI_FWD_MODE='both': expected one of split, direction, single"),
    ({"MMPI_CHUNK": "0"}, "MMPI_CHUNK='0': must be from 4096 to 67108864 bytes (4 KiB to 64 MiB)"),
    ({"MMPI_YIELD_US": "x"}, "MMPI_YIELD_US='x': expected a number"),  # read lazily, yet first
])
def test_the_forwarder_reports_a_bad_knob_and_exits(tmp_path, env, message):
    r = subprocess.run([sys.executable, "-m", "forwarder", "--rendezvous", str(tmp_path)],
                       env=dict(os.environ, **env), capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    assert r.stderr.strip() == f"mmpi-forwarder[0]: {message}"


def test_the_reference_lists_every_knob_with_its_range():
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "reference.md").read_text()
    table = text[text.index("| variable | default | range |"):].split("\n\n")[0]
    rows = {cells[1].strip(" `"): cells[3].strip() for line in table.splitlines()[2:]
            if (cells := line.split("|"))}
    user = [k for k in KNOBS.values() if k.name not in knobs.SET_BY_MMPI_RUN]
    assert sorted(rows) == sorted(k.name for k in user)
    for k in user:
        if k.kind == knobs.CHOICE:
            expected = ", ".join(f"`{c}`" for c in k.choices)
        elif k.kind == knobs.DIRECTORY:
            expected = "a directory"
        elif k.unit == "bytes":
            expected = f"{knobs._bytes(k.low)} to {knobs._bytes(k.high)}"
        else:
            unit = f" {k.unit}" if k.unit in ("s",) else ""
            expected = f"{knobs._number(k.low)} to {knobs._number(k.high)}{unit}"
        assert rows[k.name] == expected, k.name
