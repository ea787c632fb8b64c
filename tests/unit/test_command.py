"""mmpi-run's look at the command before any rank starts (launch._command), and its statuses."""
# ruff: noqa: D103  (test names say what they check)

import os

from launch import _status
from launch._command import check
from launch.cli import main


def test_a_python_file_named_as_the_command_gets_the_fix(tmp_path):
    (tmp_path / "prog.py").write_text("print(1)\n")
    status, message = check(["prog.py"], str(tmp_path))
    assert status == _status.NOT_FOUND == 127
    assert "python prog.py" in message and "'prog.py'" in message
    status, message = check(["./prog.py"], str(tmp_path))
    assert status == _status.NOT_EXECUTABLE == 126
    assert "not executable" in message and "python ./prog.py" in message


def test_what_can_run_passes(tmp_path):
    script = tmp_path / "run.sh"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    assert check(["./run.sh"], str(tmp_path)) is None
    assert check(["python", "prog.py"], str(tmp_path)) is None
    assert check([str(script)], "/") is None


def test_missing_commands_and_directories(tmp_path):
    assert check(["no-such-command-here"], str(tmp_path))[0] == 127
    assert check(["./missing.py"], str(tmp_path))[0] == 127
    assert check([str(tmp_path)], "/")[0] == 126


def test_mmpi_run_says_so_in_one_line_with_the_status(tmp_path, capsys, monkeypatch):
    (tmp_path / "prog.py").write_text("print(1)\n")
    monkeypatch.chdir(tmp_path)
    assert main(["--low", "1", "--high", "1", "prog.py"]) == 127
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["mmpi-run: cannot run 'prog.py': not a command on PATH (it is a file here); "
                   "to run a Python program, name the interpreter: mmpi-run ... python prog.py"]
    assert not any(name.startswith("mmpi-run.") for name in os.listdir(tmp_path))
