"""Tests of launch.config: the embedded default, every kind of error with its key path."""
# ruff: noqa: D103  (test names say what they check)

from __future__ import annotations

import codecs
import textwrap

import pytest

from launch._overrides import with_overrides
from launch.config import (
    Cluster,
    ConfigError,
    Host,
    Zipper,
    load,
    loads,
    parse,
)
from mmpi.errors import MMPIError

MINIMAL = {"clusters": {"low": {"ranks": 2}, "high": {"ranks": 3}}}


def error_of(text: str) -> str:
    """Return the message of the ConfigError that loading `text` raises."""
    with pytest.raises(ConfigError) as info:
        loads(text)
    return str(info.value)


def test_default_job():
    config = load()
    # Both clusters share this machine: the default must not be limited to its cores.
    assert config.low == Cluster("low", 2, (Host("localhost"),), oversubscribe=True)
    assert config.high == Cluster("high", 2, (Host("localhost"),), oversubscribe=True)
    assert config.transport is None
    assert config.zipper == (Zipper("localhost", 1),)
    assert config.forwarders == 1
    assert config.launcher.command == "mpiexec" and config.launcher.args == ()
    assert config.timeouts.connect == 60
    assert dict(config.env) == {}


def test_minimal_job_gets_defaults():
    config = parse(MINIMAL)
    assert config.low.ranks == 2 and config.high.ranks == 3
    assert config.clusters == (config.low, config.high)
    assert config.zipper == (Zipper(),)


def test_full_job(tmp_path):
    (tmp_path / "hosts.txt").write_text("h1:2\n")
    path = tmp_path / "job.yaml"
    path.write_text(
        textwrap.dedent(
            """\
            launcher: {command: /opt/mpich/bin/mpiexec, args: [-launcher, ssh]}
            zipper:
              - host: zip1
                forwarders: 2
                interfaces: {low: eth0, high: ib0}
              - {host: zip2}
            clusters:
              low: {ranks: 4, hosts: [a1, a2], interface: eth0, env: {OMP_NUM_THREADS: 1}}
              high: {ranks: 1, hostfile: hosts.txt}
            env: {UCX_TLS: "self,tcp"}
            timeouts: {connect: 2.5}
            """
        )
    )
    config = load(path)
    assert config.launcher.args == ("-launcher", "ssh")
    assert config.zipper[0].interfaces == {"low": "eth0", "high": "ib0"}
    assert config.forwarders == 3
    assert config.low.hosts == (Host("a1"), Host("a2")) and config.low.hostfile is None
    assert dict(config.low.env) == {"OMP_NUM_THREADS": "1"}
    assert config.high.hosts == (Host("h1", 2),)
    assert config.high.hostfile == str(tmp_path / "hosts.txt")
    assert config.timeouts.connect == 2.5
    assert config.source == str(path)


def test_config_is_frozen():
    config = parse(MINIMAL)
    with pytest.raises(AttributeError):
        config.low = config.high  # type: ignore[misc]
    with pytest.raises(TypeError):
        config.low.env["X"] = "1"  # type: ignore[index]


def test_error_is_an_mmpi_error():
    assert issubclass(ConfigError, MMPIError)


