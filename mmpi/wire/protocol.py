"""The mmpi wire protocol: envelope layout, transport tags and control messages — no I/O here.

A cross-cluster message travels rank -> forwarder -> rank over MPI intercommunicators. Each
hop carries the same fixed-size envelope in front of (eager) or ahead of (large) the payload.

Rule 1: no handshake. A sender never waits for an answer before its data goes: an eager message
        is envelope+payload in one MPI message; a large one is an envelope on the control
        channel followed at once by its chunks on the data channel.
Rule 2: the forwarder reads envelopes only. Payload bytes are moved, never parsed or unpickled.
Rule 3: chunks of one large message travel on the data channel with the MPI tag named in the
        envelope's `xfer` field for that hop, so several large transfers can be in flight on
        one link without being confused; each hop picks its own `xfer` value.
Rule 4: on each (channel, peer) pair MPI's non-overtaking order is the only ordering we rely
        on: a sender's envelopes reach the forwarder, and the forwarder's reach a receiver, in
        the order they were sent.
Rule 5: with several forwarders, all envelopes from one sender to one receiver go through the
        same forwarder (`route`), which keeps Rule 4's order end to end. A large message may
        be striped: its envelope (no payload, F_STRIPED) takes the route, its bytes travel as
        one K_STRIPE message per forwarder, reassembled by the receiver at known offsets.
Rule 6: a synchronous send's message carries F_SYNC and an id (`aux`); its receiver answers
        with a K_ACK envelope carrying the same id once a receive has matched it. That is the
        one round trip of the protocol, and only synchronous sends make it.
Rule 7: flow control without a handshake on the common path: a receiver grants each sender
        of the other cluster credit for large messages ahead of time (its budget divided
        among them) and returns it in batches (K_CREDIT) as early data is consumed. A sender
        out of credit sends the envelope alone (F_DEFER), which keeps its place in the
        matching order; the receiver pulls the data (K_PULL) once a receive matches it.
Rule 8: admission. On the intercommunicator a port's Accept returns, the forwarder sends a
        challenge (T_CHALLENGE) and expects, as the very first message, rank 0's T_HELLO with
        `proof.prove(secret, ADMIT, nonce, cluster, forwarder index)`. Anything else first,
        or no answer in time, and the connection is refused: everything it sent is
        discarded and its intercommunicator is never used for traffic nor freed while the
        forwarder runs (MPICH would hand a freed context id to the next communicator, and the
        stranger's messages with it). An admitted cluster gets T_ADMIT on every rank; both
        sides then Dup the control and data channels from it and free it: traffic only ever
        flows on communicators created after the proof.
Rule 9: dynamic broadcasts. Sends of the same bytes to several ranks of the other cluster may
        go as one K_TREE message to the first of them and a ticket (F_TREE) to each, in the
        place of its message; the destinations pass the bytes on among themselves, natively
        (mmpi/_engine/fanout.py). The forwarder relays both as any other message.
"""

from __future__ import annotations

import json
import struct
from typing import NamedTuple

from ..errors import ProtocolError

VERSION = 2  # 2: admission by challenge (Rule 8)

# MPI tags on the control channel (the intercommunicator returned by Connect/Accept).
T_EAGER = 1  # envelope + payload
T_LARGE = 2  # envelope only; chunks follow on the data channel
T_COLL = 3  # envelope + payload of a collective's small crossing, relayed as T_EAGER is; the
#             receiver takes these by tag and in arrival order per (context, sender), outside
#             MPI matching (Engine.cross_recv), and the envelope's tag names the collective
T_HELLO = 10  # cluster root -> forwarder: cluster name, size, proof (answers T_CHALLENGE)
T_LAYOUT = 11  # forwarder -> every rank: the virtual-rank layout and link parameters
T_BYE = 12  # rank -> forwarder: I have finished sending; body: {colls} (see T_LEFT)
T_BYE_ACK = 13  # forwarder -> rank: everybody finished, you may disconnect
T_PING = 15  # forwarder -> every rank, every HEARTBEAT seconds: "I am alive"
T_LEFT = 16  # forwarder -> every rank: a rank said BYE; body: {rank, colls}, where colls is the
#              number of collective calls it completed, so a rank stuck in a later one knows it is
#              waiting for somebody who will never come
T_CHALLENGE = 17  # forwarder -> rank 0 of whoever connected: {nonce, index}; see Rule 8
T_ADMIT = 18  # forwarder -> every rank of a cluster whose proof it accepted: Dup the channels

HEARTBEAT = 1.0  # seconds between forwarder heartbeats
LOST_AFTER = 5.0  # default: a rank declares the forwarder lost after this much silence

