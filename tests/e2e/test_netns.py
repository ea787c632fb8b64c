"""Two really separated subnets joined only by a zipper, built with Linux network namespaces.

The thesis topology on one machine (root only)::

    ns LOW                        ns ZIP (IP forwarding off)                      ns HIGH
    a0 10.71.1.2 ---veth--- za 10.71.1.1      zb 10.71.2.1 ---veth--- b0 10.71.2.2

A bridged job runs through mmpi-run with ``wrapper: [ip, netns, exec, NS]`` per job,
``transport: tcp`` (UCX would pick shared memory across namespaces otherwise) and the interfaces
pinned with UCX_NET_DEVICES. The proof that nothing goes from subnet A to subnet B except
through the forwarder: the veth byte counters move on both zipper links, and a packet capture
on both links sees only addresses of that link's own subnet.

Only private addresses in namespaces this test creates are used; everything is deleted in a
`finally`. Skipped with the reason when not root, without `ip`, or when `ip netns add` fails.
"""
# ruff: noqa: D103  (test names say what they check)

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import ROOT, mmpi_run_cmd

pytestmark = pytest.mark.mpi

PROGS = Path(__file__).parent / "progs"
SUBNET_A, SUBNET_B = "10.71.1.", "10.71.2."
A_HOST, ZIP_A, ZIP_B, B_HOST = "10.71.1.2", "10.71.1.1", "10.71.2.1", "10.71.2.2"
MESSAGE = 1 << 20  # bytes per all-pairs message


@dataclass(frozen=True)
class Topology:
    """Names of the namespaces; the devices are a0 (low), za and zb (zipper), b0 (high)."""

    low: str
    zipper: str
    high: str

    def run(self, ns: str, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run `argv` inside namespace `ns`."""
        return _ip("netns", "exec", ns, *argv, check=check)

    def counters(self) -> dict[str, tuple[int, int]]:
        """(rx bytes, tx bytes) of every veth end, from the kernel's counters."""
        out = {}
        for ns, dev in ((self.low, "a0"), (self.zipper, "za"), (self.zipper, "zb"),
                        (self.high, "b0")):  # fmt: skip
            stats = json.loads(_ip("-n", ns, "-s", "-j", "link", "show", "dev", dev).stdout)
            out[dev] = (stats[0]["stats64"]["rx"]["bytes"], stats[0]["stats64"]["tx"]["bytes"])
        return out


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    p = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=20)
    if check and p.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {p.stderr.strip()}")
    return p


@pytest.fixture(scope="module")
def topology() -> Iterator[Topology]:
    if os.geteuid() != 0:
        pytest.skip("needs root to create network namespaces")
    if shutil.which("ip") is None:
        pytest.skip("needs the `ip` command (iproute2) to create network namespaces")
    tag = uuid.uuid4().hex[:6]
    topo = Topology(f"mmpi-{tag}-low", f"mmpi-{tag}-zip", f"mmpi-{tag}-high")
    created: list[str] = []
    try:
        for ns in (topo.low, topo.zipper, topo.high):
            p = _ip("netns", "add", ns, check=False)
            if p.returncode != 0:
                pytest.skip(f"`ip netns add` failed: {p.stderr.strip()}")
            created.append(ns)
            # No IPv6 chatter on the links (the capture checks IPv4 addresses), and nothing
            # forwarded between interfaces, least of all in the zipper.
            for setting in (
                "net.ipv6.conf.all.disable_ipv6=1",
                "net.ipv6.conf.default.disable_ipv6=1",
                "net.ipv4.ip_forward=0",
            ):
                topo.run(ns, "sysctl", "-qw", setting, check=False)
            _ip("-n", ns, "link", "set", "lo", "up")
        p = _ip("link", "add", "a0", "netns", topo.low, "type", "veth",
                "peer", "name", "za", "netns", topo.zipper, check=False)  # fmt: skip
        if p.returncode != 0:
            pytest.skip(f"cannot create veth pairs: {p.stderr.strip()}")
        _ip("link", "add", "b0", "netns", topo.high, "type", "veth",
            "peer", "name", "zb", "netns", topo.zipper)  # fmt: skip
        for ns, dev, addr in ((topo.low, "a0", A_HOST), (topo.zipper, "za", ZIP_A),
                              (topo.zipper, "zb", ZIP_B), (topo.high, "b0", B_HOST)):  # fmt: skip
            _ip("-n", ns, "addr", "add", f"{addr}/24", "dev", dev)
            _ip("-n", ns, "link", "set", dev, "up")
        # UCX ignores a device that is not running yet ("network device 'za' is not
        # available"), and a veth's carrier comes up a moment after `link set up`.
        _wait_until_up(topo)
        yield topo
    finally:
        for ns in created:  # deleting a namespace deletes its veth ends, and so the pairs
            _ip("netns", "del", ns, check=False)