OK = "clusters: {low: {ranks: 2}, high: {ranks: 2}}\n"  # prepend to test other top-level keys


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # unknown keys, at every level
        (OK + "clusterz: {}", "top level: unknown key 'clusterz'"),
        (OK + "launcher: {cmd: x}", "launcher: unknown key 'cmd'"),
        (OK + "zipper: [{hots: z}]", "zipper[0]: unknown key 'hots'"),
        (OK + "zipper: [{}, {interfaces: {mid: e}}]", "zipper[1].interfaces: unknown key 'mid'"),
        ("clusters: {low: {ranks: 1}, high: {ranks: 1}, mid: {}}", "clusters: unknown key 'mid'"),
        ("clusters: {low: {ranks: 1, host: [a]}, high: {ranks: 1}}",
         "clusters.low: unknown key 'host'"),
        (OK + "timeouts: {conect: 3}", "timeouts: unknown key 'conect'"),
        # wrong types and values
        ("clusters: {low: {ranks: 2}, high: {ranks: -1}}",
         "clusters.high.ranks: expected a positive integer, got -1"),
        ("clusters: {low: {ranks: 0}, high: {ranks: 1}}",
         "clusters.low.ranks: expected a positive integer, got 0"),
        ("clusters: {low: {ranks: true}, high: {ranks: 1}}",
         "clusters.low.ranks: expected a positive integer, got true"),
        ("clusters: {low: {ranks: '2'}, high: {ranks: 1}}",
         "clusters.low.ranks: expected a positive integer, got '2'"),
        ("clusters: {low: {ranks: 1, hosts: [a, 3]}, high: {ranks: 1}}",
         "clusters.low.hosts[1]: expected a host name, 'name:slots' or a mapping with 'name', "
         "got 3"),
        ("clusters: {low: {ranks: 1, hosts: 'a,b'}, high: {ranks: 1}}",
         "clusters.low.hosts: expected a list of hosts or 'slurm', got 'a,b'"),
        ("clusters: {low: {ranks: 1, hosts: [a:b]}, high: {ranks: 1}}",
         "clusters.low.hosts[0]: expected a host name, got 'a:b'"),
        ("clusters: {low: {ranks: 1, hosts: [a:0]}, high: {ranks: 1}}",
         "clusters.low.hosts[0] (slots): expected a positive integer, got 0"),
        ("clusters: {low: {ranks: 1, hosts: [{name: a, slots: 0}]}, high: {ranks: 1}}",
         "clusters.low.hosts[0].slots: expected a positive integer, got 0"),
        ("clusters: {low: {ranks: 1, hosts: [{slots: 2}]}, high: {ranks: 1}}",
         "clusters.low.hosts[0]: missing required key 'name'"),
        ("clusters: {low: {ranks: 1, hosts: [{name: a, cores: 2}]}, high: {ranks: 1}}",
         "clusters.low.hosts[0]: unknown key 'cores'"),
        ("clusters: {low: {ranks: 1, hosts: [{name: a, sockets: 2}]}, high: {ranks: 1}}",
         "clusters.low.hosts[0]: give both 'sockets' and 'cores_per_socket', or neither"),
        ("clusters: {low: {ranks: 1, hosts: [{name: 'a b'}]}, high: {ranks: 1}}",
         "clusters.low.hosts[0].name: expected a host name, got 'a b'"),
        ("clusters: {low: {ranks: 1, cores_per_socket: 4}, high: {ranks: 1}}",
         "clusters.low: give both 'sockets' and 'cores_per_socket', or neither"),
        ("clusters: {low: {ranks: 1, sockets: 0, cores_per_socket: 4}, high: {ranks: 1}}",
         "clusters.low.sockets: expected a positive integer, got 0"),
        ("clusters: {low: {ranks: 1, placement: cyclic}, high: {ranks: 1}}",
         "clusters.low.placement: expected one of ['block', 'paired'], got 'cyclic'"),
        ("clusters: {low: {ranks: 1, oversubscribe: yes please}, high: {ranks: 1}}",
         "clusters.low.oversubscribe: expected true or false, got 'yes please'"),
        ("clusters: {low: {ranks: 1, wrapper: ip netns exec a}, high: {ranks: 1}}",
         "clusters.low.wrapper: expected a list, got 'ip netns exec a'"),
        ("clusters: {low: {ranks: 1, wrapper: [ip, '']}, high: {ranks: 1}}",
         "clusters.low.wrapper[1]: expected a non-empty string, got ''"),
        (OK + "zipper: [{wrapper: [ip, 3]}]", "zipper[0].wrapper[1]: expected a non-empty string"),
        (OK + "transport: ucx", "transport: expected one of ['tcp'] or null, got 'ucx'"),
        ("clusters: {low: {ranks: 1, hosts: []}, high: {ranks: 1}}",
         "clusters.low.hosts: expected at least one host name"),
        ("clusters: {low: {ranks: 1}, high: {ranks: 1, interface: 5}}",
         "clusters.high.interface: expected a device name, got 5"),
        ("clusters: {low: {ranks: 1}, high: {ranks: 1, env: {X: null}}}",
         "clusters.high.env.X: expected a string, got null"),
        ("clusters: {low: {ranks: 1}, high: {ranks: 1, env: [X=1]}}",
         "clusters.high.env: expected a mapping"),
        (OK + "env: {MMPI_CLUSTER: low}",
         "env.MMPI_CLUSTER: variables named MMPI_* are set by mmpi-run"),
        (OK + "env: {BAD-NAME: 1}", "env: expected an environment variable name, got 'BAD-NAME'"),
        (OK + "zipper: [{forwarders: 0}]",
         "zipper[0].forwarders: expected a positive integer, got 0"),
        (OK + "zipper: [{host: a b}]", "zipper[0].host: expected a host name, got 'a b'"),
        (OK + "zipper: [{interfaces: {low: eth0}}]",
         "zipper[0].interfaces: give the device on both subnets"),
        (OK + "zipper: []", "zipper: expected at least one zipper node"),
        (OK + "zipper: {host: z}", "zipper: expected a list, got a mapping"),
        (OK + "launcher: {args: [-v, 1]}", "launcher.args[1]: expected a string, got 1"),
        (OK + "launcher: {command: null}", "launcher.command: expected a command, got null"),
        (OK + "timeouts: {connect: -5}",
         "timeouts.connect: expected a positive number of seconds up to 86400 (a day), got -5"),
        (OK + "timeouts: {connect: 60s}",
         "timeouts.connect: expected a positive number of seconds up to 86400 (a day), got '60s'"),
        # structure
        ("clusters: {low: {ranks: 1, hosts: [a], hostfile: h}, high: {ranks: 1}}",
         "clusters.low: give either 'hosts' or 'hostfile', not both"),
        ("clusters: {low: {ranks: 1}}", "clusters: missing required key 'high'"),
        ("clusters: {low: {ranks: 1}, high: {}}", "clusters.high: missing required key 'ranks'"),
        ("clusters: {low: {ranks: 1}, high: null}", "clusters.high: expected a mapping, got null"),
        ("launcher: {}", "top level: missing required key 'clusters'"),
        ("[1, 2]", "top level: expected a mapping, got a list"),
        ("just text", "top level: expected a mapping, got 'just text'"),
        ("", "top level: expected a mapping, got an empty document"),
    ],
)  # fmt: skip
def test_errors_name_the_key_path(text, expected):
    assert expected in error_of(text)


