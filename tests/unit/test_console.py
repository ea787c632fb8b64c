"""Tests of launch._console: output live, a failure's noise held back, everything logged."""
# ruff: noqa: D103  (test names say what they check)

from __future__ import annotations

import io

from launch._console import Console

TRACEBACK = [
    "Traceback (most recent call last):",
    '  File "prog.py", line 3, in <module>',
    "    comm.Barrier()",
    "mmpi.errors.RankGone: Barrier on rank 2: rank 1 has already finalized",
]
ABORT = "Abort(1) on node 0 (rank 0 in comm 0): application called MPI_Abort(MPI_COMM_WORLD, 1)"
BANNER = ["", "=" * 20, "=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES", "=" * 20]


def say(console: Console, job: str, rank: int | None, lines: list[str], stream="stderr",
        mpiexec=False) -> None:
    label = f"[{job}:{rank}] " if rank is not None else f"[{job}] "
    for text in lines:
        console.line((job, rank), stream, label, text, from_mpiexec=mpiexec)


def test_output_is_live_and_noise_is_held_but_logged(capsys):
    log = io.StringIO()
    console = Console(log)
    say(console, "low", 0, ["result 42"], "stdout")
    say(console, "high", 0, [*TRACEBACK, ABORT])
    say(console, "high", None, BANNER, "stdout", mpiexec=True)
    say(console, "fwd0", None, ["[vm:15130:0:15156]  cma_ep.c:85  process_vm_readv(pid=1) "
                                "returned -1: No such process"], mpiexec=True)
    say(console, "low", 1, ["a warning, not noise"])
    out, err = capsys.readouterr()
    assert out == "[low:0] result 42\n"
    assert err == "[low:1] a warning, not noise\n"
    assert len(log.getvalue().splitlines()) == 1 + len(TRACEBACK) + 1 + len(BANNER) + 1 + 1
    console.drop()
    assert capsys.readouterr() == ("", "")


def test_the_cause_is_shown_without_the_abort_notice_and_banner(capsys):
    console = Console()
    say(console, "high", 1, ["Traceback (most recent call last):", "  ...",
                             "RuntimeError: injected", ABORT])
    say(console, "high", 0, TRACEBACK)
    console.show(("high", 1))
    assert capsys.readouterr().err.splitlines() == [
        "[high:1] Traceback (most recent call last):",
        "[high:1]   ...",
        "[high:1] RuntimeError: injected",
    ]
    console.drop()
    console.release()
    assert capsys.readouterr() == ("", "")


def test_an_error_stack_and_a_chained_traceback_are_one_block(capsys):
    console = Console()
    say(console, "low", 1, [
        "Traceback (most recent call last):", "  x",
        "mpi4py.MPI.Exception: Other MPI error, error stack:",
        "internal_Test(109)....: MPI_Test(request=0x7f) failed",
        "MPIDU_Sched_progress_state(1152): Other MPI error",
        "",
        "During handling of the above exception, another exception occurred:",
        "",
        "Traceback (most recent call last):", "  y", "KeyError: 'z'",
    ])  # fmt: skip
    assert capsys.readouterr().err == ""
    say(console, "low", 1, ["carried on"])  # it survived: what it held comes first, in order
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "[low:1] Traceback (most recent call last):"
    assert err[-2:] == ["[low:1] KeyError: 'z'", "[low:1] carried on"]
    assert len(err) == 12


def test_on_success_everything_held_is_shown_in_order(capsys):
    console = Console()
    say(console, "low", 0, TRACEBACK[:2])
    say(console, "high", 0, TRACEBACK[:1])
    say(console, "low", 0, TRACEBACK[2:])
    console.release()
    err = capsys.readouterr().err.splitlines()
    assert err == [
        "[low:0] " + TRACEBACK[0],
        "[low:0] " + TRACEBACK[1],
        "[high:0] " + TRACEBACK[0],
        "[low:0] " + TRACEBACK[2],
        "[low:0] " + TRACEBACK[3],
    ]


def test_verbose_shows_everything_at_once(capsys):
    console = Console(verbose=True)
    say(console, "high", 0, [*TRACEBACK, ABORT])
    say(console, "high", None, BANNER, "stdout", mpiexec=True)
    out, err = capsys.readouterr()
    assert len(err.splitlines()) == len(TRACEBACK) + 1 and len(out.splitlines()) == len(BANNER)


def test_a_rank_that_prints_equals_signs_is_not_hydra(capsys):
    console = Console()
    say(console, "low", 0, ["=" * 10, "=   a table"], "stdout")
    assert capsys.readouterr().out == "[low:0] ==========\n[low:0] =   a table\n"


SYNTAX = ['  File "/home/me/prog.py", line 2', "    x = (1,", "        ^",
          "SyntaxError: '(' was never closed"]


def test_a_syntax_error_is_held_like_a_traceback(capsys):
    console = Console()
    say(console, "low", 0, SYNTAX)
    say(console, "low", 1, SYNTAX)
    assert capsys.readouterr() == ("", "")
    console.show(("low", 0))
    assert capsys.readouterr().err.splitlines() == [f"[low:0] {t}" for t in SYNTAX]
    console.drop()


def test_open_mpi_notices_are_held_back_but_logged(capsys):
    log = io.StringIO()
    console = Console(log)
    dashes = "-" * 74
    say(console, "high", None, [dashes, "prte has exited due to process rank 0 with PID 0 on",
                                "", dashes], mpiexec=True)
    say(console, "fwd0", 0, ["[vm:00000] *** An error occurred in Socket closed"])
    say(console, "low", 0, ["a rank's own line"])
    assert capsys.readouterr().err.splitlines() == ["[low:0] a rank's own line"]
    console.drop()  # the job failed: its report stands for them
    assert capsys.readouterr() == ("", "")
    assert "prte has exited" in log.getvalue() and "*** An error" in log.getvalue()


def test_a_failed_jobs_own_lines_are_shown_but_not_open_mpis_box(capsys):
    # a job blamed as a whole (its ranks said nothing mmpi-run could pin on one of them)
    console = Console(io.StringIO())
    dashes = "-" * 74
    say(console, "low", None, [*TRACEBACK, dashes, "prte detected that one or more processes",
                               "   Exit code:    1", dashes], mpiexec=True)
    assert capsys.readouterr().err == ""
    console.show(("low", None))
    assert capsys.readouterr().err.splitlines() == [f"[low] {t}" for t in TRACEBACK]


def test_the_cause_is_shown_without_mmpis_frames_and_the_line_the_report_quoted(capsys):
    import mmpi

    inside = mmpi.__file__.replace("__init__.py", "_api/p2p_methods.py")
    error = ("mmpi.errors.TruncationError: Recv on rank 3: message from rank 0 with tag 7 "
             "has 100 bytes but the receive buffer holds only 10 (MPI_ERR_TRUNCATE)")
    console = Console()
    say(console, "high", 1, [
        "Traceback (most recent call last):",
        '  File "/home/me/prog.py", line 11, in <module>',
        "    comm.Recv(buf, src, 7)",
        f'  File "{inside}", line 209, in Recv',
        "    raise op.error",
        "    ^^^^^^^^^^^^^^",
        error,
        ABORT,
    ])
    console.show(("high", 1), omit=error)
    assert capsys.readouterr().err.splitlines() == [
        "[high:1] Traceback (most recent call last):",
        '[high:1]   File "/home/me/prog.py", line 11, in <module>',
        "[high:1]     comm.Recv(buf, src, 7)",
    ]
