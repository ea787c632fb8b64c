"""The forwarder daemon: open a port per cluster, admit both, hand out the layout, relay, stop.

Admission (who may connect, and what happens to strangers) is `_admission.Gate`.

One `Open_port` per cluster, admitted one after the other, each port open only while it is
accepted on: two clusters connecting to one shared port at the same instant, or two connections
queued on a port nobody accepts on yet, can crash MPICH inside `Comm_accept`.
"""

from __future__ import annotations

import faulthandler
import os
import resource
import sys
import threading
import time
from pathlib import Path

from mpi4py import MPI

from mmpi.wire import BridgeError, watch
from mmpi.wire import protocol as P
from mmpi.wire import rendezvous as R
from mmpi.wire.backoff import Backoff
from mmpi.wire.knobs import KNOBS, env_choice, env_float, env_int
from mmpi.wire.layout import Layout

from . import _compiled
from ._admission import Gate
from ._relay import Link, Relay

DEFAULT_CHUNK = KNOBS["MMPI_CHUNK"].default  # 1 MiB
DEFAULT_EAGER_MAX = 32 << 10
# Chunk buffers per direction, and at most this many per transfer: a small pool stays in
# cache (docs/performance.md, "Forwarder chunk pool"). A receiver that does not drain holds at
# most DEFAULT_DEPTH of them.
DEFAULT_POOL = 4
DEFAULT_DEPTH = 2
# The pool while several pairs of ranks stream through one direction at once: they need more
# buffers in flight, one stream alone runs best with few.
DEFAULT_POOL_MANY = KNOBS["MMPI_FWD_POOL_MANY"].default  # 8
# How the relay work is spread over threads (see Forwarder._serve).
MODES = ("direction", "split", "single")
# Which relay moves the messages: the compiled loop where it was built, else the Python one
# (the reference and the fallback); MMPI_RELAY or --relay choose.
RELAYS = ("auto", "compiled", "python")
# Seconds a connected process has to answer the challenge (MMPI_HELLO_TIMEOUT).
HELLO_TIMEOUT = KNOBS["MMPI_HELLO_TIMEOUT"].default  # 10 s


