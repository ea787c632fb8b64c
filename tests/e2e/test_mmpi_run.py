"""mmpi-run end to end: unmodified mpi4py programs, separate worlds, stdin, condensed failures,
a stopped forwarder, a SIGKILLed mmpi-run, the shell's exit statuses. Real 2+2 jobs."""
# ruff: noqa: D103  (test names say what they check)

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import mmpi_run_cmd

from launch import hygiene

pytestmark = pytest.mark.mpi

E2E = Path(__file__).resolve().parent / "progs"
FAULTS = Path(__file__).resolve().parent.parent / "mpi" / "progs"


def env_for(tmp_path: Path) -> dict[str, str]:
    """Our environment, with the job's rendezvous directory made under `tmp_path`."""
    env = dict(os.environ, TMPDIR=str(tmp_path))
    env.pop("MMPI_RENDEZVOUS", None)
    return env


def mmpi_run(tmp_path: Path, *args: str, timeout: float = 60, stdin: str | None = None):
    """Run mmpi-run in `tmp_path` (its log goes there); return the process and seconds taken."""
    t0 = time.monotonic()
    p = subprocess.run(
        [*mmpi_run_cmd(), *args], capture_output=True, text=True, timeout=timeout,
        cwd=tmp_path, env=env_for(tmp_path), input=stdin,
        stdin=None if stdin is not None else subprocess.DEVNULL,
    )  # fmt: skip
    return p, time.monotonic() - t0


def ours(p: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in p.stderr.splitlines() if line.startswith("mmpi-run: ")]


def wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def rendezvous_of(tmp_path: Path) -> Path:
    wait_for(lambda: list(tmp_path.glob("mmpi-*")), 30, "the rendezvous directory")
    return next(tmp_path.glob("mmpi-*"))


# -- bad job files ------------------------------------------------------------------------------


@pytest.mark.timeout(60)
@pytest.mark.parametrize("data,problem", [
    (b"clusters:\n  low: {ranks: 2}\n\xff\n", "not UTF-8 text: byte 0xff at line 3, column 1"),
    (bytes(range(256)) * 4, "not a text file: it holds a NUL byte at line 1"),
    ("zipper: [{host: Zürich}]".encode("utf-16-be"), "not a text file: it holds a NUL byte at "
                                                    "line 1"),
], ids=["stray-byte", "binary", "utf-16-without-bom"])
def test_a_job_file_that_is_not_text_is_one_line_and_status_1(tmp_path, data, problem):
    (tmp_path / "job.yaml").write_bytes(data)
    p, _ = mmpi_run(tmp_path, "-c", "job.yaml", sys.executable, "-c", "pass")
    assert p.returncode == 1, p.stderr
    [line] = p.stderr.splitlines()
    assert line.startswith(f"mmpi-run: job.yaml: {problem}"), p.stderr
    assert "save it as UTF-8" in line


# -- unmodified mpi4py programs --------------------------------------------------------------------


@pytest.mark.timeout(90)
def test_an_unmodified_mpi4py_program_runs_bridged(tmp_path):
    p, _ = mmpi_run(tmp_path, sys.executable, str(E2E / "unmodified.py"))
    out = p.stdout + p.stderr
    assert p.returncode == 0, out
    worlds = sorted(re.findall(r"WORLD (\d) (\d) (\S+) (\S+)", p.stdout))
    # One world of 4 (not two of 2), the bridged communicator, a cross-cluster Allreduce.
    assert [w[:2] for w in worlds] == [(str(r), "4") for r in range(4)], out
    assert all(w[2].startswith("mmpi") and w[3] == "10" for w in worlds), out


