"""Load and memory: bounded forwarder memory under a slow receiver; a soak with checksums;
large messages left pending for a rank that waits in a collective.

MMPI_SOAK_SECONDS (default 15) lengthens the soak for on-demand runs, e.g.
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
    base = float(re.search(r"admitted .* \(rss (\d+) MiB\)", job.stdout).group(1))
    peak = float(re.search(r"peak rss (\d+) MiB", job.stdout).group(1))
    assert peak - base <= 64, f"forwarder grew from {base} to {peak} MiB streaming 1 GiB"
    assert re.search(r"low->high 129 msgs 1073741824 B", job.stdout), job.output


@pytest.mark.timeout(900)
@pytest.mark.parametrize("low,high,seed", [(2, 2, 1), (1, 2, 2)])
def test_soak_random_sizes_tags_and_peers(bridged, low, high, seed):
    seconds = float(os.environ.get("MMPI_SOAK_SECONDS", "15"))
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
