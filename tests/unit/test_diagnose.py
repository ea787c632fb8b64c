"""Tests of launch._diagnose on text: consequences in one line, MPICH error stacks, stopped
forwarders, the shell's statuses for signals."""
# ruff: noqa: D103  (test names say what they check)

from __future__ import annotations

from hydra_text import ABORT_1, BANNER_KILLED, FORWARDER_CRASH, TRACEBACK

from launch._diagnose import CLUSTER, FORWARDER, Evidence, JobEnd, diagnose
from launch.hygiene import Pids

PIDS = Pids(
    {("low", 0): (6716, 0), ("low", 1): (6717, 1), ("high", 0): (6718, 2), ("high", 1): (6719, 3)},
    {0: 6700},
)
GONE = (
    "mmpi.errors.RankGone: Barrier on rank {v}: rank 1 has already finalized (or exited) after "
    "0 collective call(s); this is call 1, which it will never join"
)
LOST = (
    "mmpi.errors.ForwarderLost: rank {v} ({c} cluster, local rank {l}): lost the forwarder: "
    "nothing heard from it for 5 s of waiting (it sends a heartbeat every 0.5 s)"
)


def raised(local: int, text: str, ev: Evidence | None = None) -> Evidence:
    """Evidence of a rank that printed a traceback ending in `text`, then MPI_Abort's notice."""
    ev = ev or Evidence()
    ev.feed(local, "Traceback (most recent call last):")
    ev.feed(local, '  File "prog.py", line 3, in <module>')
    for line in text.split("\n"):
        ev.feed(local, line)
    ev.feed(local, f"Abort(1) on node {local} (rank {local} in comm 0): application called "
                   f"MPI_Abort(MPI_COMM_WORLD, 1) - process {local}")
    return ev


def test_ranks_that_failed_as_a_consequence_are_one_line():
    low = raised(0, "ValueError: bad input on rank 0")
    high = raised(1, GONE.format(v=3), raised(0, GONE.format(v=2)))
    report = diagnose(
        [
            JobEnd("high", CLUSTER, 1, "exited with status 1", high, 2, 0),
            JobEnd("low", CLUSTER, 1, "exited with status 1", low, 0, 1),
        ],
        PIDS,
    )
    # The direct cause wins over the RankGone that the first job to exit reported.
    assert report.lines == [
        "rank 0 (low:0, pid 6716) raised ValueError: bad input on rank 0; "
        "cluster 'low' exited with status 1",
        f"2 other ranks failed as a consequence: rank 2 (high:0) raised {GONE.format(v=2)}; "
        "rank 3 (high:1) raised RankGone",
    ]
    assert report.cause_rank == ("low", 0)
    assert report.status == 1


def test_ranks_that_failed_alike_are_not_called_a_consequence():
    ev = raised(1, "ValueError: bad input", raised(0, "ValueError: bad input"))
    report = diagnose([JobEnd("low", CLUSTER, 1, "exited with status 1", ev)], PIDS)
    # (the cause's words, given in full on the line before, are not repeated)
    assert report.lines[1] == "1 other rank failed too: rank 1 (low:1) raised ValueError"


def test_ranks_of_a_job_still_running_count_too():
    low = raised(0, "ValueError: bad input")
    high = raised(0, LOST.format(v=2, c="high", l=0))
    report = diagnose(
        [JobEnd("low", CLUSTER, 1, "exited with status 1", low)],
        PIDS,
        stopped=[JobEnd("high", CLUSTER, 0, "was stopped", high, 2)],
    )
    assert report.lines[-1].startswith("1 other rank failed as a consequence: rank 2 (high:0) ")


MPICH_STACK = [
    "internal_Allreduce_c(342).........................: MPI_Allreduce_c(sendbuf=0x55c9cbb57020, "
    "recvbuf=0x55c9cbd2c1e0, count=4, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD) failed",
    "MPID_Allreduce(483)...............................: ",
    "MPIR_Wait(745)....................................: ",
    "MPIDIG_recv_type_init(74).........................: Message from rank 1 and tag 14 "
    "truncated; 16 bytes received but buffer size is 32",
]


