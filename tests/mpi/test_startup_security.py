"""Start-up: strangers are refused without disturbing the job; start order does not matter;
the rendezvous is private to the user."""

import os
import random
import stat
import subprocess
import sys
import time

import pytest
from conftest import MPIEXEC, PROGS, ROOT, mmpi_run_cmd

pytestmark = pytest.mark.mpi

TRIVIAL = ("from mmpi import MPI; c = MPI.COMM_WORLD; c.Barrier(); "
           "assert c.allreduce(1) == c.size; print('UP', c.rank, flush=True)")


def _start(argv, env, **kw):
    return subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, cwd=ROOT, **kw)


def _manual_job(tmp_path, *, order, delays, prog_args, extra_env=None, before_clusters=None,
                after="fwd", timeout=60):
    """Start forwarder and clusters by hand in `order` with `delays`; return their outputs.

    `before_clusters(rdv, env)`, if given, is called right after job `after` has started and
    returns one more process (a stranger). A job still running after `timeout` s is killed and
    reported with status None.
    """
    from mmpi.wire.rendezvous import make_dir

    rdv = make_dir(str(tmp_path))
    env = dict(os.environ, MMPI_RENDEZVOUS=str(rdv), **(extra_env or {}))
    argv = {
        "fwd": [MPIEXEC, "-n", "1", sys.executable, "-m", "forwarder", "--rendezvous",
                str(rdv), "--connect-timeout", "30"],
        "low": [MPIEXEC, "-n", "2", *prog_args],
        "high": [MPIEXEC, "-n", "1", *prog_args],
    }
    procs = {}
    try:
        for name, delay in zip(order, delays, strict=True):
            time.sleep(delay)
            procs[name] = _start(argv[name], dict(env, MMPI_CLUSTER=name) if name != "fwd"
                                 else env)
            if name == after and before_clusters:
                procs["stranger"] = before_clusters(rdv, env)
        deadline = time.monotonic() + timeout
        outs = {}
        for n, p in procs.items():
            try:
                outs[n] = p.communicate(timeout=max(0.1, deadline - time.monotonic()))[0]
            except subprocess.TimeoutExpired:
                for q in procs.values():
                    q.kill()
                outs[n] = p.communicate()[0]
                p.returncode = None  # hung: killed here, not failed by itself
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
        p = _start([MPIEXEC, "-n", "1", sys.executable, str(PROGS / "stranger.py"),
                    str(port), mode], env)
        time.sleep(1.0)  # let it be first in line on the low port
        return p

    res = _manual_job(tmp_path, order=["fwd", "low", "high"], delays=[0, 0, 0],
                      prog_args=[sys.executable, "-c", TRIVIAL],
                      extra_env={"MMPI_HELLO_TIMEOUT": "2"}, before_clusters=stranger)
    fwd_rc, fwd_out = res["fwd"]
    assert fwd_rc == 0, fwd_out
    reason = ("wrong proof of the job secret" if mode == "wrong-secret"
              else "no answer to the challenge within 2 s")
    assert f"refused a connection on the 'low' port: {reason}" in fwd_out, fwd_out
    for c in ("low", "high"):
        assert res[c][0] == 0, res[c][1]
    assert res["low"][1].count("UP") == 2 and res["high"][1].count("UP") == 1


def _stranger_at(port_name: str, *args: str):
    """A `before_clusters` hook: start stranger.py on `port_name` once the port is published."""

    def start(rdv, env):
        port = rdv / port_name
        deadline = time.monotonic() + 20
        while not port.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        p = _start([MPIEXEC, "-n", "1", sys.executable, str(PROGS / "stranger.py"),
                    str(port), *args], env)
        time.sleep(1.0)  # let it be first in line on that port
        return p

    return start


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("mode", "cluster"), [("forge", "low"), ("forge", "high"),
                                               ("junk", "low")])
def test_stranger_flooding_a_port_is_never_relayed(tmp_path, mode, cluster):
    """A stranger first in line floods data-tagged messages (envelopes addressed to the real
    ranks) instead of proving membership, before and after it is refused: none of them may
    reach a rank, and the real job runs as if nothing happened."""
    # The low cluster has vranks 0-1, the high one vrank 2: address the other cluster's ranks.
    first, ndst = ("2", "1") if cluster == "low" else ("0", "2")
    t0 = time.monotonic()
    res = _manual_job(tmp_path, order=["fwd", "low", "high"], delays=[0, 0, 0],
                      prog_args=[sys.executable, str(PROGS / "exact_delivery.py")],
                      extra_env={"MMPI_HELLO_TIMEOUT": "2"},
                      before_clusters=_stranger_at(f"port.0.{cluster}", mode, first, ndst),
                      after="fwd" if cluster == "low" else "low", timeout=40)
    fwd_rc, fwd_out = res["fwd"]
    everything = "\n".join(f"--- {n} (status {rc}) ---\n{out}" for n, (rc, out) in res.items())
    assert f"refused a connection on the {cluster!r} port" in fwd_out, everything
    assert fwd_rc == 0, everything
    for c in ("low", "high"):
        assert res[c][0] == 0, everything
    assert "FORGED" not in everything, everything
    assert res["low"][1].count("EXACT") == 2 and res["high"][1].count("EXACT") == 1, everything
    assert time.monotonic() - t0 < 60


@pytest.mark.timeout(300)
def test_start_order_does_not_matter(tmp_path):
    """Clusters may start before the forwarder, in either order, or at the same instant."""
    rng = random.Random(2026)
    orders = [["fwd", "low", "high"], ["high", "low", "fwd"], ["low", "fwd", "high"],
              ["high", "fwd", "low"]]
    for i in range(int(os.environ.get("MMPI_STARTUPS", "8"))):  # twice each order in CI
        order = orders[i % len(orders)]
        delays = [0] + [rng.choice([0, 0, 0.05, 0.3]) for _ in order[1:]]
        (tmp_path / str(i)).mkdir()
        res = _manual_job(tmp_path / str(i), order=order, delays=delays,
                          prog_args=[sys.executable, "-c", TRIVIAL])
        for name, (rc, out) in res.items():
            assert rc == 0, f"start-up {i} ({order}, {delays}): {name} failed:\n{out}"


@pytest.mark.timeout(400)
def test_many_startups_in_a_row():
    n = int(os.environ.get("MMPI_STARTUPS", "6"))  # MMPI_STARTUPS=200 for a long run
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
