"""Each collective crosses the zipper a fixed number of times per call, whatever the number
of ranks (MagPIe's wide-area-optimal rule; the thesis's alltoall paid a handshake per peer).
The exception: an Alltoall or Alltoallv of large blocks sends each block to its rank, one
message per pair of ranks across (and still no handshake); Alltoallv's leaders still exchange
every block's size. Counted by the forwarder itself, from its summary line."""

import re

import pytest

pytestmark = pytest.mark.mpi
K = 5
# counts that grow with the clusters, by their names in the table below
PER_PAIRS = {"low*high": lambda low, high: low * high,
             "low*high+1": lambda low, high: low * high + 1}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("op,low_high,high_low", [
    ("barrier", 1, 1), ("bcast-low", 1, 0), ("bcast-high", 0, 1), ("reduce", 0, 1),
    ("allreduce", 1, 1), ("alltoall-small", 1, 1), ("alltoall", "low*high", "low*high"),
    ("alltoallv-small", 1, 1), ("alltoallv", "low*high+1", "low*high+1"), ("allgather", 1, 1),
    ("gather", 0, 1), ("scatter", 1, 0), ("gatherv", 0, 1), ("scatterv", 1, 0),
])
@pytest.mark.parametrize("low,high", [(2, 2), (3, 2)])
def test_messages_across_the_zipper_per_call(bridged, op, low_high, high_low, low, high):
    # 8192 doubles = 64 KiB per block: large messages, pipelined in chunks, still one message
    job = bridged("crossings.py", op, str(K), "8192", low=low, high=high)
    assert job.returncode == 0, job.output
    m = re.search(r"low->high (\d+) msgs \d+ B, high->low (\d+) msgs", job.stdout)
    assert m, job.output
    per_call = [PER_PAIRS[x](low, high) if isinstance(x, str) else x
                for x in (low_high, high_low)]
    assert [int(m.group(1)), int(m.group(2))] == [K * x for x in per_call], job.stdout
