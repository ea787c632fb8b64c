"""Bridged collectives against numpy references, native parity, and loud mismatch errors."""

import re

import pytest
from conftest import RANK_COMPILED, RANK_PATHS

pytestmark = pytest.mark.mpi


@pytest.mark.timeout(240)
def test_collectives_bridged_2_2_full_sizes(bridged):
    job = bridged("coll_suite.py", low=2, high=2, timeout=220)
    assert job.returncode == 0, job.output
    assert job.stdout.count("COLL OK") == 4, job.output


@pytest.mark.timeout(200)
@pytest.mark.parametrize("low,high", [(1, 3), (3, 2)])
def test_collectives_bridged_uneven(bridged, low, high):
    job = bridged("coll_suite.py", "--quick", low=low, high=high, timeout=180)
    assert job.returncode == 0, job.output
    assert job.stdout.count("COLL OK") == low + high, job.output


@pytest.mark.timeout(120)
@pytest.mark.parametrize("low,high", [(2, 2), (3, 2), (1, 2)])
def test_alltoallv_blocks_straight_and_through_the_leaders(bridged, low, high):
    # blocks either side of 32 KiB (the large ones go straight to their ranks), empty ones
    job = bridged("alltoallv_mixed.py", low=low, high=high, timeout=100)
    assert job.returncode == 0, job.output
    assert job.stdout.count(": ok") == low + high, job.output


@pytest.mark.timeout(200)
def test_collectives_native_same_answers(native):
    job = native("coll_suite.py", "--quick", n=4, timeout=180)
    assert job.returncode == 0, job.output
    assert job.stdout.count("COLL OK") == 4, job.output


