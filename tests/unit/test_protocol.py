"""The wire protocol encodes and decodes without I/O, and rejects malformed input."""

import pytest

from mmpi.errors import ProtocolError
from mmpi.wire import protocol as P


def test_envelope_roundtrip():
    env = P.Envelope(P.K_P2P, src=3, dst=7, tag=32767, context=1, nbytes=5 << 30,
                     chunk=1 << 20, xfer=42)
    buf = env.pack()
    assert len(buf) == P.ENVELOPE_SIZE
    assert P.unpack(buf) == env
    assert P.dst_of(buf) == 7


def test_pack_into_leaves_payload_alone():
    buf = bytearray(P.ENVELOPE_SIZE + 4)
    buf[P.ENVELOPE_SIZE:] = b"abcd"
    P.Envelope(P.K_P2P, 0, 1, 5, 0, 4).pack_into(buf)
    assert bytes(buf[P.ENVELOPE_SIZE:]) == b"abcd"
    assert P.unpack(buf).nbytes == 4


def test_with_xfer_rewrites_only_xfer():
    env = P.Envelope(P.K_P2P, 1, 2, 3, 0, 10_000_000, 1 << 20, 9)
    buf = bytearray(env.pack())
    P.with_xfer(buf, 12345)
    out = P.unpack(buf)
    assert out.xfer == 12345
    assert (out.src, out.dst, out.tag, out.nbytes, out.chunk) == (1, 2, 3, 10_000_000, 1 << 20)


@pytest.mark.parametrize("nbytes,chunk,expected", [
    (10, 4, [(0, 4), (4, 4), (8, 2)]),
    (8, 4, [(0, 4), (4, 4)]),
    (1, 1 << 20, [(0, 1)]),
])
def test_chunks_cover_the_message(nbytes, chunk, expected):
    assert list(P.chunks(nbytes, chunk)) == expected
    env = P.Envelope(P.K_P2P, 0, 1, 0, 0, nbytes, chunk, 1)
    assert env.nchunks == len(expected)


def test_short_buffer_is_a_protocol_error():
    with pytest.raises(ProtocolError, match="shorter than an envelope"):
        P.unpack(b"\x01\x02")


def test_other_version_is_refused():
    buf = bytearray(P.Envelope(P.K_P2P, 0, 1, 0, 0, 0).pack())
    buf[0] = 99
    with pytest.raises(ProtocolError, match="version 99"):
        P.unpack(buf)


def test_negative_size_is_refused():
    with pytest.raises(ProtocolError, match="negative size"):
        P.Envelope(P.K_P2P, 0, 1, 0, 0, -1)


def test_control_roundtrip_and_missing_fields():
    msg = P.encode_control(low=2, high=3, eager_max=100, chunk=1 << 20)
    assert P.decode_control(msg, ("low", "high"))["high"] == 3
    with pytest.raises(ProtocolError, match="lacks secret"):
        P.decode_control(msg, ("secret",))
    with pytest.raises(ProtocolError, match="malformed"):
        P.decode_control(b"\xff{", ())


def test_crossing_roundtrip_carries_the_call_number():
    buf = P.pack_crossing(src=2, dst=0, tag=4, context=1, call=17, payload=b"abcdefgh")
    assert P.unpack_crossing(buf) == (2, 1, 4, 17)
    assert bytes(buf[P.ENVELOPE_SIZE:]) == b"abcdefgh"
    assert P.unpack(buf).aux == 17  # the same envelope as every other message


def test_crossing_with_a_wrong_size_is_refused():
    buf = P.pack_crossing(2, 0, 4, 1, 0, b"abcd")
    with pytest.raises(ProtocolError, match="says 4 bytes, carries 3"):
        P.unpack_crossing(buf[:-1])
    with pytest.raises(ProtocolError, match="shorter than an envelope"):
        P.unpack_crossing(buf[:5])
    buf[0] = 99
    with pytest.raises(ProtocolError, match="version 99"):
        P.unpack_crossing(buf)


def test_plain_eager_reads_what_pack_eager_into_wrote():
    buf = bytearray(P.ENVELOPE_SIZE + 3)
    P.pack_eager_into(buf, 4, 9, 77, 12, 3)
    buf[P.ENVELOPE_SIZE:] = b"abc"
    assert P.plain_eager(buf) == (4, 77, 12)
    env = P.unpack(buf)
    assert (env.src, env.tag, env.context) == (4, 77, 12)


@pytest.mark.parametrize("change", ["flags", "kind", "version", "size", "short"])
def test_plain_eager_leaves_everything_else_to_unpack(change):
    buf = bytearray(P.ENVELOPE_SIZE + 2)
    flags = P.F_SYNC if change == "flags" else 0
    P.pack_eager_into(buf, 1, 2, 3, 4, 2 if change != "size" else 5, flags, 7)
    if change == "kind":
        buf[1] = P.K_ACK
    if change == "version":
        buf[0] = P.VERSION + 1
    if change == "short":
        buf = buf[:P.ENVELOPE_SIZE - 1]
    assert P.plain_eager(buf) is None
    if change in ("version", "short"):
        with pytest.raises(ProtocolError):
            P.unpack(buf)