def rss_mib() -> float:
    """Peak resident memory of this process in MiB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class Forwarder:
    """One forwarder: `run()` admits the clusters, relays until both say BYE, then closes."""

    def __init__(self, rendezvous: str | Path, *, index: int = 0, connect_timeout: float = 60.0,
                 chunk: int = DEFAULT_CHUNK, pool_chunks: int = DEFAULT_POOL,
                 depth: int = DEFAULT_DEPTH,
                 eager_max: int = DEFAULT_EAGER_MAX, eager_budget: int = 16 << 20,
                 mode: str = "split", relay: str | None = None, log=None,
                 owners=None) -> None:
        self.rendezvous = Path(rendezvous)
        # The cluster of each virtual rank (a rank map); None: the one mmpi-run wrote in the
        # rendezvous directory (R.LAYOUT_FILE), else the default layout.
        self.owners = tuple(owners) if owners is not None else None
        self.index = index
        self.connect_timeout = connect_timeout
        self.chunk = chunk
        self.pool_chunks = pool_chunks
        self.depth = depth
        self.eager_max = eager_max
        self.eager_budget = eager_budget
        # Knobs are read here, not at import, so that a bad one is reported like any error.
        self.pool_many = env_int("MMPI_FWD_POOL_MANY")
        self.hello_timeout = env_float("MMPI_HELLO_TIMEOUT")
        if mode not in MODES:
            raise BridgeError(f"unknown relay mode {mode!r}; one of {', '.join(MODES)}")
        self.mode = mode
        relay = relay or env_choice("MMPI_RELAY")
        if relay not in RELAYS:
            raise BridgeError(f"unknown relay {relay!r}; one of {', '.join(RELAYS)}")
        if relay == "compiled" and not _compiled.AVAILABLE:
            raise BridgeError(f"the compiled relay is not available: {_compiled.WHY_NOT} "
                              "(reinstall with a C compiler present, or use --relay python)")
        self.compiled = relay != "python" and _compiled.AVAILABLE
        self.log = log or (lambda msg: print(f"mmpi-forwarder[{index}]: {msg}", flush=True))
        self.links: dict[str, Link] = {}
        self.relays: list[Relay] = []
        self._admitted = threading.Event()
        self._gate = Gate(self.rendezvous, index, self.hello_timeout, self._warn)
        self._last_ping = 0.0
        self._membership: watch.Membership | None = None  # with mmpi-run's rank watch

    # -- start-up -------------------------------------------------------------------------
    def _warn(self, msg: str) -> None:
        print(f"mmpi-forwarder[{self.index}]: {msg}", file=sys.stderr, flush=True)

    def _watchdog(self) -> None:
        if not self._admitted.wait(self.connect_timeout):
            missing = [c for c in R.CLUSTERS if c not in self.links]
            print(f"mmpi-forwarder[{self.index}]: cluster(s) {', '.join(missing)} did not "
                  f"connect within {self.connect_timeout:g} s; giving up", file=sys.stderr,
                  flush=True)
            self._failing()
            os._exit(2)  # Comm_accept cannot be interrupted any other way

    def _admit_all(self) -> dict[str, Link]:
        """Open a port per cluster, publish it, and admit each cluster on its own."""
        if MPI.Query_thread() < MPI.THREAD_MULTIPLE:
            raise BridgeError("the forwarder needs MPI_THREAD_MULTIPLE for its relay threads, "
                              f"this MPI gives level {MPI.Query_thread()}")
        R.write_atomic(self.rendezvous / f"forwarder.{self.index}.pid", str(os.getpid()))
        # From here on mmpi-run sees at once if this process is killed (wire/watch.py).
        self._membership = watch.register(self.rendezvous, watch.FORWARDER, self.index,
                                          os.getpid())
        threading.Thread(target=self._watchdog, daemon=True).start()
        for c in R.CLUSTERS:
            # A port exists only while we accept on it: two connections queued on one port
            # while nobody accepts there crash MPICH 5.0.2 inside the next Comm_accept (seen
            # with a stranger and the real cluster waiting on the high port while the low one
            # was being admitted). The other cluster waits for the port file meanwhile.
            port = MPI.Open_port()
            R.write_atomic(self.rendezvous / R.port_file(c, self.index), port)
            self.links[c] = self._gate.admit(c, port)
            MPI.Close_port(port)
        self._admitted.set()
        return self.links

    def _hand_out_layout(self) -> Layout:
        """Tell every rank of both clusters the layout and this forwarder's parameters."""
        layout = self._layout()
        fields = dict(low=layout.low_size, high=layout.high_size, eager_max=self.eager_max,
                      chunk=self.chunk)
        if not layout.is_blocks:  # a rank map; the default layout's message stays as it was
            fields["owners"] = list(layout.owners)
        for c, link in self.links.items():
            link.place(layout.vranks(c))
            msg = P.encode_control(**fields)
            reqs = [link.ctrl.Isend([msg, MPI.BYTE], r, P.T_LAYOUT) for r in range(link.size)]
            MPI.Request.Waitall(reqs)
        return layout

    def _layout(self) -> Layout:
        """The job's layout: the rank map's, if any (its cluster sizes checked), else blocks."""
        low, high = self.links["low"].size, self.links["high"].size
        if self.owners is None:
            self.owners = R.read_layout(self.rendezvous)
        if self.owners is None:
            return Layout(low, high)
        try:
            layout = Layout.from_owners(self.owners)
        except ValueError as exc:
            raise BridgeError(f"the rank map is not a layout: {exc}") from None
        if (layout.low_size, layout.high_size) != (low, high):
            raise BridgeError(f"the rank map places {layout.low_size} ranks in low and "
                              f"{layout.high_size} in high, but {low}+{high} connected")
        return layout

    # -- relaying -------------------------------------------------------------------------
    def _relay_failed(self, relay: Relay, exc: BaseException) -> None:
        print(f"mmpi-forwarder[{self.index}]: relay {relay.name_short} failed: {exc}",
              file=sys.stderr, flush=True)
        self._failing()
        os._exit(3)  # a half-dead forwarder would hang both clusters; die loudly instead

    def run(self) -> int:
        """Serve one bridged job from admission to shutdown; return an exit status."""
        try:
            status = self.serve(self._admit_all())
        except BaseException:
            self._failing()
            raise
        finally:
            self._gate.close()
        if self._membership is not None:  # served: ending now is no failure
            self._membership.leave()
        return status

    def _failing(self) -> None:
        """Tell mmpi-run that this forwarder ends by itself: its own words will say why."""
        if self._membership is not None:
            self._membership.aborting()

    def serve(self, links: dict[str, Link]) -> int:
        """Relay between the clusters of `links` ("low", "high") until both said BYE; close.

        `links` come from admission (`run`), or from anywhere else that joins the clusters
        by intercommunicators (the tests' fake link does it inside one MPI job).
        """
        t0 = time.monotonic()
        self.links = links
        layout = self._hand_out_layout()
        self.log(f"admitted low={layout.low_size} high={layout.high_size} ranks "
                 f"(rss {rss_mib():.0f} MiB, relay {self.relay_name})")
        low, high = self.links["low"], self.links["high"]
        opts = dict(chunk=self.chunk, pool=self.pool_chunks, depth=self.depth,
                    pool_many=self.pool_many,
                    eager_budget=self.eager_budget, on_error=self._relay_failed)
        kind = _compiled.CompiledRelay if self.compiled else Relay
        self.relays = [kind(low, high, **opts), kind(high, low, **opts)]
        if self.compiled:
            # one C loop for both directions, or one per direction; no GIL between them
            groups = [[r] for r in self.relays] if self.mode == "direction" else [self.relays]
            threads = [threading.Thread(target=self._guard,
                                        args=(g[0], _compiled.serve, g), daemon=True,
                                        name="relay-" + "+".join(r.name_short for r in g))
                       for g in groups]
            for t in threads:
                t.start()
            self._heartbeat(lambda: any(t.is_alive() for t in threads))
            for t in threads:
                t.join()
        elif self.mode == "direction":
            for r in self.relays:
                r.start()
            self._heartbeat(lambda: any(r.is_alive() for r in self.relays))
            for r in self.relays:
                r.join()
        else:
            def done() -> bool:
                return all(r.finished for r in self.relays)

            split = self.mode == "split"
            threads = [threading.Thread(target=self._guard,
                                        args=(self.relays[0], self._serve, done),
                                        daemon=True, name="relay-envelopes" if split else "relay")]
            if split:
                threads += [threading.Thread(target=self._guard, args=(r, r.move, done),
                                             daemon=True, name=f"move-{r.name_short}")
                            for r in self.relays]
            for t in threads:
                t.start()
            self._heartbeat(lambda: not done())
            for t in threads:
                t.join()
        # Every rank has said BYE and every relayed byte is delivered: release and close.
        # Should closing stall (MPI gives no timeout here), show where before the launcher's
        # grace period ends and it kills us.
        faulthandler.dump_traceback_later(5, exit=False)
        for link in self.links.values():
            MPI.Request.Waitall([link.ctrl.Isend([b"", MPI.BYTE], r, P.T_BYE_ACK)
                                 for r in range(link.size)])
        for link in self.links.values():
            link.data.Disconnect()
            link.ctrl.Disconnect()
        faulthandler.cancel_dump_traceback_later()
        self.log(self.summary(time.monotonic() - t0))
        return 0

    @property
    def relay_name(self) -> str:
        """The relay in use, as the start-up line names it."""
        if self.compiled:
            return "compiled"
        return "python" + (f" (compiled relay unavailable: {_compiled.WHY_NOT})"
                           if not _compiled.AVAILABLE else "")

    def _heartbeat(self, running) -> None:
        """Tell every rank we are alive every HEARTBEAT seconds while the relays run."""
        pending: list[MPI.Request] = []
        while running():
            time.sleep(P.HEARTBEAT / 10)
            if time.monotonic() - self._last_ping < P.HEARTBEAT:
                continue
            self._last_ping = time.monotonic()
            pending = [r for r in pending if not r.Test()]
            for link in self.links.values():
                pending += [link.ctrl.Isend([b"", MPI.BYTE], r, P.T_PING)
                            for r in range(link.size)]
        # Complete (and so free) the last pings: MPICH's Comm_disconnect waits until no request
        # holds a reference to the communicator, and an unfreed request holds one for ever,
        # even after its send is done. (Seen as a forwarder stuck in Disconnect after a job.)
        MPI.Request.Waitall(pending)

    # Why "split" is the default: one thread polling both directions hands the GIL to nobody
    # on small messages, and each direction's mover takes the multi-chunk streams
    # (docs/performance.md, "Relay threads").
    def _serve(self, done) -> None:
        """Poll both directions from one thread until `done()` (movers alongside in split)."""
        busy = Backoff()
        low, high = self.relays
        quiet = 0
        while True:
            # Both directions every round (no short cut: one's traffic must not starve the
            # other's).
            if low.poll() | high.poll():
                busy.reset()
                quiet = 0
                continue
            # The end of the job is checked only every 32nd quiet round: it costs more than
            # the probes themselves, and the job's end can wait 32 yields.
            quiet += 1
            if quiet % 32 == 0 and done():
                break
            busy.idle()

    def _guard(self, relay: Relay, fn, *args) -> None:
        """Run `fn(*args)` in a relay thread; an error there takes the forwarder down."""
        try:
            fn(*args)
        except BaseException as exc:
            self._relay_failed(relay, exc)

    def summary(self, elapsed: float) -> str:
        """One line: messages and bytes per direction."""
        parts = [f"{r.name_short} {r.messages} msgs {r.bytes} B" for r in self.relays]
        use = resource.getrusage(resource.RUSAGE_SELF)
        busy = sum(r.busy for r in self.relays)
        return (f"done in {elapsed:.2f} s: " + ", ".join(parts) + f"; peak rss {rss_mib():.0f} "
                f"MiB; cpu {use.ru_utime + use.ru_stime:.3f} s, busy {busy:.3f} s")
