"""Both rank backends speak the wire protocol byte for byte (run on one process).

argv[1]: compiled or python (mmpi._backend). `send_eager` sends to this process itself on
COMM_SELF, as it would to a forwarder: the bytes must be what `protocol.pack_eager_into` /
`pack_crossing` make for the same fields. `drain` must return every waiting message, in order,
with its tag; the compiled one reads the envelope of a plain eager one as `protocol.plain_eager`
does (src -1 for any other) and completes the receives posted for plain eager ones as
mmpi/_engine/p2p.py does, the Python one hands every message on (src -1); `wait_link` must say
whether one waits; `reap` must empty the outbox once the sends completed.
"""

import sys

from mpi4py import MPI

from mmpi._backend import compiled, python
from mmpi._engine.matching import MatchQueues, Posted
from mmpi._engine.op import Op
from mmpi.wire import protocol as P

COMPILED = sys.argv[1] == "compiled"
crank = compiled.backend() if COMPILED else python.PythonBackend()
assert crank is not None, compiled.WHY_NOT
h = crank.link(MPI.COMM_SELF)
cases = [  # (mpitag, src, dst, tag, context, flags, aux, payload)
    (P.T_EAGER, 0, 5, 7, 0, 0, 0, b"12345678"),
    (P.T_EAGER, 3, 1, 2**29 - 3, 41, 0, 0, b""),
    (P.T_EAGER, 2, 0, 0, 9, P.F_SYNC, 123456, bytes(range(256)) * 3),
    (P.T_COLL, 1, 6, 11, 70000, 0, 2**32 - 1, b"x"),
]
assert crank.wait_link(h, 3) is False, "wait_link saw a message on an empty link"
assert crank.drain(h, None) is None
for mpitag, src, dst, tag, ctx, flags, aux, payload in cases:
    crank.send_eager(h, mpitag, src, dst, tag, ctx, flags, aux, memoryview(payload))
assert crank.wait_link(h, 1000) is True
got = crank.drain(h, None)
assert got is not None and len(got) == len(cases), got
for case, (rtag, buf, *head) in zip(cases, got, strict=True):
    mpitag, src, dst, tag, ctx, flags, aux, payload = case
    assert rtag == mpitag, (rtag, mpitag)
    plain = P.plain_eager(buf) if mpitag == P.T_EAGER and COMPILED else None
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
assert crank.drain(h, None) is None
for _ in range(100):
    if crank.reap():
        break
assert crank.pending() == 0 and crank.reap() is True
# many sends: the outbox reaps as it goes and loses none
for i in range(300):
    crank.send_eager(h, P.T_EAGER, 0, 0, i, 0, 0, 0, i.to_bytes(4, "little"))
seen = []
while len(seen) < 300:
    for _, buf, *_ in crank.drain(h, None) or ():
        seen.append(int.from_bytes(buf[P.ENVELOPE_SIZE:], "little"))
assert seen == list(range(300)), seen[:10]
while not crank.reap():
    pass


if not COMPILED:  # the Python backend completes nothing itself: the engine's arrivals do
    ctx = type("Ctx", (), {})()
    ctx.from_world, ctx.queues = {7: 0, 3: 1}, MatchQueues()
    op = Op(matched=False)
    ctx.queues.posted.append(Posted(1, 4, memoryview(bytearray(8)), op, "Irecv"))
    crank.send_eager(h, P.T_EAGER, 3, 0, 4, 5, 0, 0, memoryview(b"AAAAAAAA"))
    got = []
    while not got:
        got = crank.drain(h, {5: ctx}) or []
    assert not op.done and [(src, bytes(b[P.ENVELOPE_SIZE:])) for _, b, src, _, _ in got] == \
        [(-1, b"AAAAAAAA")], got
    while not crank.reap():
        pass
    print("CRANK WIRE OK", flush=True)
    sys.exit(0)


# drain with the engine's contexts completes, itself, a posted receive that takes a plain eager
# message whole (the rules of mmpi/_engine/p2p.py), and hands on everything else unchanged
class Ctx:
    def __init__(self, members):
        self.from_world = {w: r for r, w in enumerate(members)}
        self.queues = MatchQueues()


def post(ctx, source, tag, nbytes, after=None):
    op = Op(matched=False)
    op.after = after
    view = None if nbytes is None else memoryview(bytearray(nbytes))
    ctx.queues.posted.append(Posted(source, tag, view, op, "Irecv"))
    return op, view


ctx = Ctx([7, 3])  # world ranks 7 and 3 are ranks 0 and 1 of context 5
first, v1 = post(ctx, 1, 4, 8)
second, v2 = post(ctx, None, None, 8)  # any source, any tag
own, _ = post(ctx, 0, 9, None)  # wants a buffer of its own: Python's
short, _ = post(ctx, 0, 10, 2)  # too small: Python fails it, naming the sizes
later, _ = post(ctx, 0, 11, 8, after=[len])  # steps to run at completion: Python's
sends = [(3, 4, 5, b"AAAAAAAA"), (3, 4, 5, b"BBBB"), (7, 9, 5, b"own"), (7, 10, 5, b"toolong"),
         (7, 11, 5, b"later"), (7, 12, 6, b"unknown context"), (9, 12, 5, b"not a member")]
for src, tag, cid, payload in sends:
    crank.send_eager(h, P.T_EAGER, src, 0, tag, cid, 0, 0, memoryview(payload))
crank.send_eager(h, P.T_EAGER, 3, 0, 4, 5, P.F_SYNC, 1, memoryview(b"sync"))
got = []
while len(got) < 6:
    got += crank.drain(h, {5: ctx}) or []
assert first.done and first.matched and (first.source, first.tag, first.nbytes) == (1, 4, 8)
assert bytes(v1) == b"AAAAAAAA", bytes(v1)
assert second.done and (second.source, second.tag, second.nbytes) == (1, 4, 4), second.nbytes
assert bytes(v2[:4]) == b"BBBB"
assert not (own.done or short.done or later.done)
assert [r.op for r in ctx.queues.posted] == [own, short, later], "completed receives stay posted"
left = [(bytes(buf[P.ENVELOPE_SIZE:]), src) for _, buf, src, _, _ in got]
assert left == [(b"own", 7), (b"toolong", 7), (b"later", 7), (b"unknown context", 7),
                (b"not a member", 9), (b"sync", -1)], left
assert crank.drain(h, {5: ctx}) is None
# once a message is left to Python, the later ones are too: it must meet the posted receives
# first (the message left here would be a large one's envelope, for the same receive)
ctx = Ctx([7, 3])
anyone, _ = post(ctx, None, None, 8)
crank.send_eager(h, P.T_EAGER, 3, 0, 4, 5, P.F_SYNC, 1, memoryview(b"first"))
crank.send_eager(h, P.T_EAGER, 3, 0, 4, 5, 0, 0, memoryview(b"second"))
got = []
while len(got) < 2:
    got += crank.drain(h, {5: ctx}) or []
assert not anyone.done and [bytes(b[P.ENVELOPE_SIZE:]) for _, b, *_ in got] == \
    [b"first", b"second"], got
while not crank.reap():
    pass
print("CRANK WIRE OK", flush=True)
