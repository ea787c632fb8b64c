"""Joining the bridge (our MPI_Init): connect, get the layout, build COMM_WORLD.

At import, or in MPI.Init()/Init_thread() if the program set mpi4py.rc.initialize = False
(then COMM_WORLD exists before, and becomes the world there; a rank that never calls them
joins as it exits). Native mode unless the launcher set MMPI_RENDEZVOUS. Bridged: every rank
first registers with mmpi-run's rank watch (`wire.watch`; it says "bye" once finalized), local
rank 0 waits for the forwarder's port file for this cluster, the cluster connects collectively,
rank 0 answers the forwarder's challenge with an HMAC of the job secret (in the private
rendezvous directory; the secret itself never travels), every rank waits to be admitted, the
cluster Dups a fresh control and a data channel from the connection (protocol Rule 8), and
every rank waits for the forwarder's layout message.
"""

from __future__ import annotations

import atexit
import os
import sys
import time
from pathlib import Path

from ..errors import BridgeError, StateError
from ..wire import protocol as P
from ..wire import rendezvous as R
from ..wire import watch
from ..wire.knobs import env_int
from . import progress as _progress

_engine = None
_world = None
_membership: watch.Membership | None = None  # our registration with mmpi-run's rank watch


def engine():
    """The engine of this rank once the bridge is joined, else None."""
    return _engine


def world():
    """The bridged COMM_WORLD once the bridge is joined, else None."""
    return _world


def spawned() -> bool:
    """Whether a rank spawned this process (MPI_Comm_spawn, through its cluster's Hydra).

    Not one of the job's ranks, it runs plain mpi4py beside them.
    """
    return os.environ.get("PMI_SPAWNED") == "1"


def bridging() -> bool:
    """Whether this process is a rank of a job that mmpi-run started (the bridge is for it)."""
    return bool(os.environ.get(R.ENV_RENDEZVOUS)) and not spawned()


def initialize_at_import() -> bool:
    """Whether MPI starts when the program imports it (mpi4py.rc.initialize, as mpi4py reads it)."""
    from .._startup.hook import rc_option

    return rc_option("initialize", True) not in (False, "no")


class _NotInitialized:
    """The core of COMM_WORLD before MPI.Init: every use says so (mpi4py.rc.initialize False)."""

    freed = False

    def __getattr__(self, name: str):
        raise StateError("MPI.COMM_WORLD is used before MPI is initialized: with "
                         "mpi4py.rc.initialize = False, MPI and the bridge start in MPI.Init() "
                         "or MPI.Init_thread()")


def unjoined_world():
    """The COMM_WORLD object before the bridge is joined; `join(world)` makes it the world.

    A program may take `MPI.COMM_WORLD` at import and use it after MPI.Init().
    """
    from .._api.bridged import _blank
    from .._api.comm import Comm
    from .._startup.native import MPI

    world = _blank(Comm)
    world._core, world._name, world._tag_ub = _NotInitialized(), "MPI_COMM_WORLD", 0
    world._errhandler, world._topo = MPI.ERRORS_RETURN, None
    return world


def join_at_exit(world) -> None:
    """A rank that never initializes MPI (mpi4py.rc.initialize = False) joins as it exits.

    So the job stays one bridged job, with nothing to say: mmpi-run takes a job none of whose
    ranks joined for one that ran as separate worlds. Not after an uncaught exception: that
    rank fails, as it would natively.
    """

    def at_exit() -> None:
        from .._startup.native import MPI

        if _engine is not None or MPI.Is_initialized() or hasattr(sys, "last_value"):
            return
        join(world)
        finalize()
        MPI.Finalize()  # mpi4py finalizes at exit only what it initialized itself

    atexit.register(at_exit)