def test_error_names_the_file(tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text("clusters:\n  low: {ranks: 2}\n  high: {ranks: -1}\n")
    with pytest.raises(ConfigError) as info:
        load(path)
    assert str(info.value) == f"{path}: clusters.high.ranks: expected a positive integer, got -1"
    assert info.value.path == "clusters.high.ranks"


def test_bad_yaml_syntax_names_line_and_column():
    with pytest.raises(ConfigError) as info:
        loads("clusters:\n  low: {ranks: 2\n  high: [", source="job.yaml")
    message = str(info.value)
    assert message.startswith("job.yaml: invalid YAML at line ")
    assert "column" in message


def test_non_mapping_yaml():
    with pytest.raises(ConfigError, match=r"job.yaml: top level: expected a mapping, got a list"):
        loads("- low\n- high\n", source="job.yaml")


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="cannot read the file"):
        load(tmp_path / "nope.yaml")


@pytest.mark.parametrize("data,expected", [
    (b"clusters:\n  low: {ranks: 2}\n\xff\n", "not UTF-8 text: byte 0xff at line 3, column 1"),
    (b"\x89PNG\r\n\x1a\n", "not UTF-8 text: byte 0x89 at line 1, column 1"),
    (b"clusters: {low: {ranks: 2}}\n\x00\x01", "not a text file: it holds a NUL byte at line 2"),
    ("clusters: {low: {ranks: 2}, high: {ranks: 1}}\n\xe9".encode("latin-1"),
     "not UTF-8 text: byte 0xe9 at line 2, column 1"),
    (codecs.BOM_UTF16_LE + b"a\x00\x00\xd8", "not UTF-16 text: byte 0x00 at line 1, column 5"),
])
def test_a_file_that_is_not_text_is_named_without_a_traceback(tmp_path, data, expected):
    path = tmp_path / "job.yaml"
    path.write_bytes(data)
    with pytest.raises(ConfigError) as info:
        load(path)
    assert str(info.value).startswith(f"{path}: {expected}")


