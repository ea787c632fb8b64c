"""launch.plan on Open MPI: one DVM, the jobs' environment named, placement by files."""
# ruff: noqa: D103  (test names say what they check)

from __future__ import annotations

from plans import DIR, plan_for

from launch.plan import Plan


def ompi_plan(data: dict | None = None, **overrides) -> Plan:
    return plan_for(data, environ={"PATH": "/nowhere"}, mpi="openmpi", **overrides)


def option(argv, name: str) -> str | None:
    argv = list(argv)
    return argv[argv.index(name) + 1] if name in argv else None


def test_open_mpi_jobs_go_into_one_dvm_with_their_environment_named():
    plan = ompi_plan()
    assert plan.dvm is not None and plan.dvm.argv[1:] == (
        "--report-uri", f"{DIR}/dvm.uri", "--report-pid", f"{DIR}/dvm.pid")
    assert "before them, the Open MPI DVM" in plan.describe()
    for launch in plan.launches:
        argv = list(launch.argv)
        assert argv[:4] == ["mpiexec", "--dvm", f"file:{DIR}/dvm.uri", "--oversubscribe"]
        named = {argv[i + 1] for i, a in enumerate(argv) if a == "-x"}
        assert named == set(launch.env), launch.name  # the DVM's processes get only these
        assert "-prepend-pattern" not in argv and "--map-by" not in argv
    low = plan.clusters[0]
    assert low.env["MMPI_OUTPUT_MARK"] == "1" and low.argv[-2:] == ("python", "prog.py")
    assert plan.files == {}


def test_paired_placement_is_a_rankfile_bound_by_core():
    plan = ompi_plan({"clusters": {"low": {"ranks": 3, "placement": "paired",
                                           "oversubscribe": True},
                                   "high": {"ranks": 2, "placement": "paired"}}})
    low, high = plan.clusters
    assert option(low.argv, "--map-by") == "rankfile:file=rankfile.low"
    assert option(low.argv, "--bind-to") == "core:overload-allowed"  # both clusters share
    # Hydra's -bind-to core -map-by socket on one socket of two cores: 0, 1, then 0 again
    assert plan.files["rankfile.low"] == ("rank 0=localhost slot=0:0\nrank 1=localhost "
                                          "slot=0:1\nrank 2=localhost slot=0:0\n")
    assert plan.files["rankfile.high"].count("\n") == 2
    assert option(high.argv, "--map-by") == "rankfile:file=rankfile.high"
    # the DVM holds the slots the rankfiles name: 3 + 2 ranks and the forwarder
    assert option(plan.dvm.argv, "--host") == "localhost:6"
    assert "file rankfile.low in the rendezvous directory" in plan.describe()


def test_hosts_become_a_sequential_hostfile_and_the_dvm_spans_them():
    plan = ompi_plan({"clusters": {"low": {"ranks": 3, "hosts": ["n1:1", "n2:2"]},
                                   "high": {"ranks": 1, "hosts": ["m1"]}},
                      "zipper": [{"host": "z1"}]})
    low, high = plan.clusters
    assert option(low.argv, "--hostfile") == f"{DIR}/hostfile.low"
    assert option(low.argv, "--map-by") == "seq"
    assert plan.files["hostfile.low"] == "n1\nn2\nn2\n"
    assert plan.files["hostfile.high"] == "m1\n"
    fwd = plan.forwarders[0]
    assert option(fwd.argv, "--host") == "z1" and "--map-by" not in fwd.argv
    assert option(plan.dvm.argv, "--host") == "n1:1,n2:2,m1:1,z1:1"


def test_a_rank_map_places_each_local_rank_on_its_host():
    # local rank i of a cluster is line i of its hostfile, whatever virtual rank it is
    plan = ompi_plan({"clusters": {"low": {"ranks": 2, "hosts": ["a:1", "b:1"]},
                                   "high": {"ranks": 2}}})
    assert plan.files["hostfile.low"] == "a\nb\n"
    assert "hostfile.high" not in plan.files  # on this host, unbound: nothing to say


def test_forwarder_cpus_are_a_rankfile_of_one_rank():
    plan = ompi_plan(forwarder_cpus=[1])
    (fwd,) = plan.forwarders
    assert option(fwd.argv, "--map-by") == "rankfile:file=rankfile.fwd0"
    assert plan.files == {"rankfile.fwd0": "rank 0=localhost slot=1\n"}
    assert option(plan.dvm.argv, "--host") == "localhost:5"


def test_interfaces_hold_open_mpis_tcp_transport_too():
    plan = ompi_plan({"clusters": {"low": {"ranks": 2, "interface": "ib0"},
                                   "high": {"ranks": 2, "interface": "ib1"}},
                      "zipper": [{"interfaces": {"low": "ib0", "high": "ib1"}}]})
    fwd, low, high = plan.launches
    assert fwd.env["OMPI_MCA_btl_tcp_if_include"] == "ib0,ib1"
    assert low.env["OMPI_MCA_btl_tcp_if_include"] == "ib0"
    assert high.env["UCX_NET_DEVICES"] == "ib1"
    for launch in plan.launches:  # named, so the DVM's processes get it
        assert "OMPI_MCA_btl_tcp_if_include" in list(launch.argv)