def join(world=None):
    """Join the bridge: return the bridged world communicator (None: not started by mmpi-run).

    `world`: the object to make the world (`unjoined_world`), else a new one.
    """
    rdv = os.environ.get(R.ENV_RENDEZVOUS)
    if not rdv or spawned():
        return None
    cluster = os.environ.get(R.ENV_CLUSTER, "")
    if cluster not in R.CLUSTERS:
        raise BridgeError(f"{R.ENV_CLUSTER} must be 'low' or 'high', got {cluster!r}")
    timeout = float(os.environ.get(R.ENV_CONNECT_TIMEOUT, "60"))

    from .._startup.native import MPI

    if not MPI.Is_initialized():  # joining at exit (join_at_exit): MPI starts here
        MPI.Init_thread(_thread_level(MPI))
    native = MPI.COMM_WORLD
    rank = native.Get_rank()
    path = Path(rdv)
    # First of all: from here on, however this process ends, mmpi-run knows whether it had
    # finalized (the kernel closes the socket for us).
    global _membership
    _membership = watch.register(path, cluster, rank, os.getpid(), min(timeout, 10.0))
    nfwd = int(os.environ.get(R.ENV_FORWARDERS, "1"))
    links = []
    for index in range(nfwd):
        links.append(_connect(native, path, cluster, index, timeout))
    comm = world_over(cluster, native, links, timeout, into=world)
    if os.environ.get(R.ENV_MONITOR):  # mmpi-run --monitor: count from the start
        from .._engine.monitor import Monitor, Session

        Session.monitor = Monitor(_engine.vrank, _engine.layout.owners)
        _engine.set_monitor(Session.monitor)
    # Who is who, for mmpi-run's failure reports (Hydra names dead processes by pid only).
    R.write_atomic(path / f"rank.{cluster}.{rank}.pid", f"{os.getpid()} {_engine.vrank}")
    atexit.register(finalize)
    _install_excepthook(native)
    _install_exit_hook(native, _engine)
    return comm


def _thread_level(MPI) -> int:
    """The level mpi4py would ask for (mpi4py.rc.threads, .thread_level)."""
    from .._startup.hook import rc_option

    if rc_option("threads", True) in (False, "no"):
        return MPI.THREAD_SINGLE
    level = rc_option("thread_level", "multiple")
    return {"single": MPI.THREAD_SINGLE, "funneled": MPI.THREAD_FUNNELED,
            "serialized": MPI.THREAD_SERIALIZED}.get(level, MPI.THREAD_MULTIPLE)


def initial_errhandler(MPI):
    """The error handler mpi4py gives COMM_WORLD for `mpi4py.rc.errors`."""
    from .._startup.hook import rc_option

    errors = rc_option("errors", "exception")
    if errors == "abort":
        return MPI.ERRORS_ABORT
    if errors in ("default", "fatal"):
        return MPI.ERRORS_ARE_FATAL
    return MPI.ERRORS_RETURN


def world_over(cluster: str, local, links: list, timeout: float, *,
               stripe_min: int | None = None, into=None):
    """The bridged COMM_WORLD of this rank of `cluster`, whose native world is `local`.

    `links` (control, data) join it to each forwarder: wait for their layout, start the engine.
    `into`: the object to make the world (`unjoined_world`), else a new one.
    """
    from .. import _backend
    from .._api import group as _group
    from .._api import request
    from .._api.comm import Comm
    from .._api.core import world as make_world
    from .._engine.engine import Engine
    from ..wire.layout import Layout

    layouts = [P.decode_control(_wait_control(ctrl, P.T_LAYOUT, timeout, cluster),
                                ("low", "high", "eager_max", "chunk")) for ctrl, _ in links]
    body = layouts[0]
    shape = ("low", "high", "owners")
    if any([b.get(k) for k in shape] != [body.get(k) for k in shape] for b in layouts):
        raise BridgeError(f"the forwarders disagree on the layout: {layouts}")
    # A rank map (mmpi-run --rank-map) comes as the cluster of each virtual rank.
    layout = (Layout(body["low"], body["high"]) if body.get("owners") is None
              else Layout(body["low"], body["high"], body["owners"]))
    global _engine
    _engine = engine = Engine(
        cluster=cluster, local=local, links=links, layout=layout,
        eager_max=env_int("MMPI_EAGER_MAX", body["eager_max"]),
        chunk=min(b["chunk"] for b in layouts),
        stripe_min=stripe_min or env_int("MMPI_STRIPE_MIN"),
    )
    if engine.local_rank == 0 and os.environ.get("MMPI_VERBOSE"):
        print(f"mmpi: {cluster} cluster's crossing path {_backend.describe(engine.backend)}",
              file=sys.stderr, flush=True)
    core = make_world(engine)
    request.bind(engine)
    _group.bind(engine.layout.vranks(engine.cluster))
    global _world
    if into is None:
        _world = Comm(core, "MPI_COMM_WORLD")
    else:
        Comm.__init__(into, core, "MPI_COMM_WORLD")
        _world = into
    from .._startup.native import MPI

    handler = initial_errhandler(MPI)
    if handler != MPI.ERRORS_RETURN:  # mpi4py.rc.errors, as mpi4py's own world gets it
        _world.Set_errhandler(handler)
    _start_progress(engine, local)
    return _world