def _wait_until_up(topo: Topology, timeout: float = 10.0) -> None:
    devices = ((topo.low, "a0"), (topo.zipper, "za"), (topo.zipper, "zb"), (topo.high, "b0"))
    deadline = time.monotonic() + timeout
    while True:
        states = {
            dev: json.loads(_ip("-n", ns, "-j", "link", "show", "dev", dev).stdout)[0]["operstate"]
            for ns, dev in devices
        }
        if all(state == "UP" for state in states.values()):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"veth links not up after {timeout} s: {states}")
        time.sleep(0.05)


CONNECT = """
import socket, sys
try:
    socket.create_connection((sys.argv[1], 9), timeout=float(sys.argv[2]))
    print("connected")
except ConnectionRefusedError:
    print("refused")  # a host answered: reachable
except socket.timeout:
    print("timeout")
except OSError as exc:
    print(exc.strerror)
"""


def _connect(topo: Topology, ns: str, addr: str, timeout: float = 1.0) -> str:
    return topo.run(ns, sys.executable, "-c", CONNECT, addr, str(timeout)).stdout.strip()


@pytest.mark.timeout(60)
def test_the_subnets_cannot_reach_each_other(topology):
    t = topology
    assert t.run(t.zipper, "cat", "/proc/sys/net/ipv4/ip_forward").stdout.strip() == "0"
    # Each side reaches the zipper on its own subnet (port 9 is closed: the zipper refuses)...
    assert _connect(t, t.low, ZIP_A) == "refused"
    assert _connect(t, t.high, ZIP_B) == "refused"
    # ...and nothing of the other subnet.
    for ns, addrs in ((t.low, (B_HOST, ZIP_B)), (t.high, (A_HOST, ZIP_A))):
        for addr in addrs:
            assert _connect(t, ns, addr) == "Network is unreachable", (ns, addr)
    # Even told to go through the zipper, A's packets for B die there: no forwarding.
    _ip("-n", t.low, "route", "add", f"{B_HOST}/32", "via", ZIP_A)
    try:
        assert _connect(t, t.low, B_HOST, timeout=1.0) == "timeout"
    finally:
        _ip("-n", t.low, "route", "del", f"{B_HOST}/32", "via", ZIP_A)


def _job_file(t: Topology, directory: Path) -> Path:
    path = directory / "netns.yaml"
    path.write_text(
        f"""\
transport: tcp
zipper:
  - host: localhost
    interfaces: {{low: za, high: zb}}
    wrapper: [ip, netns, exec, {t.zipper}]
clusters:
  low: {{ranks: 2, interface: a0, wrapper: [ip, netns, exec, {t.low}]}}
  high: {{ranks: 2, interface: b0, wrapper: [ip, netns, exec, {t.high}]}}
timeouts: {{connect: 20}}
"""
    )
    return path


def _mmpi_run(job: Path, *prog: str) -> subprocess.CompletedProcess[str]:
    cmd = [*mmpi_run_cmd(), "-c", str(job), sys.executable, *prog]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=40, cwd=ROOT)


def _wait_for(path: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} did not appear within {timeout} s")
        time.sleep(0.05)


