"""Bad input of every kind gets a clear error naming the culprit; none hangs or corrupts.

In-program kinds (ranks, tags, buffers, datatypes, roots, ops, collective buffer shapes,
truncation, unpicklable objects, calls after Finalize) are checked by progs/bad_input.py on
every rank of a real bridged job; launcher kinds by the real mmpi-run. Config validation in
depth lives in tests/unit/test_config.py.
"""

import os
import subprocess
import sys

import pytest
from conftest import PROGS, ROOT, mmpi_run_cmd

pytestmark = pytest.mark.mpi


@pytest.mark.timeout(120)
@pytest.mark.parametrize("low,high", [(2, 2), (1, 2)])
def test_bad_arguments_in_a_bridged_job(bridged, low, high):
    job = bridged("bad_input.py", low=low, high=high)
    assert job.returncode == 0, job.output
    assert job.stdout.count("BAD INPUT OK (24 kinds)") == low + high, job.output


@pytest.mark.timeout(90)
@pytest.mark.parametrize("low,high", [(2, 2), (1, 3)])
def test_calls_not_bridged_raise_at_once_on_every_rank(bridged, low, high):
    # a native Accept on COMM_SELF waits for ever for a Connect that the bridge refuses
    job = bridged("not_bridged.py", low=low, high=high, timeout=60)
    assert job.returncode == 0, job.output
    size = low + high
    for line in ["rank 0: COMM_SELF.Accept NotBridged", "rank 0: COMM_SELF.Connect NotBridged",
                 *[f"rank {r}: Connect NotBridged" for r in range(1, size)],
                 *[f"rank {r}: Accept NotBridged" for r in range(1, size)],
                 *[f"rank {r}: {call} NotBridged" for r in range(size) for call in
                   ("Intercomm.Scan", "Intercomm.Scan_init",
                    "Intercomm.Is_revoked")],
                 *[f"rank {r}: Intercomm TypeError" for r in range(size)],
                 *[f"rank {r}: {call} impossible" for r in range(size)
                   for call in ("toint", "py2f")],
                 *[f"rank {r}: COMM_SELF worked" for r in range(size)],
                 *[f"rank {r}: done" for r in range(size)]]:
        assert line in job.stdout, f"{line!r} missing\n{job.output}"


def _mmpi_run(*args, timeout=60, env=None):
    return subprocess.run([*mmpi_run_cmd(), *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, env=env)


@pytest.mark.timeout(60)
def test_mmpi_run_without_a_command():
    p = _mmpi_run()
    assert p.returncode == 2
    assert "command" in p.stderr.lower()


@pytest.mark.timeout(60)
def test_unknown_yaml_key_is_named(tmp_path):
    cfg = tmp_path / "job.yaml"
    cfg.write_text("clusters:\n  low: {ranks: 1}\n  high: {ranks: 1, hots: [a]}\n")
    p = _mmpi_run("-c", str(cfg), sys.executable, "-c", "pass")
    assert p.returncode == 1
    assert "clusters.high" in p.stderr and "hots" in p.stderr, p.stderr


@pytest.mark.timeout(60)
def test_malformed_yaml_is_reported(tmp_path):
    cfg = tmp_path / "job.yaml"
    cfg.write_text("clusters: [low: {ranks: 1\n")
    p = _mmpi_run("-c", str(cfg), sys.executable, "-c", "pass")
    assert p.returncode == 1
    assert "job.yaml" in p.stderr, p.stderr


@pytest.mark.timeout(60)
def test_missing_hostfile_is_named(tmp_path):
    cfg = tmp_path / "job.yaml"
    cfg.write_text("clusters:\n  low: {ranks: 1, hostfile: nowhere.txt}\n  high: {ranks: 1}\n")
    p = _mmpi_run("-c", str(cfg), sys.executable, "-c", "pass")
    assert p.returncode != 0
    assert "nowhere.txt" in p.stdout + p.stderr, p.stdout + p.stderr


@pytest.mark.timeout(60)
def test_bad_cluster_name_in_environment():
    env = dict(os.environ, MMPI_RENDEZVOUS="/nonexistent", MMPI_CLUSTER="middle")
    p = subprocess.run([sys.executable, "-c", "from mmpi import MPI"], capture_output=True,
                       text=True, timeout=60, env=env)
    assert p.returncode != 0
    assert "MMPI_CLUSTER must be 'low' or 'high', got 'middle'" in p.stderr, p.stderr


def test_forwarder_never_unpickles_or_executes():
    """The forwarder moves bytes; nothing in it may deserialise or run what it carries."""
    src = "".join(p.read_text() for p in (ROOT / "forwarder").glob("*.py"))
    for word in ("pickle", "eval(", "exec(", "marshal", "yaml.load("):
        assert word not in src, f"forwarder code mentions {word!r}"
    assert PROGS.exists()