@pytest.mark.parametrize("encoding", ["utf-16", "utf-32", "utf-8-sig"])
def test_unicode_with_a_byte_order_mark_is_read(tmp_path, encoding):
    path = tmp_path / "job.yaml"
    path.write_bytes("clusters: {low: {ranks: 3}, high: {ranks: 1}}  # Zürich\n".encode(encoding))
    assert load(path).clusters[0].ranks == 3


def test_a_hostfile_that_is_not_text_names_both_files(tmp_path):
    (tmp_path / "h").write_bytes(b"node1 slots=2\n\xffnode2\n")
    message = error_of_in(tmp_path, "clusters: {low: {ranks: 1}, high: {ranks: 1, hostfile: h}}")
    assert message == (f"<string>: clusters.high.hostfile: {tmp_path}/h: not UTF-8 text: byte "
                       "0xff at line 2, column 1 cannot be decoded (save it as UTF-8)")


def test_absolute_hostfile_is_kept(tmp_path):
    hostfile = tmp_path / "abs" / "hosts.mpi"
    hostfile.parent.mkdir()
    hostfile.write_text("n1\n")
    config = loads(
        f"clusters: {{low: {{ranks: 1, hostfile: {hostfile}}}, high: {{ranks: 1}}}}",
        base_dir=tmp_path / "elsewhere",
    )
    assert config.low.hostfile == str(hostfile)
    assert config.low.hosts == (Host("n1"),)


def test_overrides():
    config = with_overrides(load(), low=3, high=5, forwarders=2)
    assert (config.low.ranks, config.high.ranks, config.forwarders) == (3, 5, 2)
    assert config.low.hosts == (Host("localhost"),)  # the rest is untouched
    assert with_overrides(config) == config
    config = with_overrides(config, placement="paired", forwarder_cpus=[1, 0])
    assert (config.low.placement, config.high.placement) == ("paired", "paired")
    assert config.zipper[0].cpus == (1, 0)


def test_zipper_cpus():
    assert loads(OK + "zipper: [{cpus: [1]}, {}]").zipper[0].cpus == (1,)
    assert loads(OK + "zipper: [{cpus: null}]").zipper[0].cpus == ()
    for bad, where in (("[-1]", "zipper[0].cpus[0]"), ("[0, x]", "zipper[0].cpus[1]"),
                       ("[true]", "zipper[0].cpus[0]"), ("3", "zipper[0].cpus")):
        with pytest.raises(ConfigError) as info:
            loads(OK + f"zipper: [{{cpus: {bad}}}]")
        assert f"{where}: expected" in str(info.value), str(info.value)


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ({"low": 0}, "clusters.low.ranks (from --low): expected a positive integer, got 0"),
        ({"high": -2}, "clusters.high.ranks (from --high): expected a positive integer, got -2"),
        (
            {"forwarders": 0},
            "zipper[0].forwarders (from --forwarders): expected a positive integer",
        ),
        (
            {"placement": "pairs"},
            "clusters.low.placement (from --placement): expected one of ['block', 'paired']",
        ),
        (
            {"forwarder_cpus": [1, -1]},
            "zipper[0].cpus[1] (from --forwarder-cpus): expected a CPU number (0 or more), got -1",
        ),
    ],
)
def test_bad_overrides(override, expected):
    with pytest.raises(ConfigError) as info:
        with_overrides(load(), **override)
    assert expected in str(info.value)


