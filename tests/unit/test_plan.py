"""Tests of launch.plan: the exact argv/env contract, host handling, describe(), dry-run CLI."""
# ruff: noqa: D103  (test names say what they check)

from __future__ import annotations

import os
import shlex
from pathlib import Path

import pytest
from plans import DIR, PY, clusters, error_of, plan_for

from launch import launcher
from launch.cli import main
from launch.config import load
from launch.plan import CLUSTER, FORWARDER, PREPEND_PATTERN, Launch, Plan, make_plan
from mmpi.wire import rendezvous as rv

STARTUP = rv.startup_dir()


def test_default_plan_order_and_names():
    plan = plan_for()
    assert [(x.name, x.role) for x in plan.launches] == [
        ("fwd0", FORWARDER),
        ("low", CLUSTER),
        ("high", CLUSTER),
    ]
    assert plan.forwarders == plan.launches[:1] and plan.clusters == plan.launches[1:]


def test_forwarder_contract():
    (fwd,) = plan_for().forwarders
    assert fwd.argv == (
        "mpiexec", "-n", "1", PY, "-P", "-m", "forwarder",
        "--rendezvous", DIR, "--index", "0", "--connect-timeout", "60",
    )  # fmt: skip
    assert dict(fwd.env) == {rv.ENV_RENDEZVOUS: DIR}


def test_cluster_contract():
    plan = plan_for(command=["python", "-u", "prog.py", "--size", "8"])
    low, high = plan.clusters
    for launch, name, first in ((low, "low", 0), (high, "high", 2)):
        assert launch.argv == (
            "mpiexec", "-n", "2", "-prepend-pattern", PREPEND_PATTERN,
            "python", "-u", "prog.py", "--size", "8",
        )  # fmt: skip
        assert dict(launch.env) == {
            "MMPI_RENDEZVOUS": DIR,
            "MMPI_CLUSTER": name,
            "MMPI_CONNECT_TIMEOUT": "60",
            "MMPI_FORWARDERS": "1",
            "MMPI_MPI4PY_HOOK": "1",
            "PYTHONPATH": STARTUP,
            "MPIR_CVAR_CH4_COMM_CONNECT_TIMEOUT": "60",
        }
        assert (launch.ranks, launch.first_vrank) == (2, first)
    # Hydra hands its standard input to its rank 0: only virtual rank 0's job gets ours.
    assert (low.stdin, high.stdin) == (True, False)
    assert not plan.forwarders[0].stdin


def test_prefix_pattern_is_hydra_rank_prefix_with_a_chunk_mark():
    assert PREPEND_PATTERN == "\x1f[%r] "


def test_ranks_and_vranks_follow_the_overrides():
    low, high = plan_for(low=3, high=5).clusters
    assert low.argv[:3] == ("mpiexec", "-n", "3") and high.argv[:3] == ("mpiexec", "-n", "5")
    assert (low.first_vrank, high.first_vrank) == (0, 3)


def test_several_forwarders_on_several_zippers():
    data = clusters(
        zipper=[
            {"host": "zip1", "forwarders": 2, "interfaces": {"low": "eth0", "high": "ib0"}},
            {"host": "localhost"},
        ],
        timeouts={"connect": 2.5},
    )
    plan = plan_for(data)
    fwds = plan.forwarders
    assert [f.name for f in fwds] == ["fwd0", "fwd1", "fwd2"]
    assert [x.name for x in plan.launches] == ["fwd0", "fwd1", "fwd2", "low", "high"]
    assert fwds[0].argv[:5] == ("mpiexec", "-n", "1", "-hosts", "zip1")
    assert fwds[1].argv[-6:] == ("--rendezvous", DIR, "--index", "1", "--connect-timeout", "2.5")
    assert fwds[2].argv[:4] == ("mpiexec", "-n", "1", PY)  # localhost: no -hosts
    assert dict(fwds[0].env) == {"UCX_NET_DEVICES": "eth0,ib0", "MMPI_RENDEZVOUS": DIR}
    assert dict(fwds[2].env) == {"MMPI_RENDEZVOUS": DIR}
    for launch in plan.clusters:
        assert launch.env["MMPI_FORWARDERS"] == "3"
        assert launch.env["MMPI_CONNECT_TIMEOUT"] == "2.5"
        assert launch.env["MPIR_CVAR_CH4_COMM_CONNECT_TIMEOUT"] == "3"  # MPICH wants whole seconds


def test_forwarders_override():
    assert [f.name for f in plan_for(forwarders=3).forwarders] == ["fwd0", "fwd1", "fwd2"]