def test_an_mpich_error_stack_is_summed_up_by_the_call_and_the_error():
    ev = raised(1, "\n".join(["mpi4py.MPI.Exception: Message truncated, error stack:",
                              *MPICH_STACK]))
    (line,) = diagnose([JobEnd("low", CLUSTER, 1, "exited with status 1", ev)]).lines
    assert line == (
        "rank 1 (low:1) raised mpi4py.MPI.Exception: Message truncated: "
        "MPI_Allreduce_c(count=4, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD) failed: "
        "Message from rank 1 and tag 14 truncated; 16 bytes received but buffer size is 32; "
        "cluster 'low' exited with status 1"
    )


def test_the_stack_of_mmpis_own_wait_and_of_a_fatal_abort():
    # As a bridged Allreduce with counts that differ inside one cluster printed it.
    ev = raised(1, "\n".join([
        "mpi4py.MPI.Exception: Other MPI error, error stack:",
        "internal_Test(109)..............: MPI_Test(request=0x7fc6d9b80dd0, flag=0x7ffdebcddc90, "
        "status=0x1) failed",
        "MPIDU_Sched_progress_state(1152): Other MPI error",
    ]))
    report = diagnose([JobEnd("low", CLUSTER, 1, "exited with status 1", ev)])
    assert report.lines[0] == (
        "rank 1 (low:1) raised mpi4py.MPI.Exception: Other MPI error: MPI_Test() failed: "
        "Other MPI error; cluster 'low' exited with status 1"
    )
    # MPICH's own fatal handler: no traceback, the abort line and its stack.
    ev = Evidence()
    ev.feed(0, "Abort(609824142) on node 0 (rank 0 in comm 0): Fatal error in "
               "internal_Allreduce_c: Message truncated, error stack:")
    for line in MPICH_STACK:
        ev.feed(0, line)
    report = diagnose([JobEnd("low", CLUSTER, 1, "exited with status 1", ev)])
    assert report.headline == (
        "rank 0 (low:0) aborted: Fatal error in internal_Allreduce_c: Message truncated: "
        "MPI_Allreduce_c(count=4, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD) failed: Message from "
        "rank 1 and tag 14 truncated; 16 bytes received but buffer size is 32"
    )


def lost_everywhere() -> list[JobEnd]:
    return [
        JobEnd("low", CLUSTER, 1, "exited with status 1",
               raised(1, LOST.format(v=1, c="low", l=1)), 0, 0),
        JobEnd("high", CLUSTER, 1, "exited with status 1",
               raised(0, LOST.format(v=2, c="high", l=0)), 2, 1),
    ]  # fmt: skip


def test_a_stopped_forwarder_is_the_cause_not_the_ranks_that_lost_it():
    report = diagnose(lost_everywhere(), PIDS, forwarder_states={0: "T"})
    assert report.lines[0] == (
        "forwarder 'fwd0' (pid 6700) is stopped (SIGSTOP): it stopped answering"
    )
    assert report.lines[1].startswith("2 ranks failed as a consequence: rank 1 (low:1) ")
    assert report.status == 69


def test_a_wedged_or_vanished_forwarder_is_named_too():
    report = diagnose(lost_everywhere(), PIDS, forwarder_states={0: "S"})
    assert report.headline == (
        "forwarder 'fwd0' is still running but stopped answering (wedged)"
    )
    report = diagnose(lost_everywhere(), PIDS, forwarder_states={0: None})
    assert report.headline == "forwarder 'fwd0' is gone: it stopped answering"
    # Without its state (no pid file), the ranks' words are all there is.
    assert diagnose(lost_everywhere(), PIDS).headline.startswith("rank 1 (low:1) raised ")


def test_the_second_of_several_forwarders():
    lost = LOST.format(v=1, c="low", l=1).replace("lost the forwarder", "lost forwarder 1")
    end = JobEnd("low", CLUSTER, 1, "exited with status 1", raised(1, lost))
    pids = Pids(PIDS.ranks, {0: 6700, 1: 6701})
    report = diagnose([end], pids, forwarder_states={0: "S", 1: "T"})
    assert report.headline == "forwarder 'fwd1' is stopped (SIGSTOP): it stopped answering"


def test_signals_give_the_shells_status():
    banner = ["=   PID 6718 RUNNING AT vm", "=   KILLED BY SIGNAL: 9 (Killed)"]
    ev = Evidence()
    for line in banner:
        ev.feed(None, line)
    assert diagnose([JobEnd("high", CLUSTER, 9, "exited with status 9", ev, 2)], PIDS).status == 137
    # A forwarder that failed by itself, not by a signal, is no program's status.
    ev = Evidence()
    ev.feed(None, "=   PID 6700 RUNNING AT vm")
    ev.feed(None, "=   EXIT CODE: 3")
    report = diagnose([JobEnd("fwd0", FORWARDER, 3, "exited with status 3", ev)], PIDS)
    assert (report.headline, report.status) == ("forwarder 'fwd0' exited with status 3", 69)