def _start_progress(engine, local) -> None:
    """MMPI_PROGRESS: start this rank's progress thread where the mode (or its model) says."""
    asked = _progress.mode_from_env()
    if asked == "off":
        return
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    ranks = engine.layout.size
    procs = env_int("MMPI_HOST_PROCS", ranks + engine.nfwd)
    mode, why = _progress.choose(asked, cores=cores or 1, procs=procs,
                                 ranks=env_int("MMPI_HOST_RANKS", ranks))
    ran = _progress.start(engine, mode, leader=engine.local_rank == 0)
    if engine.vrank == 0 and os.environ.get("MMPI_VERBOSE"):
        print(f"mmpi: progress {ran} ({why})", file=sys.stderr, flush=True)


def _connect(world, path: Path, cluster: str, index: int, timeout: float):
    """Connect this cluster (collectively) to forwarder `index`, prove membership; (ctrl, data)."""
    from .._startup.native import MPI
    from ..wire import proof

    port = error = None
    if world.Get_rank() == 0:
        try:
            port = R.wait_for_file(path / R.port_file(cluster, index), timeout,
                                   f"the port of forwarder {index}")
        except (TimeoutError, OSError) as exc:
            error = f"cluster {cluster!r} could not reach forwarder {index}: {exc}"
    port, error = world.bcast((port, error), root=0)
    if error:
        raise BridgeError(error)
    acc = world.Connect(port, MPI.INFO_NULL, 0)
    what = f"forwarder {index}"
    if world.Get_rank() == 0:
        challenge = P.decode_control(
            _wait_control(acc, P.T_CHALLENGE, timeout, cluster, f"no challenge from {what}",
                          "is it admitting another connection?"),
            ("nonce",))
        answer = proof.prove(R.read_secret(path), proof.ADMIT, str(challenge["nonce"]),
                             cluster, index)
        hello = P.encode_control(cluster=cluster, size=world.Get_size(), proof=answer)
        acc.Send([hello, MPI.BYTE], 0, P.T_HELLO)
    _wait_control(acc, P.T_ADMIT, timeout, cluster, f"not admitted by {what}",
                  "its log says why")
    # Traffic goes only over channels made after the proof; the connection itself is done.
    ctrl, data = acc.Dup(), acc.Dup()
    acc.Free()
    return ctrl, data


def _wait_control(ctrl, tag: int, timeout: float, cluster: str,
                  missing: str = "no layout from the forwarder",
                  hint: str = "did the other cluster start?") -> bytearray:
    """Poll (not block: blocking spins a core) for one control message from the forwarder."""
    from .._startup.native import MPI
    from ..wire.backoff import Backoff

    st = MPI.Status()
    deadline = time.monotonic() + timeout
    backoff = Backoff(spin=1e-3, max_sleep=5e-3)
    while True:
        msg = ctrl.Improbe(0, tag, st)
        if msg is not None:
            buf = bytearray(st.Get_count(MPI.BYTE))
            msg.Recv([buf, MPI.BYTE])
            return buf
        if time.monotonic() > deadline:
            raise BridgeError(
                f"cluster {cluster!r}: {missing} within {timeout:g} s ({hint})"
            )
        backoff.idle()


