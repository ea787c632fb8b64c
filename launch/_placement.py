"""Where each rank runs: hosts and slots -> a rank -> host/core map, and Hydra flags for it.

Policies (per cluster, ``placement:``):

- ``block`` (default): fill each host up to its slots, in the order given; no binding.
- ``paired``: the layout of *The Leiden Zipper* §3.1 (Figure 4). Ranks are added in pairs, one
  per cluster: local rank i of low and of high are siblings and take the same position (node
  index, socket, core) in their cluster whenever both clusters have room there. On a node, ranks
  go round-robin over the sockets, one per physical core (socket 0 core 0, socket 1 core 0,
  socket 0 core 1, ...); a node is filled before the next is used. Hydra is told
  ``-bind-to core -map-by socket``, which binds the i-th process on a node exactly so.

Uneven clusters: with both clusters paired, node j holds min(room of node j in low, in high)
pairs first; the ranks that cannot be paired so (one cluster has more ranks, more nodes or more
cores per node) then fill the remaining room of their own cluster, node by node. A node's
room is its physical cores (sockets x cores_per_socket) for ``paired``, capped by its slots when
those were given; its slots for ``block``.

More ranks than room is an error naming the cluster's key path, unless ``oversubscribe: true``:
then the same order starts over (Hydra's binding also wraps, modulo the node's cores), up to
OVERSUBSCRIBE ranks per slot (or core): beyond that a rank waits for its core far longer than
it runs, and the job's start-up alone outlasts its connect timeout.

Rules: pure (this machine's shape comes in as a `Machine`); the map shown is computed the way
Hydra places and binds, and the flags make Hydra do exactly that: ``-hosts h:n,...`` in host
order, plus ``-rankmap`` when a host's ranks are not contiguous.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ._hosts import Machine
from .config import Cluster, ConfigError, Host

LOCALHOST = "localhost"
OVERSUBSCRIBE = 32  # ranks per slot at most, even with oversubscribe: true


@dataclass(frozen=True)
class Place:
    """Where one rank runs."""

    vrank: int
    cluster: str
    local: int
    host: str
    socket: int | None = None  # None: not bound (block placement)
    core: int | None = None  # core index within the socket


@dataclass(frozen=True)
class Layout:
    """One cluster's placement and the Hydra arguments that produce it."""

    cluster: str
    placement: str
    places: tuple[Place, ...]
    hydra_args: tuple[str, ...]


@dataclass(frozen=True)
class _Node:
    name: str
    slots: int  # resolved
    slots_given: bool
    sockets: int | None
    cores_per_socket: int | None
    path: str

    @property
    def cores(self) -> int | None:
        if self.sockets is None or self.cores_per_socket is None:
            return None
        return self.sockets * self.cores_per_socket


def place(
    low: Cluster, high: Cluster, machine: Machine, owners: Sequence[str] | None = None
) -> tuple[Layout, Layout]:
    """Place both clusters (the paired policy looks at the other cluster's room).

    `owners`, a rank map (the cluster of each virtual rank), says which virtual rank each
    local rank is: local rank i of a cluster is the i-th smallest virtual rank it holds.
    Without one, low holds 0..x-1 and high x..x+y-1.
    """
    nodes = {c.name: _nodes(c, machine) for c in (low, high)}
    room = {c.name: _room(c, nodes[c.name]) for c in (low, high)}
    both_paired = low.placement == high.placement == "paired"
    layouts = []
    vranks = cluster_vranks(low.ranks, high.ranks, owners)
    for cluster, other in ((low, high), (high, low)):
        mine = room[cluster.name]
        _check_fit(cluster, nodes[cluster.name], mine)
        if both_paired:
            theirs = room[other.name]
            paired = [min(r, theirs[j] if j < len(theirs) else 0) for j, r in enumerate(mine)]
        else:
            paired = list(mine)
        hosts = _fill(paired, [r - n for r, n in zip(mine, paired, strict=True)], cluster.ranks)
        layouts.append(_layout(cluster, nodes[cluster.name], hosts, vranks[cluster.name]))
    return layouts[0], layouts[1]


def cluster_vranks(
    low: int, high: int, owners: Sequence[str] | None = None
) -> dict[str, tuple[int, ...]]:
    """The virtual ranks of each cluster, by local rank (the rank map's, or the default's)."""
    if owners is None:
        owners = ["low"] * low + ["high"] * high
    return {c: tuple(v for v, o in enumerate(owners) if o == c) for c in ("low", "high")}


def _nodes(cluster: Cluster, machine: Machine) -> list[_Node]:
    """Return the cluster's distinct hosts, in order, with slots and shape resolved."""
    merged: dict[str, list[Host]] = {}
    for host in cluster.hosts:
        merged.setdefault(host.name, []).append(host)
    nodes = []
    for name, entries in merged.items():
        local = name == LOCALHOST
        if len(entries) == 1 and entries[0].slots is None:
            slots, given = (machine.cpus if local else 1), False
        else:  # named several times: the sum, an entry without slots counting 1
            slots, given = sum(h.slots or 1 for h in entries), True
        shaped = next((h for h in entries if h.sockets is not None), None)
        if shaped is not None:
            sockets, cps = shaped.sockets, shaped.cores_per_socket
        elif cluster.sockets is not None:
            sockets, cps = cluster.sockets, cluster.cores_per_socket
        elif local:
            sockets, cps = machine.sockets, machine.cores_per_socket
        else:
            sockets, cps = None, None
        path = entries[0].path or f"clusters.{cluster.name}.hosts"
        nodes.append(_Node(name, slots, given, sockets, cps, path))
    return nodes