def test_forwarders_bound_to_their_cpus_in_turn():
    data = clusters(zipper=[{"host": "zip1", "forwarders": 3, "cpus": [2, 3]}, {}])
    fwds = plan_for(data).forwarders
    assert fwds[0].argv[:7] == ("mpiexec", "-n", "1", "-hosts", "zip1", "-bind-to", "user:2")
    assert fwds[1].argv[5:7] == ("-bind-to", "user:3")
    assert fwds[2].argv[5:7] == ("-bind-to", "user:2")  # wraps
    assert "-bind-to" not in fwds[3].argv  # no cpus: not bound


def test_placement_and_forwarder_cpus_overrides():
    plan = plan_for(placement="paired", forwarder_cpus=[1])
    assert plan.forwarders[0].argv[:6] == ("mpiexec", "-n", "1", "-bind-to", "user:1", PY)
    for launch in plan.clusters:
        assert launch.argv[3:7] == ("-bind-to", "core", "-map-by", "socket")


def test_hosts_hostfile_and_interface(tmp_path):
    hostfile = tmp_path / "high.hosts"
    hostfile.write_text("b1 slots=2\n")
    data = clusters(
        low={"hosts": ["a1", "a2"], "interface": "eth1"},
        high={"hostfile": str(hostfile)},
    )
    low, high = plan_for(data).clusters
    # Every host gets exactly the ranks the rank map puts there; Hydra's -f is not needed.
    assert low.argv[3:6] == ("-hosts", "a1:1,a2:1", "-prepend-pattern")
    assert high.argv[3:6] == ("-hosts", "b1:2", "-prepend-pattern")
    assert low.env["UCX_NET_DEVICES"] == "eth1"
    assert "UCX_NET_DEVICES" not in high.env


def test_only_localhost_means_no_hosts_flag():
    low, high = plan_for(clusters(low={"hosts": ["localhost", "localhost"]})).clusters
    assert "-hosts" not in low.argv and "-hosts" not in high.argv


def test_launcher_command_and_args():
    data = clusters(launcher={"command": "/opt/bin/mpiexec", "args": ["-launcher", "ssh"]})
    for launch in plan_for(data).launches:
        assert launch.argv[:3] == ("/opt/bin/mpiexec", "-launcher", "ssh")
        assert launch.argv[3] == "-n"


def test_env_layers():
    data = clusters(
        low={"env": {"A": "low", "MPIR_CVAR_CH4_COMM_CONNECT_TIMEOUT": 9}},
        env={"A": "job", "B": "job"},
    )
    plan = plan_for(data)
    low, high = plan.clusters
    assert (low.env["A"], low.env["B"], high.env["A"]) == ("low", "job", "job")
    assert low.env["MPIR_CVAR_CH4_COMM_CONNECT_TIMEOUT"] == "9"  # the user may override MPICH
    assert high.env["MPIR_CVAR_CH4_COMM_CONNECT_TIMEOUT"] == "60"
    assert plan.forwarders[0].env["B"] == "job"  # `env` is for every job
    # Only what the plan adds: the runner merges it over os.environ.
    added = {"A", "B", "MPIR_CVAR_CH4_COMM_CONNECT_TIMEOUT", "PYTHONPATH"}
    contract = {rv.ENV_RENDEZVOUS, rv.ENV_CLUSTER, rv.ENV_CONNECT_TIMEOUT, rv.ENV_FORWARDERS,
                rv.ENV_MPI4PY_HOOK}
    assert set(low.env) == added | contract


def test_mpi4py_hook_is_on_for_the_ranks_and_keeps_the_users_pythonpath():
    plan = plan_for(environ={"PYTHONPATH": "/mine:/also"})
    for launch in plan.clusters:
        assert launch.env["PYTHONPATH"] == f"{STARTUP}:/mine:/also"
        assert launch.env["MMPI_MPI4PY_HOOK"] == "1"
    # The forwarder uses mpi4py's own MPI: no hook, and the user's path as it is.
    assert "PYTHONPATH" not in plan.forwarders[0].env
    assert "MMPI_MPI4PY_HOOK" not in plan.forwarders[0].env
    # A PYTHONPATH in the job's env, or a cluster's, is the user's for that cluster.
    data = clusters(high={"env": {"PYTHONPATH": "/high"}}, env={"PYTHONPATH": "/job"})
    low, high = plan_for(data, environ={"PYTHONPATH": "/mine"}).clusters
    assert low.env["PYTHONPATH"] == f"{STARTUP}:/job"
    assert high.env["PYTHONPATH"] == f"{STARTUP}:/high"


