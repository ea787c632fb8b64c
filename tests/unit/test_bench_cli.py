"""Tests of the mmpi-bench driver's pure parts: sizes, planning, output parsing, usage errors."""
# ruff: noqa: D103  (test names say what they check)

from __future__ import annotations

import argparse
import sys

import pytest

from bench import cli
from bench._catalog import BENCHES, COLL_SIZES, GROUPS, P2P_SIZES

PY = "/usr/bin/python3"
RUN = ("/bin/mmpi-run",)


@pytest.mark.parametrize("text,sizes", [
    ("8,1M", (8, 1 << 20)),
    ("64K, 1KiB ,4MB,8", (8, 1024, 65536, 4 << 20)),
    ("1,1,2", (1, 2)),
    ("1g", (1 << 30,)),
])
def test_parse_sizes(text, sizes):
    assert cli.parse_sizes(text) == sizes


@pytest.mark.parametrize("text", ["", "8,", "1.5K", "-8", "0", "8X"])
def test_parse_sizes_rejects(text):
    with pytest.raises(argparse.ArgumentTypeError):
        cli.parse_sizes(text)


def test_default_sizes_follow_osu():
    assert P2P_SIZES[0] == 1 and P2P_SIZES[-1] == 4 << 20
    assert COLL_SIZES[0] == 1 and COLL_SIZES[-1] == 1 << 20
    assert all(b == 2 * a for a, b in zip(COLL_SIZES, COLL_SIZES[1:], strict=False))


def test_plan_specs_defaults_sizes_and_float_reductions():
    specs = cli.plan_specs(["latency", "barrier", "allreduce"], (1, 8, 65536))
    assert specs == {"latency": "latency=1,8,65536", "barrier": "barrier",
                     "allreduce": "allreduce=8,65536"}  # float32: no 1-byte reduction
    assert cli.plan_specs(["allreduce"], (1, 2)) == {}
    full = cli.plan_specs(["bcast"], None)["bcast"]
    assert full == "bcast=" + ",".join(str(1 << i) for i in range(21))


def test_plan_runs_native_then_across_jobs_then_bridged_per_group():
    specs = cli.plan_specs(["latency", "allreduce", "pairs"], (8,))
    runs = cli.plan_runs(specs, 3, 2, ("--reps", "3"), mmpi_run=RUN, mpiexec="/bin/mpiexec",
                         python=PY)
    assert [(r.mode, r.group) for r in runs] == [
        ("native", "p2p"), ("across", "p2p"), ("bridged", "p2p"), ("native", "world"),
        ("bridged", "world"), ("native", "pairs"), ("bridged", "pairs")]
    worker = (PY, "-P", "-m", "bench.worker")
    assert runs[0].argv == ("/bin/mpiexec", "-n", "2", *worker, "--low", "1", "--reps", "3",
                            "latency=8")
    assert runs[1].argv == (PY, "-P", "-m", "bench.across", "/bin/mpiexec", *worker, "--low",
                            "1", "--reps", "3", "latency=8")
    assert runs[2].argv == (*RUN, "--low", "1", "--high", "1", *worker, "--low", "1",
                            "--reps", "3", "latency=8")
    assert runs[3].argv == ("/bin/mpiexec", "-n", "5", *worker, "--low", "3", "--reps", "3",
                            "allreduce=8")
    assert runs[4].argv[:5] == (*RUN, "--low", "3", "--high", "2")
    assert runs[4].specs == ("allreduce=8",)
    # concurrent pairs have their own layout: --pairs ranks on each side (default 4)
    assert runs[5].argv == ("/bin/mpiexec", "-n", "8", *worker, "--low", "4", "--reps", "3",
                            "pairs=8")
    assert runs[6].argv[:5] == (*RUN, "--low", "4", "--high", "4")
    small = cli.plan_runs(specs, 3, 2, (), mmpi_run=RUN, mpiexec="/bin/mpiexec", python=PY,
                          pairs=2)
    assert small[6].argv[:5] == (*RUN, "--low", "2", "--high", "2")


