"""launch.plan's placement: config -> rank map and Hydra's flags (block, paired, hosts, Slurm)."""
# ruff: noqa: D103  (test names say what they check)

from __future__ import annotations

from plans import DIR, MACHINE, PY, clusters, error_of, plan_for

from launch._hosts import Machine
from launch.config import parse
from launch.plan import Plan, make_plan


def places(plan: Plan, cluster: str) -> list[tuple]:
    """(host, socket, core) of each rank of `cluster`, in local-rank order."""
    layout = next(x for x in plan.layouts if x.cluster == cluster)
    assert [p.local for p in layout.places] == list(range(len(layout.places)))
    return [(p.host, p.socket, p.core) for p in layout.places]


def hydra(plan: Plan, cluster: str) -> tuple[str, ...]:
    """Return the cluster's mpiexec arguments between `-n N` and -prepend-pattern."""
    argv = next(x for x in plan.clusters if x.name == cluster).argv
    return argv[argv.index("-n") + 2 : argv.index("-prepend-pattern")]


def test_block_fills_hosts_in_order():
    data = clusters(high={"ranks": 5, "hosts": ["node1", {"name": "node2", "slots": 4}]})
    plan = plan_for(data)
    # A remote host without a slot count has 1 slot.
    assert places(plan, "high") == [("node1", None, None)] + [("node2", None, None)] * 4
    assert hydra(plan, "high") == ("-hosts", "node1:1,node2:4")
    vranks = [(p.vrank, p.cluster, p.local) for x in plan.layouts for p in x.places]
    assert vranks[:3] == [(0, "low", 0), (1, "low", 1), (2, "high", 0)]


def test_impossible_placement_names_the_cluster():
    data = clusters(high={"ranks": 6, "hosts": ["node1:2", {"name": "node2", "slots": 2}]})
    assert error_of(data) == (
        "clusters.high: 6 ranks do not fit in 4 slots on [node1:2, node2:2] "
        "(set oversubscribe: true to allow it)"
    )
    # The command-line override is checked the same way.
    ok = clusters(low={"hosts": ["n1:2", "n2:2"]})
    assert "clusters.low: 5 ranks do not fit in 4 slots" in error_of(ok, low=5)


def test_oversubscribed_block_wraps_like_hydra():
    data = clusters(high={"ranks": 6, "hosts": ["node1:2", "node2:2"], "oversubscribe": True})
    plan = plan_for(data)
    assert [h for h, _, _ in places(plan, "high")] == ["node1"] * 2 + ["node2"] * 2 + ["node1"] * 2
    assert hydra(plan, "high") == ("-hosts", "node1:4,node2:2", "-rankmap", "0,0,1,1,0,0")


def test_localhost_has_the_machines_cpus_unless_oversubscribed():
    data = clusters(low={"ranks": 3})  # hosts default to [localhost]
    assert error_of(data) == (
        "clusters.low: 3 ranks do not fit in 2 slots on [localhost:2] "
        "(set oversubscribe: true to allow it)"
    )
    assert hydra(plan_for(data, machine=Machine(4, 1, 4)), "low") == ()  # no -hosts: this machine
    # The embedded default job oversubscribes: 2 + 3 ranks on a 2-core machine still run.
    plan = plan_for(low=5, high=3)
    assert [len(x.places) for x in plan.layouts] == [5, 3]
    assert hydra(plan, "low") == ()


def test_repeated_hosts_add_up():
    plan = plan_for(clusters(low={"ranks": 4, "hosts": ["n1", "n2:2", "n1"]}))
    assert [h for h, _, _ in places(plan, "low")] == ["n1", "n1", "n2", "n2"]
    assert hydra(plan, "low") == ("-hosts", "n1:2,n2:2")


THESIS_NODE = {"sockets": 2, "cores_per_socket": 4}  # 8 physical cores, like LGM's nodes