def test_a_rank_without_pid_file_is_named_by_its_own_words():
    # --no-mpi4py-hook: the rank fails at import, before it joins (so before its pid file).
    ev = Evidence()
    for line in ["=   PID 4242 RUNNING AT vm", "=   EXIT CODE: 1"]:
        ev.feed(None, line)
    ev.feed(1, "Traceback (most recent call last):")
    ev.feed(1, "ImportError: mmpi-run started this rank with the mpi4py hook off")
    (line,) = diagnose([JobEnd("low", CLUSTER, 1, "exited with status 1", ev)]).lines
    assert line == (
        "rank 1 (low:1) raised ImportError: mmpi-run started this rank with the mpi4py hook off; "
        "cluster 'low' exited with status 1"
    )


def test_a_syntax_error_in_the_program_is_what_the_rank_raised():
    ev = Evidence()
    for line in ['  File "/home/me/prog.py", line 2', "    x = (1,", "        ^",
                 "SyntaxError: '(' was never closed"]:
        ev.feed(0, line)
    assert ev.exception(0) == "SyntaxError: '(' was never closed"


# -- failure reports from what Hydra printed: who is the cause -------------------------------

def evidence(*lines: tuple[int | None, str] | str) -> Evidence:
    """Evidence from lines; a bare string is mpiexec's own line (no rank)."""
    ev = Evidence()
    for line in lines:
        rank, text = (None, line) if isinstance(line, str) else line
        ev.feed(rank, text)
    return ev


def test_killed_rank_is_the_cause_not_the_forwarder_that_crashed_first():
    ends = [
        JobEnd("fwd0", FORWARDER, 6, "exited with status 6", evidence(*FORWARDER_CRASH), 0, 0),
        JobEnd("high", CLUSTER, 9, "exited with status 9", evidence(*BANNER_KILLED), 2, 1),
    ]
    report = diagnose(ends, PIDS)
    assert report.lines == [
        "rank 2 (high:0, pid 6718) was killed by signal 9 (SIGKILL); "
        "cluster 'high' exited with status 9",
        "then forwarder 'fwd0' (pid 6700) aborted (SIGABRT, exit status 6) "
        "after losing rank 3 (high:1, pid 6719)",
    ]
    assert report.status == 137  # as in the shell, though Hydra's own status is 9
    assert report.headline == "rank 2 (high:0) was killed by signal 9 (SIGKILL)"


def test_rank_that_raised_is_named_by_its_abort_line():
    ev = evidence(*((1, t) for t in TRACEBACK), (1, ABORT_1))
    end = JobEnd("high", CLUSTER, 1, "exited with status 1", ev, first_vrank=2)
    assert diagnose([end], PIDS).lines == [
        "rank 3 (high:1, pid 6719) raised RuntimeError: injected failure on rank 3; "
        "cluster 'high' exited with status 1"
    ]
    # Without pid files (the rank died before writing one) the vrank comes from the plan;
    # the recap names the exception (its message is in the line above).
    assert diagnose([end]).headline == "rank 3 (high:1) raised RuntimeError"
    # The abort line alone, as mpiexec's own output, still names the rank.
    end = JobEnd("high", CLUSTER, 1, "exited with status 1", evidence(ABORT_1), first_vrank=2)
    assert diagnose([end]).headline == "rank 3 (high:1) called MPI_Abort (code 1)"


def test_rank_that_called_sys_exit():
    ev = evidence(
        (1, "mmpi: rank 1 (low:1) called sys.exit(3) before the job finished; aborting"),
        (1, ABORT_1.replace("(1)", "(3)")),
    )
    report = diagnose([JobEnd("low", CLUSTER, 3, "exited with status 3", ev)])
    assert report.lines == ["rank 1 (low:1) called sys.exit(3); cluster 'low' exited with status 3"]
    assert report.status == 3


