"""The compiled rank path speaks the wire protocol byte for byte (run on one process).

`_mmpi_crank.send_eager` sends to this process itself on COMM_SELF, as it would to a
forwarder: the bytes must be what `protocol.pack_eager_into` / `pack_crossing` make for the
same fields. `drain` must return every waiting message, in order, with its tag, and read the envelope of
a plain eager one as `protocol.plain_eager` does (src -1 for any other); `wait_link`
must say whether one waits; `reap` must empty the outbox once the sends completed.
"""

import _mmpi_crank as crank
from mpi4py import MPI

from mmpi.wire import protocol as P

self_comm = MPI.COMM_SELF
h = self_comm.handle
cases = [  # (mpitag, src, dst, tag, context, flags, aux, payload)
    (P.T_EAGER, 0, 5, 7, 0, 0, 0, b"12345678"),
    (P.T_EAGER, 3, 1, 2**29 - 3, 41, 0, 0, b""),
    (P.T_EAGER, 2, 0, 0, 9, P.F_SYNC, 123456, bytes(range(256)) * 3),
    (P.T_COLL, 1, 6, 11, 70000, 0, 2**32 - 1, b"x"),
]
assert crank.wait_link(h, 3) is False, "wait_link saw a message on an empty link"
assert crank.drain(h) is None
for mpitag, src, dst, tag, ctx, flags, aux, payload in cases:
    crank.send_eager(h, mpitag, src, dst, tag, ctx, flags, aux, memoryview(payload))
assert crank.wait_link(h, 1000) is True
got = crank.drain(h)
assert got is not None and len(got) == len(cases), got
for (mpitag, src, dst, tag, ctx, flags, aux, payload), (rtag, buf, *head) in zip(cases, got):
    assert rtag == mpitag, (rtag, mpitag)
    plain = P.plain_eager(buf) if mpitag == P.T_EAGER else None
    assert head == ([-1, 0, 0] if plain is None else list(plain)), (head, plain)
    want = bytearray(P.ENVELOPE_SIZE + len(payload))
    P.pack_eager_into(want, src, dst, tag, ctx, len(payload), flags, aux)
    want[P.ENVELOPE_SIZE:] = payload
    assert type(buf) is bytearray and buf == want, (buf[:40].hex(), want[:40].hex())
    env = P.unpack(buf)
    assert (env.src, env.dst, env.tag, env.context, env.flags, env.aux) == \
        (src, dst, tag, ctx, flags, aux)
    if mpitag == P.T_COLL:
        assert buf == P.pack_crossing(src, dst, tag, ctx, aux, payload)
    if not flags:
        assert P.plain_eager(buf) == (src, tag, ctx)
assert crank.drain(h) is None
for _ in range(100):
    if crank.reap():
        break
assert crank.pending() == 0 and crank.reap() is True
# many sends: the outbox reaps as it goes and loses none
for i in range(300):
    crank.send_eager(h, P.T_EAGER, 0, 0, i, 0, 0, 0, i.to_bytes(4, "little"))
seen = []
while len(seen) < 300:
    for rtag, buf, *_ in crank.drain(h) or ():
        seen.append(int.from_bytes(buf[P.ENVELOPE_SIZE:], "little"))
assert seen == list(range(300)), seen[:10]
while not crank.reap():
    pass
print("CRANK WIRE OK", flush=True)
