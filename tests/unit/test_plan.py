"""Tests of launch.plan: the exact argv/env contract, host handling, describe(), dry-run CLI."""
# ruff: noqa: D103  (test names say what they check)

from __future__ import annotations

import os

import pytest

from launch.cli import main
from launch.config import load, parse, with_overrides
from launch.plan import CLUSTER, FORWARDER, PREPEND_PATTERN, Launch, Plan, make_plan
from mmpi import _rendezvous as rv

PY = "/usr/bin/python3"
DIR = "/tmp/mmpi-test"


def plan_for(data: dict | None = None, command=("python", "prog.py"), **overrides) -> Plan:
    """Plan `command` for the job `data` (default: the embedded job) with CLI overrides."""
    config = load() if data is None else parse(data)
    return make_plan(with_overrides(config, **overrides), list(command), DIR, python=PY)


def clusters(low: dict | None = None, high: dict | None = None, **top) -> dict:
    """Job data with 2 ranks per cluster; `low`/`high` add cluster keys, `top` top-level keys."""
    return {
        "clusters": {"low": {"ranks": 2, **(low or {})}, "high": {"ranks": 2, **(high or {})}},
        **top,
    }


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
        "mpiexec", "-n", "1", PY, "-m", "forwarder",
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
            "MPIR_CVAR_CH4_COMM_CONNECT_TIMEOUT": "60",
        }
        assert (launch.ranks, launch.first_vrank) == (2, first)


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


def test_hosts_hostfile_and_interface():
    data = clusters(
        low={"hosts": ["a1", "a2"], "interface": "eth1"},
        high={"hostfile": "/etc/high.hosts"},
    )
    low, high = plan_for(data).clusters
    assert low.argv[3:6] == ("-hosts", "a1,a2", "-prepend-pattern")
    assert high.argv[3:6] == ("-f", "/etc/high.hosts", "-prepend-pattern")
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
    added = {"A", "B", "MPIR_CVAR_CH4_COMM_CONNECT_TIMEOUT"}
    contract = {rv.ENV_RENDEZVOUS, rv.ENV_CLUSTER, rv.ENV_CONNECT_TIMEOUT, rv.ENV_FORWARDERS}
    assert set(low.env) == added | contract


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
    plan = plan_for(clusters(low={"hosts": ["a1"]}), command=["python", "my prog.py"])
    text = plan.describe()
    assert text.startswith("mmpi-run plan: 3 jobs, started in this order\n")
    assert f"  $ mpiexec -n 1 {PY} -m forwarder --rendezvous {DIR} --index 0" in text
    assert "  $ mpiexec -n 2 -hosts a1 -prepend-pattern $'\\x1f[%r] ' python 'my prog.py'\n" in text
    assert "    MMPI_CLUSTER=high\n" in text
    assert "low (cluster, 2 ranks, virtual ranks 0-1)" in text
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
    assert "  $ mpiexec -n 3 -prepend-pattern $'\\x1f[%r] ' python prog.py -x\n" in out
    assert "MMPI_FORWARDERS=2" in out
    assert list(tmp_path.iterdir()) == []  # no rendezvous directory was made


def test_dry_run_with_config_file(capsys, tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text("clusters: {low: {ranks: 1, hosts: [n1, n2]}, high: {ranks: 4}}\n")
    assert main(["-c", str(path), "--dry-run", "prog"]) == 0
    out = capsys.readouterr().out
    assert "-n 1 -hosts n1,n2 -prepend-pattern" in out and "-n 4 -prepend-pattern" in out


@pytest.mark.parametrize("argv", [[], ["--dry-run"], ["--low", "2", "--"]])
def test_no_command_is_a_usage_error(capsys, argv):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "usage: mmpi-run" in err and "no command given" in err


def test_help_and_bad_option(capsys):
    assert main(["--help"]) == 0
    assert "--forwarders N" in capsys.readouterr().out
    assert main(["--low", "two", "prog"]) == 2
    assert "invalid int value" in capsys.readouterr().err