def test_ranks_that_lost_the_forwarder_are_its_consequence():
    lost = "mmpi.errors.ForwarderLost: rank 0 (low cluster, local rank 0): lost the forwarder: ..."
    abort = ABORT_1.replace("rank 1", "rank 0")
    low = evidence(*((0, t) for t in TRACEBACK[:3]), (0, lost), (0, abort))
    fwd = evidence(*BANNER_KILLED[:3], "=   PID 6700 RUNNING AT vm", *BANNER_KILLED[4:])
    report = diagnose(
        [
            JobEnd("low", CLUSTER, 1, "exited with status 1", low, 0, 0),
            JobEnd("fwd0", FORWARDER, 9, "exited with status 9", fwd, 0, 1),
        ],
        PIDS,
    )
    assert report.lines == [
        "forwarder 'fwd0' (pid 6700) was killed by signal 9 (SIGKILL, exit status 9)",
        f"1 rank failed as a consequence: rank 0 (low:0) raised {lost}",
    ]
    assert report.status == 137


def test_unknown_pid_and_old_banner_format():
    ev = evidence("=   PID 4242 RUNNING AT node7", "=   KILLED BY SIGNAL: 11 (Segmentation fault)")
    (line,) = diagnose([JobEnd("high", CLUSTER, 139, "exited with status 139", ev)], PIDS).lines
    assert line == (
        "a rank of cluster 'high' (pid 4242 on node7) was killed by signal 11 (SIGSEGV); "
        "cluster 'high' exited with status 139"
    )


def test_a_job_that_says_nothing_is_reported_as_before():
    report = diagnose([JobEnd("high", CLUSTER, 3, "exited with status 3", Evidence())])
    assert report.lines == ["cluster 'high' exited with status 3"]


def test_stdout_between_traceback_lines_is_not_the_exception():
    ev = Evidence()
    ev.feed(1, TRACEBACK[0], "stderr")
    ev.feed(1, "rank 3: injecting raise", "stdout")  # the reader threads race
    for text in TRACEBACK[1:]:
        ev.feed(1, text, "stderr")
    assert ev.exceptions == {1: "RuntimeError: injected failure on rank 3"}


def test_a_rank_that_died_before_its_pid_file_is_named_by_its_ucx_log_lines():
    ucx = (
        "[1795263317.010223] [vm:3367 :0]          select.c:657  UCX  ERROR   no active messages "
        "transport to <no debug data>: self/memory - iface id and iface address differ"
    )
    ev = evidence(
        (0, ucx),
        *BANNER_KILLED[:3],
        "=   PID 3367 RUNNING AT vm",
        "=   EXIT CODE: 11",
        "YOUR APPLICATION TERMINATED WITH THE EXIT STRING: Segmentation fault (signal 11)",
    )
    (line,) = diagnose([JobEnd("low", CLUSTER, 11, "exited with status 11", ev)], PIDS).lines
    assert line.startswith("rank 0 (low:0, pid 3367) was killed by signal 11 (SIGSEGV); ")


# -- the rank that failed first is the cause -------------------------------------------------

TRUNCATED = ("mmpi.errors.TruncationError: Recv on rank 3: message from rank 0 with tag 7 has "
             "100 bytes but the receive buffer holds only 10 (MPI_ERR_TRUNCATE)")
GONE_3 = ("mmpi.errors.RankGone: Barrier on rank 2: rank 3 has already finalized (or exited) "
          "after 0 collective call(s); this is call 1, which it will never join")


def test_a_cluster_mate_that_lost_the_cause_is_not_the_cause():
    # Rank 2 (high:0) learnt that rank 3 had gone before Hydra ended it: its RankGone is
    # printed by the lower local rank, but rank 3's own words are the cause.
    ev = raised(0, GONE_3, raised(1, TRUNCATED))
    report = diagnose([JobEnd("high", CLUSTER, 1, "exited with status 1", ev, 2)], PIDS)
    assert report.lines == [
        f"rank 3 (high:1, pid 6719) raised {TRUNCATED}; cluster 'high' exited with status 1",
        f"1 other rank failed as a consequence: rank 2 (high:0) raised {GONE_3}",
    ]
    assert (report.cause_rank, report.headline) == (("high", 1),
                                                    "rank 3 (high:1) raised TruncationError")
    assert report.cause.said == TRUNCATED  # the line its traceback ends with


