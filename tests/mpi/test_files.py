"""MPI-IO files and one-sided windows across the zipper: where both clusters cannot share a file,
or a call is not bridged, every rank says so at once (the working cases are in the conformance
programs, tests/conformance/progs/file_io.py and rma.py)."""

import re

import pytest

pytestmark = pytest.mark.mpi


@pytest.mark.timeout(60)
@pytest.mark.parametrize("case,why", [("apart", "does not find it"),
                                      ("twins", "sees another file by that name")])
def test_clusters_on_different_file_systems_are_refused_by_every_rank(bridged, tmp_path, case,
                                                                        why):
    job = bridged("file_across.py", case, str(tmp_path), low=1, high=2, timeout=50)
    assert job.returncode == 0, job.output
    lines = re.findall(r"rank (\d): apart: (.*)", job.stdout)
    assert sorted(int(r) for r, _ in lines) == [0, 1, 2], job.output
    for _, message in lines:
        assert "File.Open('data.bin')" in message and "the low cluster opened it but the " \
            f"high cluster {why}" in message and "one file system" in message, message


@pytest.mark.timeout(60)
def test_independent_calls_on_the_shared_file_pointer(bridged, tmp_path):
    job = bridged("file_across.py", "shared", str(tmp_path), low=1, high=2, timeout=50)
    assert job.returncode == 0, job.output
    # 3 ranks: 3 rounds of 1 + 2 + 3 values and 2 each (24); the reads move it by what they
    # ask, 2 each, as ROMIO's do: 12 pieces and each rank's last, short one (30); then one
    # value each in rank order (33)
    assert sorted(re.findall(r"rank (\d): shared ok 24 33", job.stdout)) == ["0", "1", "2"], \
        job.output


@pytest.mark.timeout(60)
def test_an_open_refused_in_one_cluster_is_refused_everywhere(bridged, tmp_path):
    job = bridged("file_across.py", "excl", str(tmp_path), low=1, high=2, timeout=50)
    assert job.returncode == 0, job.output
    assert len(re.findall(r"rank \d: refused: error class \d+", job.stdout)) == 3, job.output


@pytest.mark.timeout(60)
@pytest.mark.parametrize("case,message", [
    ("shared", r"NotBridged: Win.Allocate_shared on a communicator across the zipper"),
    ("dynamic", r"UsageError: Win \(dynamic\) on rank \d: rank \d reached bytes 0x[0-9a-f]+\.\."
                r"0x[0-9a-f]+, outside the memory attached here"),
    ("dynamic-get", r"UsageError: Win \(dynamic\) on rank \d: rank \d reached bytes "
                    r"0x[0-9a-f]+\.\.0x[0-9a-f]+, outside the memory attached here"),
    ("outside", r"UsageError: Win.Put: target rank \d: displacement 0, 3 elements reach "
                r"bytes 0..24 of a window of 16 bytes"),
])
def test_windows_across_say_what_they_refuse(bridged, case, message):
    # The error is the Fence's that ends the operation's epoch on each rank, wherever the
    # target served it: a target that raised inside another call left its peer waiting for
    # ever in the Fence's collective (seen on a busy machine).
    job = bridged("win_across.py", case, low=1, high=1, timeout=50)
    assert job.returncode == 0, job.output
    assert len(re.findall(r"rank \d: " + message, job.stdout)) == 2, job.output