def finalize() -> None:
    """Leave the bridge cleanly (idempotent); runs at exit before mpi4py's MPI_Finalize."""
    if _engine is not None and not _engine.finalized:
        if _membership is not None:  # mmpi-run need not wait for this rank to fail by itself
            _membership.finishing()
        _progress.stop()
        _save_monitor()
        _engine.finalize()
        _leave_watch()
        if os.environ.get("MMPI_SKIP_MPI_FINALIZE"):
            _exit_without_mpi_finalize(_engine.local)


def _aborting() -> None:
    """Tell mmpi-run's rank watch that this rank calls MPI_Abort (Hydra will say why)."""
    if _membership is not None:
        _membership.aborting()


def _leave_watch() -> None:
    """Tell mmpi-run's rank watch that this rank has finalized: its exit is no failure."""
    global _membership
    if _membership is not None:
        _membership.leave()
        _membership = None


def _save_monitor() -> None:
    """mmpi-run --monitor: write this rank's counters before leaving."""
    directory = os.environ.get(R.ENV_MONITOR)
    from .._engine.monitor import Session

    if directory and Session.monitor is not None:
        Session.monitor.save(directory, _engine.cluster)


def _exit_without_mpi_finalize(local) -> None:
    """End the process after the bridge's clean goodbye, skipping MPI_Finalize.

    Over UCX's TCP transport (the one that crosses network namespaces) MPICH 5.0.2 segfaults
    in MPI_Finalize in most runs of a job that used Connect/Accept (in ucp_worker_destroy,
    while reporting a request leaked by the connection handshake). Everything the job needs
    is done by then, so mmpi-run's `transport: tcp` sets MMPI_SKIP_MPI_FINALIZE and each rank
    leaves here instead: wait until the whole cluster is here, remove the MPICH shared-memory
    segments it maps (MPI_Finalize would have), flush, exit 0.
    """
    from .._startup.native import MPI

    local.Barrier()
    with open("/proc/self/maps") as maps:
        mine = {line.split()[-1] for line in maps if "/dev/shm/mpich_shm_" in line}
    for path in mine:
        try:
            os.unlink(path.removesuffix(" (deleted)"))
        except OSError:
            pass  # a cluster-mate removed it first
    sys.stdout.flush()
    sys.stderr.flush()
    _flush_c_streams()  # os._exit skips C's stdio: a C extension's printf would be lost
    del MPI
    os._exit(0)


def _flush_c_streams() -> None:
    try:
        import ctypes

        ctypes.CDLL(None).fflush(None)
    except (OSError, AttributeError):
        pass


def _install_exit_hook(world, engine) -> None:
    """sys.exit(non-zero) in one rank aborts its cluster instead of hanging the others.

    Its peers may be waiting for it, and a clean goodbye would wait for them: a deadlock
    that only mmpi-run's timeout would end. mpi4py's `python -m mpi4py` does the same.
    """
    real_exit = sys.exit

    def exit(status=None):
        if status not in (None, 0) and not engine.finalized:
            _aborting()
            print(f"mmpi: rank {engine.vrank} ({engine.cluster}:{engine.local_rank}) called "
                  f"sys.exit({status!r}) before the job finished; aborting", file=sys.stderr,
                  flush=True)
            time.sleep(0.3)  # let Hydra forward the output first (see the except hook)
            world.Abort(status if isinstance(status, int) else 1)
        real_exit(status)

    sys.exit = exit


def _install_excepthook(world) -> None:
    """An uncaught exception in one rank aborts its cluster, so mmpi-run ends the whole job."""
    previous = sys.excepthook

    def hook(etype, value, tb):
        _aborting()  # first: Hydra may kill us on a cluster-mate's abort while we print
        previous(etype, value, tb)
        try:
            sys.stderr.flush()
            sys.stdout.flush()
            # Hydra drops what is still in its pipes when a job aborts (seen: the last
            # traceback lines lost in 4 of 40 runs); give it a moment to forward them.
            time.sleep(0.3)
        finally:
            world.Abort(1)

    sys.excepthook = hook