# Message kinds carried in the envelope.
K_P2P = 1  # a point-to-point message (user or collective context)
K_STRIPE = 2  # one stripe of a striped message: tag = stripe index, aux = stripe-set id
K_ACK = 3  # a receiver matched a synchronous send: aux = the send's id (Rule 6)
K_PULL = 4  # a receiver matched a deferred message: send its data now (aux = its id, Rule 7)
K_CREDIT = 5  # a receiver consumed early data: nbytes more may come (Rule 7)
K_TREE = 6  # a fan-out's bytes, once, to its first destination (aux = the fan-out's id; the
#             payload starts with the other destinations: u32 count, i32 ranks); Rule 9

# Envelope flags.
F_STRIPED = 1  # K_P2P eager envelope with no payload: the bytes come as stripes (aux = id)
F_SYNC = 2  # K_P2P of a synchronous send: acknowledge once matched (aux = the send's id)
F_DEFER = 4  # K_P2P envelope alone: the data waits at the sender for a K_PULL (aux = its id)
F_PULLED = 8  # T_LARGE: the data of a deferred message (aux = its id), outside matching
F_TREE = 16  # K_P2P envelope alone, a fan-out's ticket: nbytes come by K_TREE (aux = its id)

_ENVELOPE = struct.Struct("<BBHiiiiQIII")
# The envelope's fields in wire order (the C parts read them at these offsets: mmpi_wire.h).
WIRE_FIELDS = ("version", "kind", "flags", "src", "dst", "tag", "context", "nbytes", "chunk",
               "xfer", "aux")
ENVELOPE_SIZE = _ENVELOPE.size
MAX_XFER = (1 << 28) - 1  # chunk tags stay well below MPICH's TAG_UB (2**29 - 1)


class _Fields(NamedTuple):
    kind: int
    src: int  # virtual rank of the sender
    dst: int  # virtual rank of the receiver
    tag: int
    context: int  # communicator context id (0 = user's COMM_WORLD)
    nbytes: int  # payload size
    chunk: int = 0  # chunk size of a large message (0 for eager)
    xfer: int = 0  # data-channel tag of this message's chunks on the current hop
    flags: int = 0
    aux: int = 0  # stripe-set id of a striped message and of its stripes


