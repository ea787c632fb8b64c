"""mmpi-run --doctor's checks, with the hosts' answers given (no ssh, no MPI job here).

The checks that run commands take them through `run`; here it answers for the remote hosts
as ssh would, and runs the local probes for real. tests/e2e/test_doctor.py runs the doctor
itself, with its test job.
"""
# ruff: noqa: D103  (test names say what they check)

from __future__ import annotations

import subprocess
import sys

from launch import _doctor, config

JOB = """
clusters:
  low: {ranks: 1, hosts: [localhost]}
  high: {ranks: 1, hosts: ["127.0.0.1"], interface: ib7}
env: {MPIEXEC_PORT_RANGE: "%s"}
"""


def answering(remote):
    """A `run` that answers ssh commands with `remote(command)`, runs everything else."""
    def run(argv, **kw):
        if argv[0] == "ssh":
            code, out = remote(argv[-1])
            return subprocess.CompletedProcess(argv, code, out, "")
        return subprocess.run(argv, **kw)
    return run


def lines(job_text, remote, tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text(job_text)
    checks = _doctor.examine(config.load(str(path)), str(path), run=answering(remote),
                             job=False)
    return {c.name: c for c in checks}


def same_versions(command):
    if "import mmpi" in command:
        return 0, subprocess.run([sys.executable, "-c", _doctor._PROBE], capture_output=True,
                                 text=True).stdout
    return 0, ""


def test_a_host_like_this_one_passes(tmp_path):
    got = lines(JOB % "10000:10100", same_versions, tmp_path)
    assert got["host 127.0.0.1"].ok and got["rendezvous directory"].ok
    assert got["interface ib7 on 127.0.0.1"].ok  # the host said the device is there
    assert got["ports"].ok and "MPIEXEC_PORT_RANGE=10000:10100" in got["ports"].text
    text, status = _doctor.report(list(got.values()))
    assert status == 0 and "FAIL" not in text


def test_what_differs_on_a_host_is_named_with_what_to_do(tmp_path):
    def older(command):
        if "import mmpi" in command:
            return 0, "3.10.2|0.1.0|4.0.0|MPICH Version: 4.2.0\n"
        if command.startswith("test -d"):
            return 1, ""  # not the same TMPDIR there
        return 1, ""  # no such interface
    got = lines(JOB % "100:10", older, tmp_path)
    host = got["host 127.0.0.1"]
    assert not host.ok and "has Python 3.10.2, mmpi 0.1.0" in host.text
    assert "the same Python, mmpi, mpi4py and MPI everywhere" in host.text
    assert not got["rendezvous directory"].ok and "TMPDIR" in got["rendezvous directory"].text
    assert not got["interface ib7 on 127.0.0.1"].ok
    assert not got["ports"].ok and "MPIEXEC_PORT_RANGE='100:10'" in got["ports"].text
    text, status = _doctor.report(list(got.values()))
    assert status == 1 and text.count("FAIL") == 4 and "4 to fix" in text


def test_no_ssh_is_one_line_and_nothing_is_looked_for_there(tmp_path):
    got = lines(JOB % "10000:10100", lambda command: (255, ""), tmp_path)
    assert not got["host 127.0.0.1"].ok and "ssh-copy-id 127.0.0.1" in got["host 127.0.0.1"].text
    assert "interface ib7 on 127.0.0.1" not in got  # not looked for: the host line says why
    assert got["rendezvous directory"].ok  # no host to compare with


def test_a_host_that_does_not_resolve(tmp_path):
    job = JOB.replace('"127.0.0.1"', "no-such-host.invalid") % "10000:10100"
    got = lines(job, lambda command: (0, ""), tmp_path)
    assert "does not resolve" in got["host no-such-host.invalid"].text


def test_without_a_port_range_across_hosts_a_note_not_a_failure(tmp_path):
    job = JOB.replace('env: {MPIEXEC_PORT_RANGE: "%s"}\n', "")
    got = lines(job, same_versions, tmp_path)
    assert got["ports"].ok is None and "firewall" in got["ports"].text
    assert _doctor.report(list(got.values()))[1] == 0
