"""Load and memory: bounded forwarder memory under a slow receiver; a soak with checksums;
large messages left pending for a rank that waits in a collective.

MMPI_SOAK_SECONDS (default 6) lengthens the soak for on-demand runs, e.g.
`MMPI_SOAK_SECONDS=300 pytest tests/mpi/test_load.py -k soak`.
"""

import os
import re

import pytest

pytestmark = pytest.mark.mpi


@pytest.mark.timeout(180)
def test_slow_receiver_does_not_grow_the_forwarder(bridged):
    job = bridged("slow_receiver.py", "1024", "0.02", low=1, high=1, timeout=160)
    assert job.returncode == 0, job.output
    assert "received 128 x 8 MiB in order" in job.stdout, job.output
    base = float(re.search(r"admitted .* \(rss (\d+) MiB", job.stdout).group(1))
    peak = float(re.search(r"peak rss (\d+) MiB", job.stdout).group(1))
    assert peak - base <= 64, f"forwarder grew from {base} to {peak} MiB streaming 1 GiB"
    assert re.search(r"low->high 129 msgs 1073741824 B", job.stdout), job.output


@pytest.mark.timeout(900)
@pytest.mark.parametrize("low,high,seed", [(2, 2, 1), (1, 2, 2)])
def test_soak_random_sizes_tags_and_peers(bridged, low, high, seed):
    seconds = float(os.environ.get("MMPI_SOAK_SECONDS", "6"))
    job = bridged("soak.py", str(seconds), str(seed), low=low, high=high,
                  timeout=seconds * 3 + 60)
    assert job.returncode == 0, job.output
    m = re.search(r"SOAK OK: (\d+) rounds, (\d+) messages", job.stdout)
    assert m and int(m.group(2)) > 0, job.output


@pytest.mark.timeout(180)
@pytest.mark.parametrize("mode", ["direction", "single"])
def test_soak_in_the_other_relay_modes(bridged, mode):
    # The default mode ("split") runs in every other test; these keep the two others honest.
    job = bridged("soak.py", "4", "3", low=2, high=2, timeout=90,
                  env={"MMPI_FWD_MODE": mode})
    assert job.returncode == 0, job.output
    m = re.search(r"SOAK OK: (\d+) rounds, (\d+) messages", job.stdout)
    assert m and int(m.group(2)) > 0, job.output


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", ["buffer", "object"])
def test_messages_pending_for_a_rank_in_a_native_wait_do_not_hang_a_collective(bridged, kind):
    # Four 4 MiB messages to one rank can hold every chunk buffer of the forwarder's
    # high->low direction; the leaders' 256 KiB crossings need one. Fails (times out) if
    # a wait for native requests never drains the forwarder link, or (objects) if the
    # pickle-based collectives block inside MPI.
    job = bridged("pending_then_collective.py", "20", kind, low=2, high=2, timeout=90)
    assert job.returncode == 0, job.output
    assert job.stdout.count(": ok") == 4, job.output


@pytest.mark.timeout(240)
def test_a_slow_receiver_holds_a_bounded_amount_of_early_data(bridged):
    # 512 x 4 MiB sent at once to a receiver that waits first: with a 256 MiB budget for early
    # data, the receiver's memory stays near that (it grew to 2 GiB without flow control).
    job = bridged("flood.py", "slow", "512", "4", low=1, high=1, timeout=200,
                  env={"MMPI_RECV_BUDGET": str(256 << 20)})
    assert job.returncode == 0, job.output
    m = re.search(r"rank 1: received 512 x 4 MiB, peak rss (\d+) MiB", job.stdout)
    assert m, job.output
    assert int(m.group(1)) < 256 + 200, job.output


@pytest.mark.timeout(240)
@pytest.mark.parametrize("budget", [16 << 20, 256 << 20])
def test_mutual_floods_of_large_isends_do_not_deadlock(bridged, budget):
    job = bridged("flood.py", "mutual", "200", "1", low=1, high=1, timeout=200,
                  env={"MMPI_RECV_BUDGET": str(budget)})
    assert job.returncode == 0, job.output
    assert len(re.findall(r"received 200 x 1 MiB", job.stdout)) == 2, job.output
