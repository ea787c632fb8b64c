"""mmpi-run --doctor end to end: this machine's default job passes, a bad job file is named."""
# ruff: noqa: D103  (test names say what they check)

from __future__ import annotations

import os
import subprocess

import pytest
from conftest import mmpi_run_cmd

pytestmark = pytest.mark.mpi


def doctor(tmp_path, *args, timeout=150):
    env = dict(os.environ, TMPDIR=str(tmp_path))
    env.pop("MMPI_RENDEZVOUS", None)
    return subprocess.run([*mmpi_run_cmd(), "--doctor", *args], capture_output=True,
                          text=True, timeout=timeout, cwd=tmp_path, env=env,
                          stdin=subprocess.DEVNULL)


@pytest.mark.timeout(180)
def test_the_default_job_on_this_machine_passes_every_check(tmp_path):
    p = doctor(tmp_path, "--low", "1", "--high", "1")
    assert p.returncode == 0, p.stdout + p.stderr
    lines = p.stdout.splitlines()
    assert all(line.split()[0] in ("ok", "note") for line in lines[:-1]), p.stdout
    assert any(line.startswith("ok   a test job: 1+1 ranks") for line in lines), p.stdout
    assert lines[-1].endswith("checks fine") and "Traceback" not in p.stdout + p.stderr


@pytest.mark.timeout(60)
def test_what_is_wrong_is_one_line_each_and_the_status_says_so(tmp_path):
    job = tmp_path / "job.yaml"
    job.write_text("clusters:\n  low: {ranks: 1, hosts: [no-such-host.invalid]}\n"
                   "  high: {ranks: 1}\n")
    p = doctor(tmp_path, "-c", str(job))
    assert p.returncode == 1, p.stdout + p.stderr
    assert "FAIL host no-such-host.invalid: does not resolve" in p.stdout
    assert "FAIL a test job: not tried: fix the failures above first" in p.stdout
    assert "Traceback" not in p.stdout + p.stderr


@pytest.mark.timeout(60)
def test_an_invalid_job_file_is_the_first_and_only_check(tmp_path):
    job = tmp_path / "job.yaml"
    job.write_text("clusters:\n  low: {rank: 1}\n  high: {ranks: 1}\n")
    p = doctor(tmp_path, "-c", str(job))
    assert p.returncode == 1
    assert p.stdout.startswith("FAIL job description:") and "did you mean 'ranks'" in p.stdout
    assert doctor(tmp_path, "python", "x.py").returncode == 2