@pytest.mark.timeout(120)
@pytest.mark.parametrize("case,message,rank3_detects", [
    ("bcast-count", r"mismatched arguments: rank 2 \(high cluster\) has 40 bytes of data, "
                    r"the low cluster has 80", True),
    ("bcast-count-longer", r"mismatched arguments: rank 2 \(high cluster\) has 96 bytes", False),
    ("bcast-count-split", r"mismatched arguments|MPI_ERR_TRUNCATE", True),
    ("allreduce-count", r"mismatched arguments", True),
    ("allreduce-count-plain", r"mismatched arguments: rank [02] \([a-z]+ cluster\) has (32|48) "
                              r"bytes of data, the [a-z]+ cluster has (48|32)", True),
    ("allreduce-count-large", r"mismatched arguments|MPI_ERR_TRUNCATE", True),
    ("allreduce-count-split", r"mismatched arguments|MPI_ERR_TRUNCATE", True),
    ("alltoall-block-larger", r"65600 bytes but the receive buffer holds only 65536|"
                              r"65600 bytes of data per block \(the block from rank [01]\)", True),
    ("alltoall-block-smaller", r"65536 bytes of data per block \(the block from rank [23]\), "
                               r"the high cluster has 64000|65536 bytes but the receive buffer "
                               r"holds only 64000", True),
    ("different-collectives", r"rank [02] sent its part of another collective .* the ranks "
                              r"called different collectives", True),
    ("different-collectives-plain", r"rank [02] sent its part of another collective .* this "
                                    r"is call 2, tag [14]\): the ranks called different", True),
    ("different-object-collectives", r"rank 0 sent its part of another collective .* the "
                                     r"ranks called different collectives", True),
    ("different-collectives-large", r"rank 0 sent its part of another collective \(internal "
                                    r"tag 11, through the matcher", True),
    ("eager-boundary-bcast-high", r"rank 2 \(high cluster\) has more than 32768 bytes of "
                                  r"data, rank 0 sent 30720", True),
    ("eager-boundary-bcast-low", r"rank 2 \(high cluster\) has at most 32768 bytes of data, "
                                 r"rank 0 sent 40960", True),
    ("eager-boundary-allreduce-high", r"mismatched arguments: rank [02] .* sent (30720|40960)",
     True),
    ("eager-boundary-reduce-low", r"rank 0 \(low cluster\) has more than 32768 bytes of "
                                  r"data, rank 2 sent 30720", False),
    ("eager-boundary-reduce-high", r"rank 0 \(low cluster\) has at most 32768 bytes of data, "
                                   r"rank 2 sent 40960", False),
    ("eager-boundary-gather-high", r"rank 0 \(low cluster\) has at most 32768 bytes of data, "
                                   r"rank 2 sent 40960", False),
    ("eager-boundary-gather-low", r"rank 0 \(low cluster\) has more than 32768 bytes of "
                                  r"data, rank 2 sent 30720", False),
    ("eager-boundary-scatter-high", r"rank 2 \(high cluster\) has more than 32768 bytes of "
                                    r"data, rank 0 sent 30720", True),
    ("eager-boundary-scatter-low", r"rank 2 \(high cluster\) has at most 32768 bytes of "
                                   r"data, rank 0 sent 40960", True),
    ("eager-boundary-allgather-high", r"mismatched arguments: rank [02] .* sent (30720|40960)",
     True),
    ("alltoallv-counts", r"rank 3 expects 8 bytes from rank 0, which sends 12", True),
    ("alltoallv-counts-straight", r"rank 3 expects 24000 bytes from rank 0, which sends 40000",
     True),
    ("alltoallv-counts-leaders", r"rank 3 expects 40000 bytes from rank 0, which sends 24000",
     True),
    ("bcast-vs-reduce-within", r"Bcast on rank 2: rank 3 called Reduce while rank 2 called "
                               r"Bcast: the ranks called different collectives", True),
    # a small Bcast's data leaves the root before its cluster's check (carried.py), so the
    # other cluster may finish it: the low cluster alone can see this mismatch
    ("bcast-vs-reduce-across", r"rank 1 called Reduce while rank 0 called Bcast", False),
    ("bcast-roots", r"Bcast: mismatched arguments: root 2 on rank 3, root 0 elsewhere", True),
    ("alltoallv-counts-within", r"Alltoallv: mismatched counts: rank 2 sends 8 bytes to rank "
                                r"3, which expects 12", True),
    # only the root can tell:
    ("gather-small-recvbuf", r"receive buffer of 120 bytes is not 4 equal blocks", False),
    # after a Barrier the small calls go through the compiled front (mmpi/_backend/cfront.c),
    # where built
    ("after-barrier-bcast-count", r"mismatched arguments: rank 2 \(high cluster\) has 40 bytes "
                                  r"of data, the low cluster has 80", True),
    ("after-barrier-allreduce-count-plain", r"mismatched arguments: rank [02] \([a-z]+ "
                                            r"cluster\) has (32|48) bytes of data", True),
    ("after-barrier-different-collectives", r"rank [02] sent its part of another collective .* "
                                            r"this is call 2, tag [14]\): the ranks called", True),
    ("after-barrier-bcast-vs-reduce-within", r"Bcast on rank 2: rank 3 called Reduce while rank "
                                             r"2 called Bcast: the ranks called different", True),
    ("after-barrier-bcast-roots", r"Bcast: mismatched arguments: root 2 on rank 3, root 0 "
                                  r"elsewhere", True),
])
def test_mismatched_collective_arguments_fail_loudly(bridged, case, message, rank3_detects):
    job = bridged("coll_mismatch.py", case, low=2, high=2, timeout=100)
    assert job.returncode != 0, job.output
    # ranks that cannot see the mismatch may finish; the ones that can must not
    if rank3_detects:
        assert "[high:1 v3] rank 3: NO ERROR" not in job.stdout, job.output
    assert re.search(message, job.output), job.output


@pytest.mark.timeout(90)
def test_early_crossings_are_kept_for_their_call(bridged):
    # One cluster's non-leader comes late to each small collective, so the other leader's
    # crossing arrives while this leader still drains in the native part; it must be kept
    # for the crossing's own wait, in order, and the results must be right.
    job = bridged("early_crossings.py", "12", low=2, high=2, timeout=60)
    assert job.returncode == 0, job.output
    assert job.stdout.count(": ok") == 4, job.output
    kept = [int(n) for n in re.findall(r"drains kept (\d+) crossings", job.stdout)]
    assert sum(kept) > 0, job.output  # the case under test did happen


@pytest.mark.timeout(120)
@pytest.mark.parametrize("block", [1500, 0])
def test_a_blocking_collective_lets_a_pending_one_on_its_communicator_finish(bridged, block):
    # Ialltoallv, then Barrier or Allreduce, then Wait: the pending call's large part must
    # not be mistaken for missing when the next call's crossing comes in the same drain
    job = bridged("nbc_then_blocking.py", "150", str(block), low=2, high=2, timeout=45)
    assert job.returncode == 0, job.output
    assert job.stdout.count(": ok") == 4, job.output