@pytest.mark.timeout(90)
def test_without_the_hook_an_mpi4py_program_fails_at_once_saying_why(tmp_path):
    p, took = mmpi_run(tmp_path, "--no-mpi4py-hook", sys.executable, str(E2E / "unmodified.py"))
    out = p.stdout + p.stderr
    assert p.returncode == 1, out
    assert took < 20, f"took {took:.1f} s"
    assert "WORLD" not in p.stdout, out
    assert re.match(
        r"mmpi-run: rank \d \((low|high):\d\) raised ImportError: mmpi-run started this rank with "
        r"the mpi4py hook off \(--no-mpi4py-hook\), and the program imports mpi4py\.MPI directly: "
        r"it would run as a separate world of one cluster\.",
        ours(p)[0],
    ), out


@pytest.mark.timeout(90)
def test_a_program_that_never_joins_the_bridge_is_two_separate_worlds(tmp_path):
    p, took = mmpi_run(tmp_path, sys.executable, "-c", "print('hello from a world of my own')")
    out = p.stdout + p.stderr
    assert p.returncode == 69, out
    assert took < 10, f"took {took:.1f} s"  # not the forwarder's 10 s shutdown grace
    assert p.stdout.count("hello from a world of my own") >= 2, out
    assert re.match(
        r"mmpi-run: cluster '(low|high)' finished \(status 0\) but no rank joined the bridge: "
        r"the job ran as separate worlds, one per cluster, not as one of 4 ranks",
        ours(p)[0],
    ), out
    assert "did not exit" not in out


# -- standard input --------------------------------------------------------------------------------


@pytest.mark.timeout(90)
def test_standard_input_reaches_rank_0(tmp_path):
    p, _ = mmpi_run(tmp_path, sys.executable, str(E2E / "unmodified.py"), "--stdin",
                    stdin="hello\n")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "[low:0 v0] STDIN hello\n" in p.stdout, p.stdout + p.stderr


# -- failures: the cause in full, the consequences in a line, the rest in a log --------------------


@pytest.mark.timeout(90)
def test_the_cause_is_shown_and_the_consequences_counted(tmp_path):
    # Rank 1 leaves with `raise SystemExit(3)`; the three others fail in the Barrier (RankGone).
    prog = [sys.executable, str(FAULTS / "left_early.py"), "system-exit", "1", "condensed"]
    p, _ = mmpi_run(tmp_path, *prog)
    out = p.stdout + p.stderr
    assert p.returncode != 0, out
    # One traceback on the screen (the cause's), not one per rank.
    assert p.stderr.count("Traceback (most recent call last):") == 1, out
    assert "Abort(" not in p.stderr and "BAD TERMINATION" not in out, out
    lines = ours(p)
    assert any(
        re.match(r"mmpi-run: [23] other ranks failed as a consequence: rank \d \(\w+:\d\) raised "
                 r"mmpi\.errors\.RankGone: Barrier on rank \d: rank 1 has already finalized", x)
        for x in lines
    ), out
    # Everything is in the log, whose name comes last.
    log = Path(lines[-1].removeprefix("mmpi-run: the output of every rank and forwarder is in "))
    assert log.parent == tmp_path and log.name.startswith("mmpi-run."), out
    assert log.read_text().count("Traceback (most recent call last):") >= 2
    # --verbose shows it all.
    p, _ = mmpi_run(tmp_path, "--verbose", *prog)
    assert p.stderr.count("Traceback (most recent call last):") >= 2, p.stderr


# -- a stopped forwarder -------------------------------------------------------------------------