def test_paired_is_the_thesis_layout():
    data = clusters(
        low={"ranks": 10, "placement": "paired", "hosts": ["a1", "a2"], **THESIS_NODE},
        high={"ranks": 10, "placement": "paired",
              "hosts": [{"name": "b1", **THESIS_NODE}, {"name": "b2", **THESIS_NODE}]},
    )  # fmt: skip
    plan = plan_for(data)
    # Figure 4: rank 0 on socket 0 core 0, rank 1 on socket 1 core 0, rank 2 on socket 0
    # core 1, ... until the 8 physical cores are taken; rank 8 starts the next node.
    node = [(s, c) for c in range(4) for s in range(2)]
    assert places(plan, "low") == [("a1", *sc) for sc in node] + [("a2", *sc) for sc in node[:2]]
    assert places(plan, "high") == [("b1", *sc) for sc in node] + [("b2", *sc) for sc in node[:2]]
    bind = ("-bind-to", "core", "-map-by", "socket")
    assert hydra(plan, "low") == ("-hosts", "a1:8,a2:2", *bind)
    assert hydra(plan, "high") == ("-hosts", "b1:8,b2:2", *bind)


def test_paired_with_uneven_clusters_keeps_siblings_together_where_it_can():
    small, big = {"sockets": 1, "cores_per_socket": 4}, {"sockets": 2, "cores_per_socket": 4}
    data = clusters(
        low={"ranks": 12, "placement": "paired",
             "hosts": [{"name": "a1", **small}, {"name": "a2", **big}]},
        high={"ranks": 12, "placement": "paired",
              "hosts": [{"name": "b1", **big}, {"name": "b2", **small}]},
    )  # fmt: skip
    plan = plan_for(data)
    low, high = places(plan, "low"), places(plan, "high")
    # Node pairs hold min(4, 8) = 4 pairs each: siblings 0-7 share node index and position.
    assert [h for h, _, _ in low] == ["a1"] * 4 + ["a2"] * 8
    assert [h for h, _, _ in high] == ["b1"] * 4 + ["b2"] * 4 + ["b1"] * 4
    assert low[4:8] == [("a2", 0, 0), ("a2", 1, 0), ("a2", 0, 1), ("a2", 1, 1)]
    assert high[4:8] == [("b2", 0, 0), ("b2", 0, 1), ("b2", 0, 2), ("b2", 0, 3)]
    # The unpaired rest fills what is left, continuing each node's core order.
    assert high[8:] == [("b1", 0, 2), ("b1", 1, 2), ("b1", 0, 3), ("b1", 1, 3)]
    # b1's ranks are not contiguous: Hydra is told where each rank goes.
    assert hydra(plan, "high")[:4] == ("-hosts", "b1:8,b2:4", "-rankmap", "0,0,0,0,1,1,1,1,0,0,0,0")


def test_paired_with_different_rank_counts():
    data = clusters(
        low={"ranks": 2, "placement": "paired", "hosts": ["a1"], **THESIS_NODE},
        high={"ranks": 5, "placement": "paired", "hosts": ["b1"], **THESIS_NODE},
    )
    plan = plan_for(data)
    assert places(plan, "low") == [("a1", 0, 0), ("a1", 1, 0)]
    assert places(plan, "high")[:2] == [("b1", 0, 0), ("b1", 1, 0)]
    assert [p.vrank for p in plan.layouts[1].places] == [2, 3, 4, 5, 6]


def test_paired_on_localhost_reads_the_machine():
    data = clusters(low={"placement": "paired"}, high={"placement": "paired"})
    plan = plan_for(data, machine=Machine(cpus=4, sockets=2, cores_per_socket=1))
    assert places(plan, "low") == [("localhost", 0, 0), ("localhost", 1, 0)]
    assert hydra(plan, "low") == ("-bind-to", "core", "-map-by", "socket")
    # Hyperthreads are slots but not cores: paired counts physical cores only.
    assert error_of(clusters(low={"ranks": 3, "placement": "paired"}),
                    machine=Machine(cpus=4, sockets=1, cores_per_socket=2)) == (
        "clusters.low: 3 ranks do not fit in 2 physical cores on [localhost:2] (placement "
        "'paired' puts one rank per core; set oversubscribe: true to allow it)"
    )  # fmt: skip