def test_startup_dir_holds_the_hook():
    assert (Path(STARTUP) / "sitecustomize.py").is_file()
    assert "MMPI_MPI4PY_HOOK" in (Path(STARTUP) / "sitecustomize.py").read_text()


@pytest.mark.parametrize(
    ("data", "overrides"),
    [(None, {"mpi4py_hook": False}), (clusters(mpi4py_hook=False), {})],
)
def test_mpi4py_hook_off_by_flag_or_yaml(data, overrides):
    for launch in plan_for(data, **overrides).clusters:
        assert launch.env["MMPI_MPI4PY_HOOK"] == "0"
        assert launch.env["PYTHONPATH"] == STARTUP  # the hook still refuses mpi4py.MPI


def test_mpi4py_hook_key_must_be_a_boolean():
    assert error_of(clusters(mpi4py_hook="no")) == "mpi4py_hook: expected true or false, got 'no'"


def test_plan_is_frozen_and_pure():
    plan = plan_for()
    assert plan == plan_for()
    with pytest.raises(TypeError):
        plan.launches[0].env["X"] = "1"  # type: ignore[index]
    assert not os.path.exists(DIR)


def test_empty_command_is_refused():
    with pytest.raises(ValueError, match="empty"):
        make_plan(load(), [], DIR)


def test_launch_validation():
    with pytest.raises(ValueError, match="role"):
        Launch("x", "worker", ("true",))
    with pytest.raises(ValueError, match="unique"):
        Plan((Launch("x", CLUSTER, ("true",)), Launch("x", CLUSTER, ("true",))))


def test_describe_lists_commands_and_env():
    data = clusters(low={"hosts": ["a1:2"]})
    plan = plan_for(data, command=["python", "my prog.py"])
    text = plan.describe()
    assert text.startswith("mmpi-run plan: 3 jobs, started in this order\n")
    assert f"  $ mpiexec -n 1 {PY} -P -m forwarder --rendezvous {DIR} --index 0" in text
    command = "  $ mpiexec -n 2 -hosts a1:2 -prepend-pattern $'\\x1f[%r] ' python 'my prog.py'\n"
    assert command in text
    assert "    MMPI_CLUSTER=high\n" in text
    assert "low (cluster, 2 ranks, virtual ranks 0-1, standard input)" in text
    assert "high (cluster, 2 ranks, virtual ranks 2-3)" in text
    assert text.index("fwd0") < text.index("low (") < text.index("high (")


