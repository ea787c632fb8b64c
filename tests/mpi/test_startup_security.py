"""Start-up: strangers are refused without disturbing the job; start order does not matter;
the rendezvous is private to the user."""

import os
import random
import stat
import subprocess
import sys
import time

import pytest
from conftest import PROGS, ROOT, mmpi_run_cmd

pytestmark = pytest.mark.mpi

TRIVIAL = ("from mmpi import MPI; c = MPI.COMM_WORLD; c.Barrier(); "
           "assert c.allreduce(1) == c.size; print('UP', c.rank, flush=True)")


def _start(argv, env, **kw):
    return subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, cwd=ROOT, **kw)


def _manual_job(tmp_path, *, order, delays, prog_args, extra_env=None, before_clusters=None):
    """Start forwarder and clusters by hand in `order` with `delays`; return their outputs."""
    from mmpi.wire.rendezvous import make_dir

    rdv = make_dir(str(tmp_path))
    env = dict(os.environ, MMPI_RENDEZVOUS=str(rdv), **(extra_env or {}))
    argv = {
        "fwd": ["mpiexec", "-n", "1", sys.executable, "-m", "forwarder", "--rendezvous",
                str(rdv), "--connect-timeout", "30"],
        "low": ["mpiexec", "-n", "2", *prog_args],
        "high": ["mpiexec", "-n", "1", *prog_args],
    }
    procs = {}
    try:
        for name, delay in zip(order, delays, strict=True):
            time.sleep(delay)
            if name == "fwd" and before_clusters:
                procs["fwd"] = _start(argv["fwd"], env)
                procs["stranger"] = before_clusters(rdv, env)
                continue
            procs[name] = _start(argv[name], dict(env, MMPI_CLUSTER=name) if name != "fwd"
                                 else env)
        outs = {n: p.communicate(timeout=60)[0] for n, p in procs.items()}
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
    return {n: (procs[n].returncode, outs[n]) for n in procs}


@pytest.mark.timeout(150)
@pytest.mark.parametrize("mode", ["wrong-secret", "silent"])
def test_stranger_is_refused_and_the_job_runs(tmp_path, mode):
    def stranger(rdv, env):
        port = rdv / "port.0.low"
        deadline = time.monotonic() + 20
        while not port.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        p = _start(["mpiexec", "-n", "1", sys.executable, str(PROGS / "stranger.py"),
                    str(port), mode], env)
        time.sleep(1.0)  # let it be first in line on the low port
        return p

    res = _manual_job(tmp_path, order=["fwd", "low", "high"], delays=[0, 0, 0],
                      prog_args=[sys.executable, "-c", TRIVIAL],
                      extra_env={"MMPI_HELLO_TIMEOUT": "2"}, before_clusters=stranger)
    fwd_rc, fwd_out = res["fwd"]
    assert fwd_rc == 0, fwd_out
    reason = "wrong job secret" if mode == "wrong-secret" else "no HELLO within 2 s"
    assert f"refused a connection on the 'low' port: {reason}" in fwd_out, fwd_out
    for c in ("low", "high"):
        assert res[c][0] == 0, res[c][1]
    assert res["low"][1].count("UP") == 2 and res["high"][1].count("UP") == 1


@pytest.mark.timeout(300)
def test_start_order_does_not_matter(tmp_path):
    """Clusters may start before the forwarder, in either order, or at the same instant."""
    rng = random.Random(2026)
    orders = [["fwd", "low", "high"], ["high", "low", "fwd"], ["low", "fwd", "high"],
              ["high", "fwd", "low"]]
    for i in range(12):
        order = orders[i % len(orders)]
        delays = [0] + [rng.choice([0, 0, 0.05, 0.3]) for _ in order[1:]]
        (tmp_path / str(i)).mkdir()
        res = _manual_job(tmp_path / str(i), order=order, delays=delays,
                          prog_args=[sys.executable, "-c", TRIVIAL])
        for name, (rc, out) in res.items():
            assert rc == 0, f"start-up {i} ({order}, {delays}): {name} failed:\n{out}"


@pytest.mark.timeout(400)
def test_fifty_startups_in_a_row():
    n = int(os.environ.get("MMPI_STARTUPS", "50"))
    for i in range(n):
        p = subprocess.run([*mmpi_run_cmd(), "--low", "2", "--high", "2", sys.executable, "-c",
                            TRIVIAL], capture_output=True, text=True, timeout=60, cwd=ROOT)
        assert p.returncode == 0 and p.stdout.count("UP") == 4, \
            f"start-up {i + 1} of {n} failed:\n{p.stdout}\n{p.stderr}"


def test_rendezvous_is_private(tmp_path):
    from mmpi.wire.rendezvous import SECRET_FILE, make_dir, write_atomic

    rdv = make_dir(str(tmp_path))
    assert stat.S_IMODE(rdv.stat().st_mode) == 0o700
    assert stat.S_IMODE((rdv / SECRET_FILE).stat().st_mode) == 0o600
    write_atomic(rdv / "port.0.low", "x")
    assert stat.S_IMODE((rdv / "port.0.low").stat().st_mode) == 0o600
    assert len((rdv / SECRET_FILE).read_text()) == 32
