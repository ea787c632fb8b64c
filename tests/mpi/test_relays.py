"""The Python paths (the reference, and the fallback without a compiler) under real jobs.

Every other bridged test runs on the default paths, the compiled ones where the install built
them: the forwarder's relay and the ranks' crossing path. These run the same programs with
MMPI_RELAY=python and MMPI_RANK_PATH=python, so both pass the same point-to-point, collective,
striping, soak and fuzz checks (the fake link runs both relays too).
"""

import re

import pytest
from conftest import RANK_PATHS, RELAYS, ROOT

pytestmark = pytest.mark.mpi
PY = {"MMPI_RELAY": "python", "MMPI_RANK_PATH": "python"}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("relay", RELAYS)
def test_the_forwarder_names_its_relay(bridged, relay):
    job = bridged("p2p_suite.py", low=1, high=1, env={"MMPI_RELAY": relay})
    assert job.returncode == 0, job.output
    assert re.search(rf"admitted low=1 high=1 ranks \(rss \d+ MiB, relay {relay}\)",
                     job.stdout), job.output


@pytest.mark.timeout(150)
def test_p2p_over_two_forwarders_on_the_python_relay(bridged):
    job = bridged("p2p_suite.py", low=2, high=3, launcher_args=("--forwarders", "2"), env=PY)
    assert job.returncode == 0, job.output
    assert job.stdout.count("P2P OK") == 5, job.output


@pytest.mark.timeout(200)
def test_collectives_on_the_python_relay(bridged):
    job = bridged("coll_suite.py", "--quick", low=2, high=2, env=PY, timeout=180)
    assert job.returncode == 0, job.output
    assert job.stdout.count("COLL OK") == 4, job.output


@pytest.mark.timeout(120)
def test_soak_with_striping_on_the_python_relay(bridged):
    job = bridged("soak.py", "4", "9", low=2, high=2, launcher_args=("--forwarders", "2"),
                  env=PY, timeout=100)
    assert job.returncode == 0, job.output
    assert re.search(r"SOAK OK: \d+ rounds, [1-9]\d* messages", job.stdout), job.output


@pytest.mark.timeout(120)
def test_fuzz_on_the_python_relay(bridged):
    job = bridged("commfuzz.py", "31", "5", low=1, high=3, env=PY, timeout=100)
    assert job.returncode == 0, job.output[-4000:]
    assert job.stdout.count("fuzz ok") == 4, job.output[-3000:]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("path", RANK_PATHS)
def test_the_ranks_name_their_crossing_path(bridged, path):
    job = bridged("p2p_suite.py", low=1, high=1, launcher_args=("--verbose",),
                  env={"MMPI_RANK_PATH": path})
    assert job.returncode == 0, job.output
    for cluster in ("low", "high"):
        assert f"mmpi: {cluster} cluster's crossing path {path}" in job.output, job.output


@pytest.mark.timeout(60)
def test_an_unknown_rank_path_is_refused_by_name(bridged):
    job = bridged("p2p_suite.py", low=1, high=1, env={"MMPI_RANK_PATH": "fast"})
    assert job.returncode != 0
    assert "MMPI_RANK_PATH='fast': expected one of auto, compiled, python" in job.output, \
        job.output


@pytest.mark.timeout(60)
@pytest.mark.parametrize("path", RANK_PATHS)
def test_both_rank_backends_speak_the_wire_protocol(native, path):
    job = native("crank_wire.py", path, n=1)
    assert job.returncode == 0, job.output
    assert "CRANK WIRE OK" in job.stdout, job.output


@pytest.mark.timeout(120)
@pytest.mark.parametrize("path", RANK_PATHS)
def test_small_sends_done_at_once_all_arrive_after_the_sender_left(bridged, path):
    job = bridged("send_and_go.py", "2000", low=1, high=1, env={"MMPI_RANK_PATH": path})
    assert job.returncode == 0, job.output
    assert "SENT" in job.stdout and "RECEIVED 2000" in job.stdout, job.output


@pytest.mark.timeout(60)
@pytest.mark.parametrize("path", RANK_PATHS)
def test_the_receive_steps_benchmark_runs_and_its_receives_hold_their_messages(bridged, path):
    job = bridged(str(ROOT / "benchmarks" / "receive_steps.py"), "5", low=1, high=1,
                  env={"MMPI_RANK_PATH": path})
    assert job.returncode == 0, job.output
    assert re.search(r"per message \(us\): posted: Irecv [\d.]+, arrival [\d.]+, Waitall [\d.]+, "
                     r"arrived: arrival [\d.]+, Irecv [\d.]+, Waitall  [\d.]+", job.stdout), \
        job.output
    assert re.search(r"real messages, per message \(us\): Irecv [\d.]+, Waitall [\d.]+",
                     job.stdout), job.output


@pytest.mark.timeout(150)
@pytest.mark.parametrize("path", RANK_PATHS)
@pytest.mark.parametrize("shape", [(1, 1, 7, 300), (2, 2, 8, 150)])
def test_receives_and_small_sends_in_every_form_hold_their_bytes(bridged, path, shape):
    low, high, seed, rounds = shape
    job = bridged("posted_mix.py", str(seed), str(rounds), low=low, high=high,
                  env={"MMPI_RANK_PATH": path}, timeout=120)
    assert job.returncode == 0, job.output[-3000:]
    ok = re.findall(r"POSTED OK (\d+) compiled=(\w+) (\d+)", job.stdout)
    assert len(ok) == low + high, job.output[-3000:]
    assert {c for _, c, _ in ok} == {str(path == "compiled")}, job.output[-3000:]
    assert sum(int(n) for _, _, n in ok) == high * rounds, job.output[-3000:]