# -- counts bounded by what can run; the same check for the flag and the file -------------------


BIG = 99999999999999999999


@pytest.mark.parametrize(("override", "file_key", "path", "bound"), [
    ({"low": BIG}, "clusters: {low: {ranks: %d}, high: {ranks: 1}}", "clusters.low.ranks",
     "at most 65536 ranks in one cluster"),
    ({"forwarders": 1000}, OK + "zipper: [{forwarders: %d}]", "zipper[0].forwarders",
     "at most 16 forwarders on one zipper node"),
])
def test_counts_are_bounded_alike_from_the_flag_and_the_file(override, file_key, path, bound):
    value = next(iter(override.values()))
    flag = "--" + next(iter(override))
    with pytest.raises(ConfigError) as info:
        with_overrides(load(), **override)
    from_flag = str(info.value)
    assert from_flag.startswith(f"{path} (from {flag}): expected {bound} (")
    assert from_flag.endswith(f"), got {value}")
    from_file = error_of(file_key % value)
    assert from_file == f"<string>: {path}: " + from_flag.split(": ", 1)[1]
    # the bound itself is fine
    assert with_overrides(load(), low=65536).low.ranks == 65536
    assert with_overrides(load(), forwarders=16).forwarders == 16


def test_a_timeout_is_finite_and_at_most_a_day():
    assert "timeouts.connect: expected a positive number of seconds up to 86400 (a day), got " \
           "inf" in error_of(OK + "timeouts: {connect: .inf}")
    assert "got nan" in error_of(OK + "timeouts: {connect: .nan}")
    assert loads(OK + "timeouts: {connect: 86400}").timeouts.connect == 86400


def test_a_misspelt_key_gets_a_suggestion():
    assert error_of("clusters: {low: {rank: 2}, high: {ranks: 2}}") == (
        "<string>: clusters.low: unknown key 'rank' (did you mean 'ranks'?)")
    assert error_of("clusters: {lwo: {ranks: 2}, high: {ranks: 2}}") == (
        "<string>: clusters: unknown key 'lwo' (did you mean 'low'?)")
    assert error_of(OK + "timeout: {connect: 3}") == (
        "<string>: top level: unknown key 'timeout' (did you mean 'timeouts'?)")


def test_a_job_file_too_large_is_refused_before_it_is_parsed(tmp_path):
    path = tmp_path / "big.yaml"
    path.write_text("# " + "x" * (1 << 20) + "\n" + OK)
    with pytest.raises(ConfigError) as info:
        load(path)
    assert str(info.value) == (f"{path}: too large for a job file: 1.0 MiB (at most 1 MiB; is "
                               "it the right file?)")
    with pytest.raises(ConfigError) as info:  # a device has no size: read only what is allowed
        load("/dev/zero")
    assert str(info.value) == ("/dev/zero: too large for a job file: over 1 MiB (at most 1 MiB; "
                               "is it the right file?)")


def test_the_c_loader_is_used_where_pyyaml_has_it():
    import yaml

    from launch import config

    assert config._LOADER is getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    with pytest.raises(ConfigError, match=r"invalid YAML at line \d+, column \d+"):
        loads("clusters:\n  - [low: {ranks: 1\n")


def test_the_shipped_example_job_is_valid():
    from pathlib import Path

    example = Path(__file__).resolve().parents[2] / "examples" / "two-clusters.yaml"
    config = load(example)
    assert [(c.ranks, c.hosts[0].name) for c in config.clusters] == [(2, "localhost")] * 2
    assert config.zipper[0].host == "localhost" and config.forwarders == 1