class Envelope(_Fields):
    """Addressing of one message: who sends to whom, with which tag, on which context.

    An immutable tuple: every message that crosses is decoded into one on each rank, and a
    frozen dataclass took 2.0 us to build there against 0.6 us for this (2 cores, idle).
    """

    __slots__ = ()

    def __new__(cls, kind: int, src: int, dst: int, tag: int, context: int, nbytes: int,
                chunk: int = 0, xfer: int = 0, flags: int = 0, aux: int = 0) -> Envelope:
        """Build an envelope; a negative size or an inconsistent chunk is a ProtocolError."""
        _check(nbytes, chunk, xfer)
        return tuple.__new__(cls, (kind, src, dst, tag, context, nbytes, chunk, xfer, flags, aux))

    def pack(self) -> bytes:
        """Encode the envelope to its wire form."""
        return _ENVELOPE.pack(
            VERSION, self.kind, self.flags, self.src, self.dst, self.tag, self.context,
            self.nbytes, self.chunk, self.xfer, self.aux,
        )

    def pack_into(self, buf, offset: int = 0) -> None:
        """Encode the envelope into `buf` at `offset` (no allocation on the eager path)."""
        _ENVELOPE.pack_into(
            buf, offset, VERSION, self.kind, self.flags, self.src, self.dst, self.tag,
            self.context, self.nbytes, self.chunk, self.xfer, self.aux,
        )

    @property
    def nchunks(self) -> int:
        """Number of data-channel messages that follow a large envelope."""
        if self.chunk == 0:
            return 0
        return -(-self.nbytes // self.chunk)


def _check(nbytes: int, chunk: int, xfer: int) -> None:
    if nbytes < 0:
        raise ProtocolError(f"envelope with negative size {nbytes}")
    if chunk < 0 or (nbytes > 0 and chunk == 0 and xfer != 0):
        raise ProtocolError(f"envelope with bad chunk size {chunk}")


def pack_eager_into(buf, src: int, dst: int, tag: int, context: int, nbytes: int,
                    flags: int = 0, aux: int = 0) -> None:
    """Encode the envelope of an eager point-to-point message at the start of `buf`.

    The same bytes as `Envelope(K_P2P, src, dst, tag, context, nbytes).pack_into(buf)`,
    without building the tuple: every small message a rank sends across pays for this.
    """
    _check(nbytes, 0, 0)
    _ENVELOPE.pack_into(buf, 0, VERSION, K_P2P, flags, src, dst, tag, context, nbytes, 0, 0,
                        aux)


def pack_crossing(src: int, dst: int, tag: int, context: int, call: int, payload) -> bytearray:
    """A collective's small crossing (T_COLL), envelope and payload, ready to send.

    The envelope's `aux` carries the sender's collective call number. Built without the
    Envelope tuple: a crossing is on the critical path of every small bridged collective.
    """
    n = len(payload)
    buf = bytearray(ENVELOPE_SIZE + n)
    _ENVELOPE.pack_into(buf, 0, VERSION, K_P2P, 0, src, dst, tag, context, n, 0, 0, call)
    buf[ENVELOPE_SIZE:] = payload
    return buf


def _fields(buf) -> tuple:
    """The envelope's raw fields at the start of `buf`, checked for length and version."""
    if len(buf) < ENVELOPE_SIZE:
        raise ProtocolError(f"message of {len(buf)} bytes is shorter than an envelope")
    fields = _ENVELOPE.unpack_from(buf)
    if fields[0] != VERSION:
        raise ProtocolError(f"peer speaks protocol version {fields[0]}, we speak {VERSION}")
    return fields


def unpack_crossing(buf) -> tuple[int, int, int, int]:
    """(src, context, tag, call) of a T_COLL message; a ProtocolError if it is malformed."""
    _, _, _, src, _, tag, ctx, nbytes, _, _, call = _fields(buf)
    if nbytes != len(buf) - ENVELOPE_SIZE:
        raise ProtocolError(f"collective crossing says {nbytes} bytes, "
                            f"carries {len(buf) - ENVELOPE_SIZE}")
    return src, ctx, tag, call


def plain_eager(buf) -> tuple[int, int, int] | None:
    """(src, tag, context) of a plain eager message (K_P2P, no flags, sound), else None.

    The commonest message a rank receives, read without building an Envelope; anything
    else, malformed ones included, goes to `unpack`, which says what is wrong.
    """
    if len(buf) < ENVELOPE_SIZE:
        return None
    version, kind, flags, src, _, tag, ctx, nbytes, _, _, _ = _ENVELOPE.unpack_from(buf)
    if version != VERSION or kind != K_P2P or flags or nbytes != len(buf) - ENVELOPE_SIZE:
        return None
    return src, tag, ctx


def unpack(buf) -> Envelope:
    """Decode the envelope at the start of `buf`; raise ProtocolError on anything malformed."""
    _, kind, flags, src, dst, tag, ctx, nbytes, chunk, xfer, aux = _fields(buf)
    _check(nbytes, chunk, xfer)
    return tuple.__new__(Envelope, (kind, src, dst, tag, ctx, nbytes, chunk, xfer, flags, aux))


def dst_of(buf) -> int:
    """The destination virtual rank of an encoded envelope, without decoding the rest."""
    return struct.unpack_from("<i", buf, 8)[0]


def with_xfer(buf: bytearray, xfer: int) -> None:
    """Rewrite the `xfer` field of an encoded envelope in place (the forwarder's next hop)."""
    struct.pack_into("<I", buf, ENVELOPE_SIZE - 8, xfer)


def stripe_bounds(nbytes: int, parts: int, k: int) -> tuple[int, int]:
    """(offset, length) of stripe k when `nbytes` are split into `parts` near-equal stripes."""
    base, extra = divmod(nbytes, parts)
    return k * base + min(k, extra), base + (1 if k < extra else 0)


def route(src: int, dst: int, nforwarders: int) -> int:
    """The forwarder that carries every message from src to dst (so their order holds)."""
    return (src + dst) % nforwarders


def chunks(nbytes: int, chunk: int):
    """Yield (offset, length) of each chunk of a large message."""
    for off in range(0, nbytes, chunk):
        yield off, min(chunk, nbytes - off)


# Control messages are rare (start-up, shutdown): JSON keeps them readable and versionable.
def encode_control(**fields) -> bytes:
    """Encode a control message body."""
    return json.dumps({"v": VERSION, **fields}, sort_keys=True).encode()


def decode_control(buf, expect: tuple[str, ...]) -> dict:
    """Decode a control message body and check that it has the `expect`ed fields."""
    try:
        msg = json.loads(bytes(buf).decode())
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ProtocolError(f"malformed control message: {exc}") from exc
    if not isinstance(msg, dict) or msg.get("v") != VERSION:
        raise ProtocolError(f"control message of another protocol version: {msg!r:.80}")
    missing = [k for k in expect if k not in msg]
    if missing:
        raise ProtocolError(f"control message lacks {', '.join(missing)}: {msg!r:.80}")
    return msg
