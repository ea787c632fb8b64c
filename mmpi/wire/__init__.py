"""The contract between the processes of one bridged job: ranks, forwarders and mmpi-run.

Everything two of them must agree on lives here and nowhere else: the wire format of what
crosses a forwarder (`protocol`), the rendezvous directory and environment variables that
mmpi-run hands out (`rendezvous`), the virtual-rank layout (`layout`), the `MMPI_*` tuning
knobs (`knobs`), the polling policy every process follows on shared cores (`backoff`), how
a process proves it belongs to the job without sending the secret (`proof`), the rank
watch by which mmpi-run sees a rank leave however it ends (`watch`), and how the compiled
parts are loaded (`compiled`).
The forwarder imports this package and nothing else of mmpi; nothing here imports mpi4py.
"""

from __future__ import annotations

from ..errors import BridgeError, MMPIError, ProtocolError, UsageError
from . import backoff, compiled, knobs, layout, proof, protocol, rendezvous, watch

__all__ = [
    "backoff",
    "compiled",
    "knobs",
    "layout",
    "proof",
    "protocol",
    "rendezvous",
    "watch",
    "BridgeError",
    "MMPIError",
    "ProtocolError",
    "UsageError",
]