def test_forwarders_override_needs_one_zipper():
    config = loads(OK + "zipper: [{host: z1}, {host: z2}]")
    with pytest.raises(ConfigError) as info:
        with_overrides(config, forwarders=3)
    assert "zipper[0].forwarders (from --forwarders): the job has 2 zipper nodes" in str(info.value)


def test_forwarder_cpus_override_needs_one_zipper():
    config = loads(OK + "zipper: [{host: z1}, {host: z2}]")
    with pytest.raises(ConfigError) as info:
        with_overrides(config, forwarder_cpus=[1])
    assert "zipper[0].cpus (from --forwarder-cpus): the job has 2 zipper nodes" in str(info.value)


def test_cli_reports_config_errors(tmp_path, capsys):
    from launch.cli import main

    path = tmp_path / "job.yaml"
    path.write_text("zipper: [{hots: z}]\nclusters: {low: {ranks: 1}, high: {ranks: 1}}\n")
    assert main(["-c", str(path), "--dry-run", "python", "x.py"]) == 1
    assert capsys.readouterr().err == (
        f"mmpi-run: {path}: zipper[0]: unknown key 'hots' (did you mean 'host'?)\n"
    )
    path.write_text("zipper: [{xyzzy: z}]\nclusters: {low: {ranks: 1}, high: {ranks: 1}}\n")
    assert main(["-c", str(path), "--dry-run", "python", "x.py"]) == 1
    assert capsys.readouterr().err == (  # nothing close: the keys it may be
        f"mmpi-run: {path}: zipper[0]: unknown key 'xyzzy' (expected one of "
        "['cpus', 'forwarders', 'host', 'interfaces', 'wrapper'])\n"
    )
    assert main(["--high", "0", "--dry-run", "python", "x.py"]) == 1
    assert "mmpi-run: clusters.high.ranks (from --high)" in capsys.readouterr().err


# -- hosts: entries, host files, Slurm ----------------------------------------------------------


def test_host_entries():
    config = loads(
        "clusters:\n"
        "  low: {ranks: 1, hosts: [node1, 'node2:4', {name: node3, slots: 2, sockets: 2,"
        " cores_per_socket: 8}]}\n"
        "  high: {ranks: 1, placement: paired, oversubscribe: true, sockets: 2,"
        " cores_per_socket: 4, wrapper: [ip, netns, exec, b]}\n"
        "transport: tcp\n"
        "zipper: [{wrapper: [ip, netns, exec, z]}]\n"
    )
    assert config.low.hosts == (Host("node1"), Host("node2", 4), Host("node3", 2, 2, 8))
    assert [h.path for h in config.low.hosts] == [f"clusters.low.hosts[{i}]" for i in range(3)]
    assert config.low.placement == "block" and not config.low.oversubscribe
    high = config.high
    assert (high.placement, high.oversubscribe, high.sockets, high.cores_per_socket) == (
        "paired", True, 2, 4,
    )  # fmt: skip
    assert high.wrapper == ("ip", "netns", "exec", "b")
    assert config.zipper[0].wrapper == ("ip", "netns", "exec", "z")
    assert config.transport == "tcp"


def test_hostfile_formats(tmp_path):
    (tmp_path / "mixed.hosts").write_text(
        "# MPICH and Open MPI lines may even be mixed\n"
        "node1:2\n"
        "node2 slots=4 max_slots=8   # comment\n"
        "\n"
        "node3\n"
    )
    config = loads(
        "clusters: {low: {ranks: 1, hostfile: mixed.hosts}, high: {ranks: 1}}", base_dir=tmp_path
    )
    assert config.low.hosts == (Host("node1", 2), Host("node2", 4), Host("node3"))
    assert config.low.hosts[1].path == f"clusters.low.hostfile ({tmp_path}/mixed.hosts line 3)"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("node1 4\n", "line 1: unknown field '4' (expected slots=N or max_slots=N)"),
        ("ok\nnode1:2 slots=3\n", "line 2: expected 'host', 'host:slots' or 'host slots=N'"),
        ("a,b\n", "line 1: expected 'host', 'host:slots'"),
        ("node1:0\n", "line 1: host 'node1' has 0 slots"),
        ("# nothing\n\n", "no host in the file"),
    ],
)
def test_hostfile_errors(tmp_path, text, expected):
    (tmp_path / "h").write_text(text)
    message = error_of_in(tmp_path, "clusters: {low: {ranks: 1}, high: {ranks: 1, hostfile: h}}")
    assert message.startswith(f"<string>: clusters.high.hostfile: {tmp_path}/h: ")
    assert expected in message