@pytest.mark.timeout(60)
def test_a_later_calls_crossing_does_not_fail_an_earlier_calls_posted_receive(bridged):
    # a wait for a crossing on another communicator takes it ahead of the earlier large part
    job = bridged("crossing_overtakes.py", low=1, high=1, timeout=45)
    assert job.returncode == 0, job.output
    assert job.stdout.count(": ok") == 2, job.output


@pytest.mark.timeout(60)
def test_communicators_made_while_collectives_are_pending_do_not_hang(bridged):
    # Create_group does not wait for the parent's pending calls; Dup keeps advancing them
    job = bridged("pending_then_create.py", low=2, high=2, timeout=45)
    assert job.returncode == 0, job.output
    assert job.stdout.count(": ok") == 4, job.output


@pytest.mark.timeout(120)
@pytest.mark.parametrize("path", RANK_PATHS)
@pytest.mark.parametrize("low,high,seed,check",
                         [(2, 2, 5, "1"), (1, 3, 6, "1"), (3, 1, 8, "0")])
def test_small_collectives_on_both_rank_paths(bridged, path, low, high, seed, check):
    # The compiled small collectives (_collectives/compiled.py) against the reference: a
    # seeded mix on three communicators, late ranks, messages in flight; results checked.
    # Both paths must make the same native calls, so a rank may take either (check off too).
    job = bridged("compiled_coll.py", str(seed), "150", low=low, high=high, timeout=100,
                  env={"MMPI_RANK_PATH": path, "MMPI_CHECK_COLLECTIVES": check})
    _ran_where_built(job, r"compiled ok, 150 calls, (\d+) compiled", low + high, path, 50)


_BUDGET = {"MMPI_RECV_BUDGET": "1048576"}
_STRIPED = {"MMPI_STRIPE_MIN": "65536"}  # with two forwarders: blocks of 64 KiB and up stripe


@pytest.mark.timeout(120)
@pytest.mark.parametrize("path,low,high,seed,env,forwarders,least", [
    *(pytest.param("compiled", *case, marks=pytest.mark.skipif(
        not RANK_COMPILED, reason="the compiled rank path was not built"))
      for case in [(2, 2, 5, {}, 1, 20), (1, 3, 6, _BUDGET, 1, 20), (3, 1, 8, _STRIPED, 2, 5)]),
    ("python", 2, 2, 5, _BUDGET, 1, 0)])
def test_large_alltoalls_direct_and_the_reference_way(bridged, path, low, high, seed, env,
                                                      forwarders, least):
    # The direct Alltoall (_collectives/direct.py) against the reference: a seeded mix on
    # three communicators with late ranks, calls back to back, a pending Ialltoall, large
    # messages in flight and, with a small budget, deferred blocks; with two forwarders, each
    # pair's blocks through its own and the larger ones striped (the reference's); every
    # block checked. A rank may take either way.
    job = bridged("direct_alltoall.py", str(seed), "80", low=low, high=high, timeout=100,
                  env={"MMPI_RANK_PATH": path, **env},
                  launcher_args=("--forwarders", str(forwarders)))
    _ran_where_built(job, r"direct ok, 80 calls, (\d+) direct", low + high, path, least)
    if path == "compiled" and forwarders == 1:  # (two forwarders stripe most of its blocks)
        # back to back after a progress step, calls found their envelopes queued
        assert sum(int(n) for n in re.findall(r"(\d+) early", job.stdout)) > 0, job.output


def _ran_where_built(job, pattern: str, ranks: int, path: str, least: int) -> None:
    """The job passed, and every rank's count of calls on the fast path (`pattern`'s group)
    is above `least` on the compiled rank path and 0 on the Python one."""
    assert job.returncode == 0, job.output
    counts = [int(n) for n in re.findall(pattern, job.stdout)]
    assert len(counts) == ranks, job.output
    if path == "compiled":
        assert min(counts) > least, job.output  # it did run there
    else:
        assert max(counts) == 0, job.output


@pytest.mark.timeout(90)
@pytest.mark.parametrize("path", RANK_PATHS)
def test_a_freed_communicator_refuses_collectives_and_keeps_its_persistent_requests(bridged,
                                                                                     path):
    # mpi4py's freed communicator is COMM_NULL: every collective form refuses, naming the
    # call (the compiled front too); persistent requests made before the Free still run
    job = bridged("freed_comm.py", low=2, high=2, timeout=60, env={"MMPI_RANK_PATH": path})
    assert job.returncode == 0, job.output[-3000:]
    assert job.stdout.count("FREED OK 51 refused") == 4, job.output[-3000:]