def test_paired_slots_cap_the_cores_and_oversubscription_wraps():
    data = clusters(
        low={"ranks": 4, "placement": "paired", "oversubscribe": True,
             "hosts": [{"name": "a1", "slots": 2, **THESIS_NODE}]},
    )  # fmt: skip
    plan = plan_for(data)
    # 2 slots of 8 cores: the 3rd and 4th ranks oversubscribe; Hydra binds the i-th process
    # on a node modulo its cores, so they get the next cores, and the map shows that.
    assert places(plan, "low") == [("a1", 0, 0), ("a1", 1, 0), ("a1", 0, 1), ("a1", 1, 1)]


def test_paired_needs_the_shape_of_remote_hosts(tmp_path):
    data = clusters(low={"placement": "paired", "hosts": ["localhost", "n2"]})
    assert error_of(data) == (
        "clusters.low.hosts[1]: placement 'paired' needs the shape of host 'n2': give 'sockets' "
        "and 'cores_per_socket' in its entry or for the whole cluster"
    )
    hostfile = tmp_path / "hosts"
    hostfile.write_text("localhost:8\n# a comment\nn2:8\n")
    data = clusters(high={"placement": "paired", "hostfile": str(hostfile)})
    assert error_of(data).startswith(
        f"clusters.high.hostfile ({hostfile} line 3): placement 'paired' needs the shape"
    )
    data["clusters"]["high"].update(THESIS_NODE, ranks=10)  # the cluster-wide shape
    assert hydra(plan_for(data), "high") == (
        "-hosts", "localhost:8,n2:2", "-bind-to", "core", "-map-by", "socket",
    )  # fmt: skip


def test_slurm_hosts_are_placed_on_their_tasks(monkeypatch):
    monkeypatch.setenv("SLURM_JOB_NODELIST", "node[01-02]")
    monkeypatch.setenv("SLURM_TASKS_PER_NODE", "2,1")
    config = parse(clusters(high={"ranks": 3, "hosts": "slurm"}))
    plan = make_plan(config, ["prog"], DIR, python=PY, machine=MACHINE)
    assert hydra(plan, "high") == ("-hosts", "node01:2,node02:1")
    assert "clusters.high: 4 ranks do not fit in 3 slots on [node01:2, node02:1]" in (
        error_of(clusters(high={"ranks": 4, "hosts": ["node01:2", "node02:1"]}))
    )


def test_oversubscribing_has_a_bound_per_slot():
    # the default job oversubscribes this (2-CPU) machine: 32 ranks per CPU, no more
    assert [len(x.places) for x in plan_for(low=64, high=1).layouts] == [64, 1]
    assert error_of(None, low=65) == (
        "clusters.low: 65 ranks do not fit in 2 slots on [localhost:2], even oversubscribed: "
        "at most 32 ranks per slot (more wait for a core far longer than they run)"
    )
    data = clusters(high={"ranks": 65, "hosts": ["n1", "n2"], "oversubscribe": True})
    assert error_of(data).endswith("; give the hosts' slots, as n1:8")
    data["clusters"]["high"].update(THESIS_NODE, placement="paired", ranks=16 * 32 + 1)
    assert "ranks do not fit in 16 physical cores on [n1:8, n2:8], even oversubscribed: at " \
           "most 32 ranks per physical core" in error_of(data)


def test_a_huge_slot_count_is_placed_at_once():
    # room is counted, not listed: a host of 10**20 slots places its 2 ranks as any other
    data = clusters(low={"hosts": [f"big:{10**20}"]},
                    high={"hosts": [{"name": "b2", "slots": 10**20, "sockets": 10**20,
                                     "cores_per_socket": 10**20}], "placement": "paired"})
    plan = plan_for(data)
    assert hydra(plan, "low") == ("-hosts", "big:2")
    assert places(plan, "high") == [("b2", 0, 0), ("b2", 1, 0)]
