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
def test_shared_file_pointers_say_they_are_not_bridged(bridged, tmp_path):
    job = bridged("file_across.py", "shared", str(tmp_path), low=1, high=1, timeout=50)
    assert job.returncode == 0, job.output
    lines = re.findall(r"rank (\d): not bridged: (.*)", job.stdout)
    assert len(lines) == 2 and all("File.Write_shared" in m for _, m in lines), job.output


@pytest.mark.timeout(60)
def test_an_open_refused_in_one_cluster_is_refused_everywhere(bridged, tmp_path):
    job = bridged("file_across.py", "excl", str(tmp_path), low=1, high=2, timeout=50)
    assert job.returncode == 0, job.output
    assert len(re.findall(r"rank \d: refused: error class \d+", job.stdout)) == 3, job.output


@pytest.mark.timeout(60)
@pytest.mark.parametrize("case,message", [
    ("shared", r"NotBridged: Win.Allocate_shared on a communicator across the zipper"),
    ("dynamic", r"NotBridged: Win.Create_dynamic on a communicator across the zipper"),
    ("outside", r"UsageError: Win.Put: target rank \d: displacement 0, 3 elements reach "
                r"bytes 0..24 of a window of 16 bytes"),
])
def test_windows_across_say_what_they_refuse(bridged, case, message):
    job = bridged("win_across.py", case, low=1, high=1, timeout=50)
    assert job.returncode == 0, job.output
    assert len(re.findall(r"rank \d: " + message, job.stdout)) == 2, job.output
