"""Hostile input to mmpi-run: every mistake is one line, a listed status, and nothing started.

Every knob of the registry (mmpi/wire/knobs.py, the table of docs/reference.md) with a value
of the wrong type, run through the real `mmpi-run`, and with values out of its range, run
through its `main()`; counts too large for the flags and the job file; programs that cannot
start; a job file far too large; a misspelt key. Each case checks the exit status, that the
first line is mmpi-run's and names the value and where it came from, and that no traceback is
printed. Nothing here may start an MPI job (so this module is in CI's fast lane): the whole
list takes seconds, and a job that did start shows up as a wrong status or a rendezvous
directory left in the test's TMPDIR.
"""
# ruff: noqa: D103  (test names say what they check)

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, mmpi_run_cmd

from launch import _status
from launch._hosts import detect_machine
from launch.cli import main
from mmpi.wire.knobs import CHOICE, DIRECTORY, INT, KNOBS, NUMBER

RING = str(ROOT / "examples" / "ring.py")
TOO_MANY = 32 * detect_machine().cpus + 1  # ranks of the default job: one too many
PYTHON_RING = (sys.executable, RING)


def mmpi_run(tmp_path: Path, *args: str, env: dict[str, str] | None = None,
             ) -> subprocess.CompletedProcess[str]:
    """The real mmpi-run in `tmp_path`, with `env` added to ours."""
    full = {k: v for k, v in os.environ.items() if k != "MMPI_RENDEZVOUS"}
    full.update(env or {}, TMPDIR=str(tmp_path))
    return subprocess.run([*mmpi_run_cmd(), *args], capture_output=True, text=True, timeout=60,
                          cwd=tmp_path, env=full, stdin=subprocess.DEVNULL)


def refused(tmp_path: Path, stderr: str, stdout: str, *words: str) -> str:
    """Check a refusal; return its first line."""
    assert "Traceback" not in stderr + stdout, stderr
    lines = stderr.splitlines()
    assert lines, f"nothing said; stdout: {stdout}"
    first = lines[0]
    assert first.startswith("mmpi-run: "), stderr
    for word in words:
        assert word in first, f"{word!r} not in the first line:\n{stderr}"
    assert not list(tmp_path.glob("mmpi-*")), "a job was started"
    return first


def check(tmp_path: Path, p: subprocess.CompletedProcess[str], status: int, *words: str) -> str:
    assert p.returncode == status, p.stderr
    return refused(tmp_path, p.stderr, p.stdout, *words)


# -- every knob: a bad type through the real mmpi-run, out-of-range values through main() -----


def _bad_type(kind: str) -> tuple[str, str]:
    """A value of the wrong kind, and what the error says about it."""
    return {INT: ("ten", "expected a whole number"), NUMBER: ("fast", "expected a number"),
            CHOICE: ("bogus", "expected one of "), DIRECTORY: ("", "")}[kind]


def _out_of_range(knob) -> list[str]:
    """Values just outside the knob's range, and the infinite and NaN ones."""
    if knob.kind == CHOICE:
        return ["7", "on"] if knob.choices == ("0", "1") else ["yes"]
    if knob.kind == DIRECTORY:
        return []
    values = [str(int(knob.low) - 1), str(int(knob.high) + 1) if knob.kind == INT
              else repr(knob.high * 2)]
    if knob.kind == NUMBER:
        values += ["1e400", "-inf", "nan"]
    else:
        values += ["99999999999999999999999"]
    return values


NOT_DIRECTORY = [k for k in KNOBS.values() if k.kind != DIRECTORY]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("knob", NOT_DIRECTORY, ids=[k.name for k in NOT_DIRECTORY])
def test_a_knob_of_the_wrong_type_is_refused_by_mmpi_run(tmp_path, knob):
    value, says = _bad_type(knob.kind)
    p = mmpi_run(tmp_path, *PYTHON_RING, env={knob.name: value})
    first = check(tmp_path, p, _status.ERROR, f"{knob.name}={value!r}: {says}")
    assert first == p.stderr.strip()  # one line, nothing else


@pytest.mark.timeout(60)
def test_a_monitor_knob_that_is_a_file_is_refused(tmp_path):
    (tmp_path / "traffic").write_text("")
    p = mmpi_run(tmp_path, *PYTHON_RING, env={"MMPI_MONITOR": str(tmp_path / "traffic")})
    check(tmp_path, p, _status.ERROR, "MMPI_MONITOR=", "exists and is not a directory")


RANGES = [(k.name, v) for k in KNOBS.values() for v in _out_of_range(k)]


@pytest.mark.parametrize("name, value", RANGES, ids=[f"{n}={v}" for n, v in RANGES])
def test_a_knob_out_of_its_range_is_refused_before_the_plan(tmp_path, capsys, monkeypatch,
                                                             name, value):
    monkeypatch.setenv(name, value)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    knob = KNOBS[name]
    assert main(["--dry-run", *PYTHON_RING]) == _status.ERROR  # --dry-run: even so, refused
    out, err = capsys.readouterr()
    says = "expected one of" if knob.kind == CHOICE else "must be "
    refused(tmp_path, err, out, f"{name}={value!r}: {says}")
    assert not out  # no plan printed


def test_every_bad_knob_gets_its_own_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("MMPI_RELAY", "bogus")
    monkeypatch.setenv("MMPI_CHUNK", "0")
    assert main(["--dry-run", *PYTHON_RING]) == _status.ERROR
    assert capsys.readouterr().err.splitlines() == [
        "mmpi-run: MMPI_CHUNK='0': must be from 4096 to 67108864 bytes (4 KiB to 64 MiB)",
        "mmpi-run: MMPI_RELAY='bogus': expected one of auto, compiled, python",
    ]