def _room(cluster: Cluster, nodes: list[_Node]) -> list[int]:
    if cluster.placement == "block":
        return [n.slots for n in nodes]
    room = []
    for n in nodes:
        if n.cores is None:
            raise ConfigError(
                n.path,
                f"placement 'paired' needs the shape of host {n.name!r}: give 'sockets' and "
                f"'cores_per_socket' in its entry or for the whole cluster",
            )
        room.append(min(n.slots, n.cores) if n.slots_given else n.cores)
    return room


def _fill(paired: list[int], rest: list[int], ranks: int) -> list[int]:
    """The node index of each of `ranks` ranks: the paired room first, then the rest, wrapped.

    Only as long as the ranks: a node's room may be a huge slot count.
    """
    order: list[int] = []
    for counts in (paired, rest):
        for j, n in enumerate(counts):
            order += [j] * min(n, ranks - len(order))
            if len(order) == ranks:
                return order
    return [order[i % len(order)] for i in range(ranks)]  # oversubscribed: fewer than ranks


def _check_fit(cluster: Cluster, nodes: list[_Node], room: list[int]) -> None:
    total = sum(room)
    if cluster.ranks <= total or (cluster.oversubscribe
                                  and cluster.ranks <= OVERSUBSCRIBE * total):
        return
    what = "slots" if cluster.placement == "block" else "physical cores"
    listing = ", ".join(f"{n.name}:{r}" for n, r in zip(nodes, room, strict=True))
    if cluster.oversubscribe:
        unsized = [n.name for n in nodes if not n.slots_given and n.name != LOCALHOST]
        hint = f"; give the hosts' slots, as {unsized[0]}:8" if unsized else ""
        raise ConfigError(
            f"clusters.{cluster.name}",
            f"{cluster.ranks} ranks do not fit in {total} {what} on [{listing}], even "
            f"oversubscribed: at most {OVERSUBSCRIBE} ranks per {what[:-1]} (more wait for a "
            f"core far longer than they run){hint}",
        )
    why = "" if cluster.placement == "block" else "placement 'paired' puts one rank per core; "
    raise ConfigError(
        f"clusters.{cluster.name}",
        f"{cluster.ranks} ranks do not fit in {total} {what} on [{listing}] "
        f"({why}set oversubscribe: true to allow it)",
    )


def _layout(
    cluster: Cluster, nodes: list[_Node], hosts: list[int], vranks: tuple[int, ...]
) -> Layout:
    seen = [0] * len(nodes)  # processes so far per node: Hydra binds by this local index
    places = []
    for local, j in enumerate(hosts):
        node, i = nodes[j], seen[j]
        seen[j] += 1
        socket = core = None
        if cluster.placement == "paired" and node.sockets and node.cores_per_socket:
            socket, core = i % node.sockets, (i // node.sockets) % node.cores_per_socket
        places.append(Place(vranks[local], cluster.name, local, node.name, socket, core))
    args = _hydra_args(cluster, nodes, hosts)
    return Layout(cluster.name, cluster.placement, tuple(places), args)


def _hydra_args(cluster: Cluster, nodes: list[_Node], hosts: list[int]) -> tuple[str, ...]:
    args: list[str] = []
    used = sorted(set(hosts))
    if any(nodes[j].name != LOCALHOST for j in used):
        counts = {j: hosts.count(j) for j in used}
        args += ["-hosts", ",".join(f"{nodes[j].name}:{counts[j]}" for j in used)]
        if hosts != sorted(hosts):  # Hydra fills hosts in order: say where each rank goes
            index = {j: k for k, j in enumerate(used)}
            args += ["-rankmap", ",".join(str(index[j]) for j in hosts)]
    # else: Hydra's default already is this machine, with no limit.
    if cluster.placement == "paired":
        args += ["-bind-to", "core", "-map-by", "socket"]
    return tuple(args)


def describe(layouts: tuple[Layout, ...]) -> str:
    """Render the rank map as a table in virtual-rank order, for --dry-run."""
    rows = [("vrank", "cluster", "local", "host", "socket", "core")]
    for p in sorted((p for x in layouts for p in x.places), key=lambda p: p.vrank):
        bound = p.socket is not None
        socket, core = (str(p.socket), str(p.core)) if bound else ("-", "-")
        rows.append((str(p.vrank), p.cluster, str(p.local), p.host, socket, core))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    right = {0, 2, 4, 5}
    lines = [
        "  " + "  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in
                         enumerate(zip(row, widths, strict=True))).rstrip()
        for row in rows
    ]  # fmt: skip
    return "\n".join(lines)


__all__ = ["Layout", "Place", "cluster_vranks", "describe", "place"]
