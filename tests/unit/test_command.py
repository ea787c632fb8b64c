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


def test_what_a_python_command_line_runs():
    from launch._command import python_program

    assert python_program(["prog.py", "-x"]) == ("script", "prog.py")
    assert python_program(["-u", "-W", "ignore", "-X", "dev", "prog.py"]) == ("script", "prog.py")
    assert python_program(["-Wignore", "-OO", "prog.py"]) == ("script", "prog.py")
    assert python_program(["-uc", "print(1)"]) == ("-c", "print(1)")
    assert python_program(["-m", "nas_ports", "cg"]) == ("-m", "nas_ports")
    assert python_program(["-mnas_ports"]) == ("-m", "nas_ports")
    assert python_program(["--", "-odd.py"]) == ("script", "-odd.py")
    assert python_program(["-"]) == ("-", "-")
    assert python_program(["-V"]) == ("info", "-V")
    for nothing in ([], ["-u"], ["-W", "ignore"], ["-c"], ["--"]):
        assert python_program(nothing) is None, nothing


def test_an_interpreter_without_a_program_is_a_command_line_mistake():
    from launch._command import check_interpreter

    status, message = check_interpreter(["python3"])
    assert status == _status.USAGE == 2
    assert message == ("'python3' names no program to run: give a script, -m module or -c code "
                       "(mmpi-run ... python3 prog.py)")
    assert "only rank 0 reads" in check_interpreter(["/usr/bin/python3.11", "-u", "-"])[1]
    assert check_interpreter(["python", "prog.py"]) is None
    assert check_interpreter(["./prog"]) is None  # not an interpreter: not looked into


def test_a_missing_script_is_found_before_anything_starts(tmp_path):
    from launch._command import check_script

    (tmp_path / "prog.py").write_text("print(1)\n")
    (tmp_path / "pkg").mkdir()
    assert check_script(["python", "prog.py"], str(tmp_path)) is None
    assert check_script(["python", "-c", "pass"], str(tmp_path)) is None
    status, message = check_script(["python", "-u", "nope.py"], str(tmp_path))
    assert status == _status.USAGE
    assert message == f"cannot run python nope.py: no such file {str(tmp_path / 'nope.py')!r}"
    assert "a directory without __main__.py" in check_script(["python", "pkg"], str(tmp_path))[1]
    (tmp_path / "pkg" / "__main__.py").write_text("")
    assert check_script(["python", "pkg"], str(tmp_path)) is None