@pytest.mark.timeout(60)
def test_bridged_jobs_cross_only_through_the_zipper(topology, tmp_path):
    t = topology
    job = _job_file(t, tmp_path)
    capture = tmp_path / "capture.json"
    sniffer = subprocess.Popen(
        ["ip", "netns", "exec", t.zipper, sys.executable, str(PROGS / "sniff.py"), "za,zb",
         str(capture)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        _wait_for(Path(f"{capture}.ready"), 10)
        before = t.counters()
        ring = _mmpi_run(job, "examples/ring.py")
        allpairs = _mmpi_run(job, str(PROGS / "allpairs.py"), str(MESSAGE // 8))
        after = t.counters()
    finally:
        sniffer.terminate()
        sniffer_out = sniffer.communicate(timeout=10)[0]
    # The programs did their work: every rank got past the final barrier.
    assert "[low:0 v0] ring of 4 ranks OK" in ring.stdout, ring.stdout + ring.stderr
    assert allpairs.stdout.count(" exchanges of 1048576 B OK") == 4, (
        allpairs.stdout + allpairs.stderr
    )
    teardown_failures = [_known_teardown_failure(p) for p in (ring, allpairs) if p.returncode]

    delta = {dev: (after[dev][0] - before[dev][0], after[dev][1] - before[dev][1])
             for dev in after}  # fmt: skip
    print(f"\nveth bytes during the two jobs (rx, tx): {delta}")
    # Each of the 2 low ranks sent 1 MiB to each of the 2 high ranks and got as much back:
    # at least 4 MiB each way on both zipper links (and the same on their veth peers).
    crossing = 4 * MESSAGE
    for dev in ("za", "zb"):
        rx, tx = delta[dev]
        assert rx >= crossing and tx >= crossing, (dev, delta)
    assert delta["a0"] == (delta["za"][1], delta["za"][0])
    assert delta["b0"] == (delta["zb"][1], delta["zb"][0])

    assert capture.exists(), sniffer_out
    seen = json.loads(capture.read_text())
    print(f"captured IPv4 [frames, bytes] per source>destination: {seen}")
    for dev, subnet in (("za", SUBNET_A), ("zb", SUBNET_B)):
        flows = seen[dev]["ipv4"]
        assert flows, f"no IPv4 traffic captured on {dev}"
        strangers = {
            flow: counts
            for flow, counts in flows.items()
            if not all(addr.startswith(subnet) for addr in flow.split(">"))
        }
        assert not strangers, f"{dev} carried traffic outside {subnet}0/24: {strangers}"
    # Nothing on A's link was addressed to subnet B, nor came from it.
    assert not any(SUBNET_B in flow for flow in seen["za"]["ipv4"]), seen["za"]
    assert not any(SUBNET_A in flow for flow in seen["zb"]["ipv4"]), seen["zb"]
    if teardown_failures:
        # Everything above, the work and the traffic, holds; only the exit after it failed.
        pytest.xfail(f"{len(teardown_failures)} of 2 jobs: " + "; ".join(teardown_failures))


# How jobs over UCX_TLS=self,tcp (MPICH 5.0.2 wheel) may fail *after* the program finished:
# - MPICH's Comm_connect leaves a UCX request behind on the connecting root (plain mpi4py
#   Connect + Disconnect shows "was not returned to mpool ucp_requests" every time), and UCX
#   sometimes segfaults describing it in MPI_Finalize (ucp_worker_destroy -> ucs_mpool_cleanup
#   -> ucp_proto_config_info_str);
# - the forwarder sometimes never exits after both clusters said goodbye and exited 0.
KNOWN_TEARDOWN = {
    "was killed by signal 11 (SIGSEGV)": "a rank segfaulted in MPI_Finalize (UCX leak report)",
    "did not exit within": "the forwarder did not exit after the clusters finished",
}


def _known_teardown_failure(p: subprocess.CompletedProcess[str]) -> str:
    """Return which known teardown failure `p` had; fail the test if it was anything else."""
    cause = next((x for x in p.stderr.splitlines() if x.startswith("mmpi-run: ")), "")
    for pattern, what in KNOWN_TEARDOWN.items():
        if pattern in cause:
            return what
    pytest.fail(f"unexpected failure of a job that did its work:\n{p.stdout}{p.stderr}")