def test_a_knob_the_command_line_sets_is_not_taken_from_the_environment(capsys, monkeypatch):
    monkeypatch.setenv("MMPI_PROGRESS", "bogus")
    assert main(["--progress", "all", "--dry-run", *PYTHON_RING]) == 0
    assert "    MMPI_PROGRESS=all\n" in capsys.readouterr().out


@pytest.mark.timeout(60)
def test_a_misspelt_knob_is_pointed_out(tmp_path):
    p = mmpi_run(tmp_path, "--dry-run", *PYTHON_RING, env={"MMPI_PROGRES": "all"})
    assert p.returncode == 0, p.stderr
    assert p.stderr.splitlines()[0] == (
        "mmpi-run: warning: MMPI_PROGRES is not a knob of mmpi, so it is ignored (did you mean "
        "MMPI_PROGRESS?)")


# -- counts too large: bounded, the flag as the job file ----------------------------------------


@pytest.mark.timeout(60)
@pytest.mark.parametrize("args, words", [
    (["--low", "99999999999999999999"],
     ["clusters.low.ranks (from --low): expected at most 65536", "got 99999999999999999999"]),
    (["--high", "65537"], ["clusters.high.ranks (from --high): expected at most 65536"]),
    (["--forwarders", "99999999999999999999", "--dry-run"],
     ["zipper[0].forwarders (from --forwarders): expected at most 16", "99999999999999999999"]),
    (["--forwarders", "1000"], ["zipper[0].forwarders (from --forwarders)", "got 1000"]),
    # the default job oversubscribes this machine, up to 32 ranks per CPU
    (["--low", str(TOO_MANY)], [f"clusters.low: {TOO_MANY} ranks do not fit in",
                                "even oversubscribed: at most 32 ranks per slot"]),
], ids=["low", "high", "forwarders-dry-run", "forwarders-1000", "oversubscribed"])
def test_a_count_too_large_on_the_command_line(tmp_path, args, words):
    p = mmpi_run(tmp_path, *args, *PYTHON_RING)
    check(tmp_path, p, _status.ERROR, *words)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("text, words", [
    ("clusters: {low: {ranks: 100000000000000000000}, high: {ranks: 1}}\n",
     ["job.yaml: clusters.low.ranks: expected at most 65536", "got 100000000000000000000"]),
    ("clusters: {low: {ranks: 1}, high: {ranks: 1}}\nzipper: [{forwarders: 1000}]\n",
     ["job.yaml: zipper[0].forwarders: expected at most 16", "got 1000"]),
    ("clusters: {low: {ranks: 1}, high: {ranks: 1}}\ntimeouts: {connect: .inf}\n",
     ["job.yaml: timeouts.connect: expected a positive number of seconds up to 86400"]),
    ("clusters: {low: {ranks: 3, placement: paired, sockets: 1, cores_per_socket: 2},"
     " high: {ranks: 1}}\n",
     ["job.yaml: clusters.low: 3 ranks do not fit in 2 physical cores"]),
], ids=["ranks", "forwarders", "timeout", "paired-fit"])
def test_a_count_too_large_in_the_job_file(tmp_path, text, words):
    (tmp_path / "job.yaml").write_text(text)
    p = mmpi_run(tmp_path, "-c", "job.yaml", *PYTHON_RING)
    check(tmp_path, p, _status.ERROR, *words)


# -- programs that cannot start -----------------------------------------------------------------


@pytest.mark.timeout(60)
@pytest.mark.parametrize("command, status, words", [
    (["python"], _status.USAGE, ["'python' names no program to run", "python prog.py"]),
    (["python", "-u"], _status.USAGE, ["'python -u' names no program to run"]),
    (["python", "-"], _status.USAGE, ["only rank 0 reads"]),
    (["python", "nope.py"], _status.USAGE, ["cannot run python nope.py: no such file", "nope.py"]),
    (["prog.py"], _status.NOT_FOUND, ["cannot run 'prog.py'", "python prog.py"]),
    (["./prog.py"], _status.NOT_EXECUTABLE, ["cannot run './prog.py'", "python ./prog.py"]),
], ids=["no-program", "only-options", "stdin", "missing-script", "no-python", "path"])
def test_a_program_that_cannot_start(tmp_path, command, status, words):
    (tmp_path / "prog.py").write_text("print(1)\n")  # not executable
    p = mmpi_run(tmp_path, *command)
    check(tmp_path, p, status, *words)


# -- job files: far too large, misspelt --------------------------------------------------------


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", ["comment", "env"])
def test_a_huge_job_file_is_refused_at_once(tmp_path, kind):
    path = tmp_path / "job.yaml"
    with open(path, "w") as f:
        f.write("clusters: {low: {ranks: 1}, high: {ranks: 1}}\n")
        if kind == "comment":  # one 50 MB comment
            f.write("# " + "x" * (50 << 20) + "\n")
        else:  # 250,000 environment variables
            f.write("env:\n" + "".join(f"  V{i}: {i}\n" for i in range(250_000)))
    size = path.stat().st_size / (1 << 20)
    p = mmpi_run(tmp_path, "-c", "job.yaml", *PYTHON_RING)
    check(tmp_path, p, _status.ERROR, f"job.yaml: too large for a job file: {size:.1f} MiB",
          "at most 1 MiB")


@pytest.mark.timeout(60)
def test_a_misspelt_key_gets_a_suggestion(tmp_path):
    (tmp_path / "job.yaml").write_text("clusters: {low: {rank: 2}, high: {ranks: 2}}\n")
    p = mmpi_run(tmp_path, "-c", "job.yaml", *PYTHON_RING)
    first = check(tmp_path, p, _status.ERROR)
    assert first == "mmpi-run: job.yaml: clusters.low: unknown key 'rank' (did you mean 'ranks'?)"