def test_plan_runs_binds_native_ranks_and_bridged_ones_paired():
    specs = cli.plan_specs(["latency", "barrier", "pairs"], (8,))
    runs = cli.plan_runs(specs, 2, 2, (), mmpi_run=RUN, mpiexec="/bin/mpiexec", python=PY,
                         bind_cpus=[0, 1, 2, 3], forwarders=2)
    native, across, bridged = runs[0], runs[1], runs[2]
    assert native.argv[:5] == ("/bin/mpiexec", "-n", "2", "-bind-to", "core")
    assert "-bind-to" not in across.argv  # two one-rank jobs: each would take core 0
    assert bridged.argv[:len(RUN) + 4] == (*RUN, "--placement", "paired", "--forwarder-cpus",
                                           "3,2")  # the last cores, away from the leaders
    assert runs[3].argv[:5] == ("/bin/mpiexec", "-n", "4", "-bind-to", "core")
    assert runs[4].argv[len(RUN):len(RUN) + 2] == ("--placement", "paired")
    # the pairs' layout stays unbound (binding put each pair on one core: slower)
    assert runs[5].argv[:3] == ("/bin/mpiexec", "-n", "8") and "-bind-to" not in runs[5].argv
    assert runs[6].argv[:len(RUN) + 1] == (*RUN, "--low")
    # a restricted affinity: the forwarders take the last CPUs this process may use
    some = cli.plan_runs(specs, 2, 2, (), mmpi_run=RUN, mpiexec="/bin/mpiexec", python=PY,
                         bind_cpus=[2, 5], forwarders=3)
    assert some[2].argv[len(RUN) + 3] == "5,2,5"
    unbound = cli.plan_runs(specs, 2, 2, (), mmpi_run=RUN, mpiexec="/bin/mpiexec", python=PY)
    assert not any("-bind-to" in r.argv or "--placement" in r.argv for r in unbound)


def test_open_mpi_runs_carry_its_environment_and_the_across_baseline_too():
    env = (("OPAL_PREFIX", "/ompi"),)
    runs = cli.plan_runs({"latency": "latency=8"}, 1, 1, (), mmpi_run=RUN,
                         mpiexec="/ompi/bin/mpiexec", python=PY, native_env=env)
    assert [r.mode for r in runs] == ["native", "across", "bridged"]
    assert "--oversubscribe" in runs[0].argv and runs[0].env == env
    # bench.across starts a DVM for its two jobs; it needs Open MPI's environment as well
    assert runs[1].argv[:5] == (PY, "-P", "-m", "bench.across", "/ompi/bin/mpiexec")
    assert runs[1].env == env


def test_plan_runs_skips_empty_groups():
    runs = cli.plan_runs({"barrier": "barrier"}, 2, 2, (), mmpi_run=RUN, mpiexec="mpiexec")
    assert [(r.mode, r.group) for r in runs] == [("native", "world"), ("bridged", "world")]


def test_every_benchmark_belongs_to_a_group():
    assert {b.group for b in BENCHES.values()} <= set(GROUPS)
    assert [n for n, b in BENCHES.items() if b.group == "p2p"] == ["latency", "bw", "bibw", "loggp"]


@pytest.mark.parametrize("line", [
    'MMPI-BENCH {"type": "done"}',
    '[low:0 v0] MMPI-BENCH {"type": "done"}\n',
    'noise before MMPI-BENCH {"type": "done"}',
])
def test_parse_line_finds_the_marker_anywhere(line):
    assert cli.parse_line(line) == {"type": "done"}


@pytest.mark.parametrize("line", [
    "[fwd0] mmpi-forwarder[0]: done", "MMPI-BENCH {truncated", 'MMPI-BENCH [1, 2]',
    'MMPI-BENCH {"no": "type"}', "MMPI-BENCHMARK {}"])
def test_parse_line_ignores_other_output(line):
    assert cli.parse_line(line) is None


@pytest.mark.parametrize("argv", [[], ["nosuch"], ["latency", "--low", "0"],
                                  ["latency", "--sizes", "abc"], ["--iters-scale", "0", "bw"]])
def test_usage_errors_exit_2(argv, capsys):
    assert cli.main(argv) == 2
    assert "usage:" in capsys.readouterr().err


def test_plot_without_matplotlib_fails_before_running_anything(monkeypatch, capsys, tmp_path):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setattr(cli, "run_job", lambda *a, **k: pytest.fail("a job was started"))
    assert cli.main(["latency", "--plot", str(tmp_path / "p")]) == 1
    err = capsys.readouterr().err
    assert "matplotlib" in err and 'pip install "mmpi[plot]"' in err
    assert not (tmp_path / "p").exists()


def test_dry_run_prints_the_jobs(capsys):
    assert cli.main(["--all", "--dry-run", "--low", "3", "--high", "1", "--sizes", "8"]) == 0
    out = capsys.readouterr().out
    assert "# native p2p" in out and "# bridged world" in out
    assert "-n 4 " in out and "--low 3 --high 1 " in out
    assert "1:n=8" in out and "barrier" in out and "latency=8" in out