def test_missing_hostfile(tmp_path):
    message = error_of_in(tmp_path, "clusters: {low: {ranks: 1, hostfile: nope}, high: {ranks: 1}}")
    assert "clusters.low.hostfile: cannot read" in message


def error_of_in(base_dir, text: str) -> str:
    with pytest.raises(ConfigError) as info:
        loads(text, base_dir=base_dir)
    return str(info.value)


SLURM_JOB = "clusters: {low: {ranks: 1, hosts: slurm}, high: {ranks: 1}}"


def test_slurm_allocation():
    env = {"SLURM_JOB_NODELIST": "node[01-03,07],gpu5", "SLURM_TASKS_PER_NODE": "2(x3),1,4"}
    config = loads(SLURM_JOB, environ=env)
    assert config.low.hosts == (
        Host("node01", 2), Host("node02", 2), Host("node03", 2), Host("node07", 1), Host("gpu5", 4),
    )  # fmt: skip
    assert config.low.hosts[3].path == "clusters.low.hosts (Slurm node 3)"
    # Without task counts the slots are unknown, as for a bare host name.
    config = loads(SLURM_JOB, environ={"SLURM_NODELIST": "r[1-2]n[08-09]"})
    assert [h.name for h in config.low.hosts] == ["r1n08", "r1n09", "r2n08", "r2n09"]
    assert {h.slots for h in config.low.hosts} == {None}


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, "clusters.low.hosts: 'slurm': SLURM_JOB_NODELIST is not set"),
        ({"SLURM_JOB_NODELIST": "n[1-3]", "SLURM_TASKS_PER_NODE": "2(x2)"},
         "SLURM_TASKS_PER_NODE='2(x2)' gives 2 counts for 3 nodes"),
        ({"SLURM_JOB_NODELIST": "n[3-1]"}, "descending range '3-1' in 'n[3-1]'"),
        ({"SLURM_JOB_NODELIST": "n[1-2"}, "unbalanced brackets"),
        ({"SLURM_JOB_NODELIST": "n1", "SLURM_TASKS_PER_NODE": "two"},
         "bad SLURM_TASKS_PER_NODE entry 'two'"),
    ],
)  # fmt: skip
def test_slurm_errors(env, expected):
    with pytest.raises(ConfigError) as info:
        loads(SLURM_JOB, environ=env)
    assert expected in str(info.value)


def test_progress_key_and_override():
    assert parse(MINIMAL).progress is None  # not said: the environment's, else off
    assert parse({**MINIMAL, "progress": "leaders"}).progress == "leaders"
    assert parse({**MINIMAL, "progress": False}).progress == "off"  # YAML's bare `off`
    assert loads("progress: off\nclusters: {low: {ranks: 1}, high: {ranks: 1}}").progress == "off"
    with pytest.raises(ConfigError) as info:
        parse({**MINIMAL, "progress": "sometimes"})
    assert "progress" in str(info.value) and "'leaders'" in str(info.value)
    assert with_overrides(parse(MINIMAL), progress="all").progress == "all"
    with pytest.raises(ConfigError) as info:
        with_overrides(parse(MINIMAL), progress="x")
    assert "progress (from --progress)" in str(info.value)
