"""Reading the forwarder links: what the forwarders have sent, handed to whoever it is for.

`LinkReader` is the part of the engine (`_engine.Engine`, its one subclass) that pulls the
links, in Python or with the compiled drain (`_crank.c`), and the first rounds of a wait for
operations that only the links can complete, in C where it can (`wait_plain`).
"""

from __future__ import annotations

import time

from ._native import MPI
from .errors import ProtocolError
from .wire import protocol as P

_BYTE = MPI.BYTE
_ANY_TAG = MPI.ANY_TAG


class LinkReader:
    """The engine's reading of its forwarder links (the engine's own state, its attributes)."""

    def pull_links(self) -> bool:
        """Pull what the forwarders have sent (the bridged half of `progress`)."""
        did = False
        if self.fast is not None:  # the same, each link's messages in one call (_crank.c)
            # what a posted receive takes whole, drain completes itself
            drain, contexts = self.fast.drain, self.contexts
            for i, handle in enumerate(self.handles):
                got = drain(handle, contexts)
                if got is not None:
                    self.hand_on(i, got)
                    did = True
            return did
        st = self._status
        for i, (ctrl, _) in enumerate(self.links):
            while True:
                msg = ctrl.Improbe(0, _ANY_TAG, st)
                if msg is None:
                    break
                self.heard[i] = time.monotonic()
                buf = bytearray(st.Get_count(_BYTE))
                msg.Recv([buf, _BYTE])
                self.on_forwarded(i, buf, st.Get_tag())
                did = True
        return did

    def hand_on(self, link: int, got: list) -> None:
        """What the compiled drain of `link` left to Python, in order."""
        self.heard[link] = time.monotonic()
        plain = self.p2p.on_plain
        for tag, buf, src, utag, cid in got:
            if src < 0:
                self.on_forwarded(link, buf, tag)
            else:  # a plain eager message, its envelope read in C
                plain(link, buf, src, utag, cid)

    def wait_plain(self, ops: list) -> None:
        """The first rounds of a wait for `ops` (receives from the other cluster), in C.

        `wait_ops` drains while posted receives take whole what comes; what it leaves to
        Python is handed on. The wait proper (`wait_for`: back-off, liveness) does the rest.
        """
        if self.fast is None or self.nfwd != 1 or self._fan.held or self.broken is not None:
            return
        wait, handle, contexts = self.fast.wait_ops, self.handles[0], self.contexts
        while True:
            heard, got = wait(handle, contexts, ops, len(self.first))  # the wait's first rounds
            if heard:
                self.heard[0] = time.monotonic()
            if got is None:  # all done, or the idle rounds ran out
                return
            self.hand_on(0, got)

    def on_forwarded(self, link: int, buf: bytearray, tag: int) -> None:
        """Hand a message from forwarder `link` to whoever it is for."""
        if tag == P.T_COLL:
            self.crossings.keep(buf)
        elif tag == P.T_EAGER or tag == P.T_LARGE:
            self.p2p.on_forwarded(link, buf, tag)
        elif tag == P.T_PING:
            pass
        elif tag == P.T_LEFT:
            body = P.decode_control(buf, ("rank", "colls"))
            if body["rank"] != self.vrank:
                colls = {int(k): v for k, v in dict(body["colls"]).items()}
                self.departures.heard(body["rank"], colls)
        elif tag == P.T_BYE_ACK:
            self._bye_acks += 1
        else:
            raise ProtocolError(f"rank {self.vrank}: unexpected control tag {tag} "
                                "from the forwarder")