def test_failed_job_still_reports_and_exits_1(monkeypatch, tmp_path, capsys):
    def fake(run, timeout, **kw):
        out = cli.Outcome(run, status="ok", returncode=0,
                          env={"type": "env", "bridged": run.mode == "bridged"})
        if run.mode == "bridged":
            out.status, out.returncode, out.tail = "timeout", 143, ["stuck\n"]
        else:
            out.results = [{"type": "result", "bench": "barrier", "size": 0, "unit": "us",
                            "value": 5.0, "samples": [5.0], "iters": 10}]
        return out

    monkeypatch.setattr(cli, "run_job", fake)
    assert cli.main(["barrier", "--json", str(tmp_path / "o.json"), "-q"]) == 1
    cap = capsys.readouterr()
    assert "bridged world job timeout" in cap.err and "| stuck" in cap.err
    assert "5.00" in cap.out
    assert '"status": "timeout"' in (tmp_path / "o.json").read_text()


def test_from_json_reprints_tables_without_measuring(monkeypatch, tmp_path, capsys):
    from bench import report

    rows = report.merge({"native": [{"type": "result", "bench": "latency", "size": 8,
                                     "unit": "us", "value": 2.0, "iters": 5}],
                         "bridged": [{"type": "result", "bench": "latency", "size": 8,
                                      "unit": "us", "value": 5.0, "iters": 5}]})
    doc = report.document(rows, {"hostname": "h", "loadavg_start": [1.0, 2.0, 3.0]},
                          settings={}, layouts={"p2p": "two ranks"}, runs=[])
    path = report.write_json(tmp_path / "r.json", doc)
    monkeypatch.setattr(cli, "run_job", lambda *a, **k: pytest.fail("a job was started"))
    assert cli.main(["--from-json", str(path)]) == 0
    out = capsys.readouterr().out
    assert "# two ranks" in out and "load average before the first job: 1.00 2.00 3.00" in out
    assert ["8", "2.00", "5.00", "2.50"] in [ln.split() for ln in out.splitlines()]
    assert cli.main(["--from-json", str(tmp_path / "missing.json")]) == 1


def fake_run(mode: str, script: str) -> cli.Run:
    """Make a job that is a short Python script instead of an MPI worker."""
    return cli.Run(mode, "p2p", (sys.executable, "-c", script), ())


def test_run_job_reads_prefixed_records():
    script = (
        "print('[fwd0] hello')\n"
        "print('[low:0 v0] MMPI-BENCH {\"type\": \"env\", \"bridged\": true}')\n"
        "print('[low:0 v0] MMPI-BENCH {\"type\": \"result\", \"bench\": \"bw\", \"size\": 8,"
        " \"unit\": \"MB/s\", \"value\": 1.5, \"iters\": 3}')\n"
        "print('[low:0 v0] MMPI-BENCH {\"type\": \"done\"}')\n")
    seen = []
    out = cli.run_job(fake_run("bridged", script), 30, progress=lambda r, rec: seen.append(rec))
    assert out.status == "ok" and out.returncode == 0
    assert [r["value"] for r in out.results] == [1.5] and seen == out.results
    assert out.tail == ["[fwd0] hello\n"] and out.env["bridged"] is True


def test_run_job_flags_wrong_mode_and_missing_done():
    env_line = "print('MMPI-BENCH {\"type\": \"env\", \"bridged\": true}')\n"
    wrong = cli.run_job(fake_run("native", env_line + "print('MMPI-BENCH {\"type\": \"done\"}')"),
                        30)
    assert wrong.status == "failed" and "bridged=True" in wrong.tail[-1]
    assert cli.run_job(fake_run("bridged", env_line), 30).status == "failed"


def test_run_job_stops_a_job_that_overruns():
    import time

    t0 = time.monotonic()
    out = cli.run_job(fake_run("native", "import time; print('started', flush=True); "
                                         "time.sleep(60)"), 0.5)
    assert out.status == "timeout" and time.monotonic() - t0 < 15
    assert out.tail[0] == "started\n" and "timeout" in out.tail[-1]


def test_plan_runs_overlap_adds_native_with_mpich_async_progress():
    specs = cli.plan_specs(["iallreduce", "isendrecv"], (8, 1 << 20))
    assert specs == {"iallreduce": "iallreduce=8,1048576", "isendrecv": "isendrecv=8,1048576"}
    runs = cli.plan_runs(specs, 2, 2, (), mmpi_run=RUN, mpiexec="/bin/mpiexec", python=PY)
    assert [(r.mode, r.group) for r in runs] == [
        ("native", "overlap"), ("async", "overlap"), ("bridged", "overlap")]
    assert runs[1].env == (("MPIR_CVAR_ASYNC_PROGRESS", "1"),) and runs[0].env == ()
    assert runs[1].argv == runs[0].argv
    assert runs[2].argv[:5] == (*RUN, "--low", "2", "--high", "2")[:5]