def test_dry_run(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # where make_dir() would create the directory
    argv = ["--low", "3", "--forwarders", "2", "--dry-run", "--", "python", "prog.py", "-x"]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert "--rendezvous '<rendezvous-dir>' --index 1" in out
    assert "MMPI_RENDEZVOUS='<rendezvous-dir>'" in out
    mpiexec = shlex.quote(launcher("mpiexec"))  # the one beside this Python
    assert f"  $ {mpiexec} -n 3 -prepend-pattern $'\\x1f[%r] ' python prog.py -x\n" in out
    assert "MMPI_FORWARDERS=2" in out
    assert f"    PYTHONPATH={STARTUP}" in out and "    MMPI_MPI4PY_HOOK=1\n" in out
    assert list(tmp_path.iterdir()) == []  # no rendezvous directory was made
    assert main(["--no-mpi4py-hook", "--dry-run", "python", "prog.py"]) == 0
    assert "    MMPI_MPI4PY_HOOK=0\n" in capsys.readouterr().out


def test_dry_run_with_config_file(capsys, tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text(
        "clusters: {low: {ranks: 1, hosts: [n1, n2]}, high: {ranks: 4, oversubscribe: true}}\n"
    )
    assert main(["-c", str(path), "--dry-run", "prog"]) == 0
    out = capsys.readouterr().out
    assert "-n 1 -hosts n1:1 -prepend-pattern" in out and "-n 4 -prepend-pattern" in out


@pytest.mark.parametrize("argv", [[], ["--dry-run"], ["--low", "2", "--"]])
def test_no_command_is_a_usage_error(capsys, argv):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "usage: mmpi-run" in err and "no command given" in err


def test_help_and_bad_option(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "--forwarders N" in out and "--no-mpi4py-hook" in out
    # The exit statuses, shell conventions first.
    assert "exit status:\n" in out and "128+N" in out and "137 SIGKILL" in out
    assert "\n  69       the job did not run bridged" in out
    assert "\n  70       internal error" in out
    assert main(["--low", "two", "prog"]) == 2
    assert "invalid int value" in capsys.readouterr().err


def test_interfaces_transport_and_wrappers():
    data = clusters(
        low={"interface": "vethA", "wrapper": ["ip", "netns", "exec", "nsA"]},
        high={"interface": "vethB", "env": {"UCX_TLS": "tcp"}},
        zipper=[{"interfaces": {"low": "za", "high": "zb"},
                 "wrapper": ["ip", "netns", "exec", "zip"]}],
        transport="tcp",
    )  # fmt: skip
    plan = plan_for(data)
    fwd, (low, high) = plan.forwarders[0], plan.clusters
    assert fwd.argv[:6] == ("ip", "netns", "exec", "zip", "mpiexec", "-n")
    assert low.argv[:6] == ("ip", "netns", "exec", "nsA", "mpiexec", "-n")
    assert high.argv[:2] == ("mpiexec", "-n")
    assert (fwd.env["UCX_NET_DEVICES"], low.env["UCX_NET_DEVICES"], high.env["UCX_NET_DEVICES"]) \
        == ("za,zb", "vethA", "vethB")  # fmt: skip
    # transport: tcp reaches all three jobs; a cluster's own env still has the last word.
    assert (fwd.env["UCX_TLS"], low.env["UCX_TLS"], high.env["UCX_TLS"]) == (
        "self,tcp", "self,tcp", "tcp",
    )  # fmt: skip
    assert "UCX_TLS" not in plan_for().clusters[0].env


def test_dry_run_shows_the_rank_map(capsys, tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text(
        "clusters:\n"
        "  low: {ranks: 3, placement: paired,\n"
        "        hosts: [{name: a1, sockets: 2, cores_per_socket: 2}]}\n"
        "  high: {ranks: 2, hosts: ['b1:1', 'b2:1']}\n"
    )
    assert main(["-c", str(path), "--dry-run", "prog"]) == 0
    out = capsys.readouterr().out
    table = out[out.index("rank map (placement: low paired, high block):\n") :].splitlines()[1:]
    assert [line.split() for line in table] == [
        ["vrank", "cluster", "local", "host", "socket", "core"],
        ["0", "low", "0", "a1", "0", "0"],
        ["1", "low", "1", "a1", "1", "0"],
        ["2", "low", "2", "a1", "0", "1"],
        ["3", "high", "0", "b1", "-", "-"],
        ["4", "high", "1", "b2", "-", "-"],
    ]
    path.write_text("clusters: {low: {ranks: 3, hosts: [a1]}, high: {ranks: 1}}\n")
    assert main(["-c", str(path), "--dry-run", "prog"]) == 1
    assert capsys.readouterr().err == (  # named by its file, as the file's own errors are
        f"mmpi-run: {path}: clusters.low: 3 ranks do not fit in 1 slots on [a1:1] "
        "(set oversubscribe: true to allow it)\n"
    )


def test_a_bug_in_mmpi_run_has_its_own_status(capsys, monkeypatch):
    def broken(args, command):
        raise RuntimeError("boom")

    monkeypatch.setattr("launch.cli._main", broken)
    assert main(["python", "prog.py"]) == 70
    assert "internal error (a bug in mmpi-run)" in capsys.readouterr().err


def test_progress_reaches_the_ranks_with_the_busiest_hosts_load():
    plan = plan_for(progress="auto")
    for launch in plan.launches:
        if launch.role == CLUSTER:
            assert launch.env["MMPI_PROGRESS"] == "auto"
            assert launch.env["MMPI_HOST_RANKS"] == "4"  # 2+2 and one forwarder, one host
            assert launch.env["MMPI_HOST_PROCS"] == "5"
    assert all("MMPI_PROGRESS" not in launch.env for launch in plan_for().launches)
    # said as off, it is off whatever the environment says
    assert {launch.env.get("MMPI_PROGRESS") for launch in plan_for(progress="off").launches
            if launch.role == CLUSTER} == {"off"}


def test_an_interface_this_host_lacks_is_named_before_anything_starts(tmp_path, capsys):
    job = tmp_path / "job.yaml"
    job.write_text("clusters:\n  low: {ranks: 1}\n  high: {ranks: 1}\n"
                   "zipper:\n  - interfaces: {low: lo, high: nosuchnic0}\n")
    assert main(["-c", str(job), "python", "prog.py"]) == 1
    err = capsys.readouterr().err
    assert "zipper[0].interfaces.high: this host has no network interface 'nosuchnic0'" in err
    assert "lo" in err.split("(it has ")[1]