@pytest.mark.timeout(90)
def test_a_stopped_forwarder_is_named_as_such(tmp_path):
    run = subprocess.Popen(
        [*mmpi_run_cmd(), sys.executable, str(E2E / "talk.py"), "60"],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        cwd=tmp_path, env=env_for(tmp_path), start_new_session=True,
    )  # fmt: skip
    fwd = None
    try:
        rdv = rendezvous_of(tmp_path)
        wait_for(lambda: len(list(rdv.glob("rank.*.pid"))) == 4, 30, "the ranks to join")
        fwd = int((rdv / "forwarder.0.pid").read_text())
        time.sleep(0.5)  # traffic flows through it
        os.kill(fwd, signal.SIGSTOP)
        stopped_at = time.monotonic()
        out, err = run.communicate(timeout=40)
        took = time.monotonic() - stopped_at
    finally:
        if fwd is not None and hygiene.process_state(fwd) is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(fwd, signal.SIGCONT)
                os.kill(fwd, signal.SIGKILL)
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait()
    lines = [x for x in err.splitlines() if x.startswith("mmpi-run: ")]
    assert run.returncode == 69, out + err
    assert lines[0] == (
        f"mmpi-run: forwarder 'fwd0' (pid {fwd}) is stopped (SIGSTOP): it stopped answering"
    ), err
    assert "ranks failed as a consequence: " in lines[1] and "ForwarderLost" in lines[1], err
    # The ranks give up after MMPI_FORWARDER_TIMEOUT (5 s); then mmpi-run stops the rest.
    assert took < 15, f"took {took:.1f} s"
    wait_for(lambda: hygiene.process_state(fwd) is None, 5, "the stopped forwarder to go")


# -- nothing left behind, the shell's statuses -----------------------------------------------------


@pytest.mark.timeout(90)
def test_a_killed_mmpi_run_leaves_no_rendezvous_and_no_shm(tmp_path):
    before = hygiene.shm_files()
    run = subprocess.Popen(
        [*mmpi_run_cmd(), sys.executable, str(E2E / "talk.py"), "60"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        cwd=tmp_path, env=env_for(tmp_path), start_new_session=True,
    )  # fmt: skip
    try:
        rdv = rendezvous_of(tmp_path)
        wait_for(lambda: len(list(rdv.glob("rank.*.pid"))) == 4, 30, "the ranks to join")
        ranks = hygiene.read_pids(rdv).all()
        ours_new = hygiene.shm_files() - before  # the job's segments (and maybe others' jobs')
        run.kill()  # SIGKILL: mmpi-run can do nothing about it
        run.wait()
        killed_at = time.monotonic()
        wait_for(lambda: not rdv.exists(), 5, "the rendezvous directory to go")
        shm = Path(hygiene.SHM_GLOB).parent

        def left() -> set[str]:  # another job's segments, still mapped, are not ours to judge
            return (ours_new & hygiene.shm_files()) - hygiene.paths_in_use(shm)

        wait_for(lambda: not left(), 5, "the job's shm segments to go")
        took = time.monotonic() - killed_at
        wait_for(lambda: all(hygiene.process_state(p) is None for p in ranks), 5, "the ranks")
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait()
    assert took < 5
    assert ours_new, "the job made no shm segment: nothing was checked"


@pytest.mark.timeout(90)
def test_a_rank_killed_by_a_signal_gives_128_plus_the_signal(tmp_path):
    p, _ = mmpi_run(tmp_path, sys.executable, str(E2E / "kill_self.py"), "2", "9")
    out = p.stdout + p.stderr
    assert p.returncode == 137, out
    assert re.match(r"mmpi-run: rank 2 \(high:0, pid \d+\) was killed by signal 9 \(SIGKILL\)",
                    ours(p)[0]), out


@pytest.mark.timeout(90)
def test_files_of_the_users_named_like_our_parts_change_nothing(tmp_path):
    # A user's forwarder.py, launch.py, place.py, bench.py or nas_ports.py in the working
    # directory: mmpi-run's own processes never import them (python -P for the forwarder).
    for name in ("forwarder", "launch", "place", "bench", "nas_ports"):
        (tmp_path / f"{name}.py").write_text(f"raise SystemExit('SHADOWED {name}')\n")
    ring = Path(__file__).resolve().parents[2] / "examples" / "ring.py"
    p, _ = mmpi_run(tmp_path, "--low", "1", "--high", "2", sys.executable, str(ring))
    out = p.stdout + p.stderr
    assert p.returncode == 0, out
    assert "ring of 3 ranks OK" in out and "SHADOWED" not in out, out
    assert "relay compiled" in out or "relay python" in out, out
