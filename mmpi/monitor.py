"""Communication monitoring from the program: sessions in the spirit of MPI_T performance variables.

    from mmpi import monitor
    monitor.start()              # count from now on (mmpi-run --monitor DIR starts at join)
    monitor.phase("solve")       # what follows counts into the phase "solve"
    row = monitor.read()         # this rank's counters now: what it sent to each rank
    matrix = monitor.matrix()    # the whole job's matrix now (collective over COMM_WORLD)
    monitor.stop(); monitor.reset()

Counted are the messages a rank sends to each virtual rank, by kind: "p2p" (the program's
point-to-point messages) and "coll" (what its collectives move: the messages and crossings
through the bridge as they are, the native collectives inside a cluster as the data an ideal
algorithm would move), with a histogram of sizes by power of two. A peer in the other cluster
means the bytes crossed the zipper (see `layout`). Off unless started: then every hook in the
library is one `is None` test. Outside a bridged job, every call raises MMPIError.
"""

from __future__ import annotations

import os

from ._engine.monitor import BUCKETS, Monitor, Session
from ._runtime import bootstrap as _bootstrap
from .errors import MMPIError
from .wire.rendezvous import ENV_MONITOR


def _engine():
    engine = _bootstrap.engine()
    if engine is None:
        raise MMPIError("mmpi.monitor: not in a bridged job (start the program with mmpi-run)")
    return engine


def start() -> None:
    """Count from now on (keeps what was counted before a stop)."""
    engine = _engine()
    if Session.monitor is None:
        Session.monitor = Monitor(engine.vrank, engine.layout.owners)
    engine.set_monitor(Session.monitor)


def stop() -> None:
    """Stop counting (what was counted stays readable)."""
    _engine().set_monitor(None)


def running() -> bool:
    """Whether counting is on."""
    engine = _bootstrap.engine()
    return engine is not None and engine.monitor is not None


def reset() -> None:
    """Forget what was counted (counting goes on if it was on)."""
    if Session.monitor is not None:
        Session.monitor.reset()


def phase(name: str) -> None:
    """Count into phase `name` from now on ("main" is the phase of a run that names none)."""
    if Session.monitor is None:
        raise MMPIError("mmpi.monitor.phase: monitoring is not started")
    Session.monitor.phase(str(name))


def read(phase: str | None = None) -> dict:
    """The counters of this rank now: lists indexed by destination virtual rank.

    Keys: p2p_msgs, p2p_bytes, coll_msgs, coll_bytes, hist_p2p, hist_coll (per rank, BUCKETS
    sizes), layout (the cluster of each rank), phase; `phase` None: all phases summed; and
    combined (this rank's sends that went as dynamic broadcasts: sends, crossings,
    bytes_not_crossed; all phases).
    """
    mon = Session.monitor
    if mon is None:
        raise MMPIError("mmpi.monitor.read: monitoring is not started")
    names = list(mon.phases) if phase is None else [phase]
    n = mon.size
    out = {k: [0] * n for k in ("p2p_msgs", "p2p_bytes", "coll_msgs", "coll_bytes")}
    hist = {k: [[0] * BUCKETS for _ in range(n)] for k in ("hist_p2p", "hist_coll")}
    for name in names:
        data = mon.phases[name].to_json(name)
        for k in out:
            out[k] = [a + b for a, b in zip(out[k], data[k], strict=True)]
        for k in hist:
            hist[k] = [[a + b for a, b in zip(x, y, strict=True)]
                       for x, y in zip(hist[k], data[k], strict=True)]
    return {**out, **hist, "layout": list(mon.owners), "phase": phase,
            "combined": dict(mon.combined)}


def matrix(phase: str | None = None):
    """The job's matrices now, on every rank (a collective call over COMM_WORLD).

    A dict of N x N numpy arrays (row: sender, column: receiver): p2p_msgs, p2p_bytes,
    coll_msgs, coll_bytes; and `forwarded`, True where the pair is in different clusters.
    """
    import numpy as np

    comm = _bootstrap.world()
    if comm is None:
        raise MMPIError("mmpi.monitor.matrix: not in a bridged job")
    rows = comm.allgather(read(phase))
    owners = rows[0]["layout"]
    out = {k: np.array([r[k] for r in rows], dtype=np.int64)
           for k in ("p2p_msgs", "p2p_bytes", "coll_msgs", "coll_bytes")}
    out["forwarded"] = np.array([[a != b for b in owners] for a in owners])
    return out


def save(directory: str | None = None) -> str:
    """Write this rank's counters to `directory` (default: $MMPI_MONITOR).

    As mmpi-run's --monitor does at the end: `rank-<vrank>.json`. Returns the file's path.
    """
    directory = directory or os.environ.get(ENV_MONITOR)
    if not directory:
        raise MMPIError("mmpi.monitor.save: no directory (give one, or run with mmpi-run "
                        "--monitor DIR)")
    if Session.monitor is None:
        raise MMPIError("mmpi.monitor.save: monitoring is not started")
    return Session.monitor.save(directory, _engine().cluster)


__all__ = ["start", "stop", "running", "reset", "phase", "read", "matrix", "save",
           "ENV_MONITOR"]