def test_sys_exit_beats_the_cluster_mate_it_left_in_a_collective():
    ev = raised(0, GONE_3, evidence(
        (1, "mmpi: rank 3 (high:1) called sys.exit(3) before the job finished; aborting"),
        (1, ABORT_1.replace("(1)", "(3)"))))
    report = diagnose([JobEnd("high", CLUSTER, 3, "exited with status 3", ev, 2)], PIDS)
    assert report.lines[0] == (
        "rank 3 (high:1, pid 6719) called sys.exit(3); cluster 'high' exited with status 3")
    assert report.status == 3


def test_the_cause_may_be_in_a_job_mmpi_run_stopped():
    # The cluster whose ranks lost rank 3 exited first; rank 3's own cluster was still being
    # taken down by its mpiexec when mmpi-run stopped it.
    low = raised(1, GONE_3.replace("rank 2", "rank 1"), raised(0, GONE_3.replace("rank 2",
                                                                                 "rank 0")))
    high = evidence(*((1, t) for t in ["Traceback (most recent call last):", TRUNCATED]),
                    (1, ABORT_1))
    report = diagnose([JobEnd("low", CLUSTER, 1, "exited with status 1", low)], PIDS,
                      stopped=[JobEnd("high", CLUSTER, 0, "was stopped", high, 2, running=True)])
    assert report.lines[0] == f"rank 3 (high:1, pid 6719) raised {TRUNCATED}"
    assert report.lines[1].startswith("2 other ranks failed as a consequence: rank 0 (low:0) ")
    assert report.status == 1
    # sys.exit(N) there gives N, as its job would have
    exit5 = evidence((1, "mmpi: rank 3 (high:1) called sys.exit(5) before the job finished; "
                         "aborting"))
    report = diagnose([JobEnd("low", CLUSTER, 1, "exited with status 1", low)], PIDS,
                      stopped=[JobEnd("high", CLUSTER, 0, "was stopped", exit5, 2, running=True)])
    assert (report.cause_rank, report.status) == (("high", 1), 5)


def test_of_two_ranks_that_raised_the_first_to_say_so_is_the_cause():
    ev = raised(0, "ValueError: second", raised(1, "KeyError: 'first'"))
    end = JobEnd("high", CLUSTER, 1, "exited with status 1", ev, 2)
    assert diagnose([end], PIDS).cause_rank == ("high", 0)  # nothing else to go by
    report = diagnose([end], PIDS, failing=[("high", 1), ("high", 0)])
    assert report.cause_rank == ("high", 1)
    # across jobs too
    low = raised(0, "ValueError: second")
    ends = [JobEnd("low", CLUSTER, 1, "exited with status 1", low, 0, 0),
            JobEnd("high", CLUSTER, 1, "exited with status 1", raised(1, "KeyError: 'x'"), 2, 1)]
    assert diagnose(ends, PIDS).cause_rank == ("low", 0)
    assert diagnose(ends, PIDS, failing=[("high", 1), ("low", 0)]).cause_rank == ("high", 1)


def test_a_banner_naming_a_rank_that_lost_another_gives_way_to_the_others_words():
    ev = raised(0, GONE_3, raised(1, TRUNCATED))
    for line in ["=   PID 6718 RUNNING AT vm", "=   EXIT CODE: 1"]:
        ev.feed(None, line)
    report = diagnose([JobEnd("high", CLUSTER, 1, "exited with status 1", ev, 2)], PIDS)
    assert report.cause_rank == ("high", 1)


NOT_BRIDGED = ("mmpi.errors.NotBridged: Win.Allocate_shared on a communicator across the "
               "zipper is not bridged: memory cannot be shared between two clusters")


def test_a_message_every_rank_printed_is_given_once():
    low = raised(1, NOT_BRIDGED, raised(0, NOT_BRIDGED))
    high = raised(1, NOT_BRIDGED, raised(0, NOT_BRIDGED))
    report = diagnose([JobEnd("low", CLUSTER, 1, "exited with status 1", low, 0, 0),
                       JobEnd("high", CLUSTER, 1, "exited with status 1", high, 2, 1)], PIDS)
    text = NOT_BRIDGED.split(": ", 1)[1]
    assert [line.count(text) for line in report.lines] == [1, 0]
    assert report.lines[1] == ("3 other ranks failed too: rank 1 (low:1), rank 2 (high:0), "
                               "rank 3 (high:1) raised NotBridged")
    assert report.headline == "rank 0 (low:0) raised NotBridged"
