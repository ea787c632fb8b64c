"""Seeded fuzz of dynamic broadcasts: bursts of one buffer to many ranks, mixed with the rest.

usage: burstfuzz.py SEED SECONDS

Every round, from a plan all ranks draw alike, each rank sends a random mix of
* bursts: one buffer to several random ranks (either cluster) by Isend, by persistent sends
  started together (Startall), or one object by isend, completed with Waitall;
* plain sends (small or large) to single ranks, some between the sends of a burst;
and receives everything with ANY_SOURCE/ANY_TAG receives posted up front, per-source receives
or matched probes, some ranks only after a pause; a round ends when its messages are all in.
The tag of each message is its number among the messages from its sender to its receiver, so
every receive checks that nothing is lost, duplicated or reordered (each source's tags arrive
as 0, 1, 2, ...), and every payload is compared with the bytes the plan says. Prints
`rank R: burstfuzz ok rounds N messages M`.
"""

import pickle
import sys
import time

import numpy as np
from mpi4py import MPI

SEED, SECONDS = int(sys.argv[1]), float(sys.argv[2])
world = MPI.COMM_WORLD
ME, W = world.Get_rank(), world.Get_size()
SIZES = (16, 3000, 40000, 70000, 150000, 300000)


def payload(src: int, rnd: int, item: int, n: int) -> np.ndarray:
    return ((np.arange(n, dtype=np.int64) * 7 + src * 131 + rnd * 17 + item) % 251).astype(
        np.uint8)


def plan(rnd: int):
    """Per sender, its items: (kind, dests, size, item) in send order; kind burst/obj/plain.

    A round's messages are received in it, but with ANY_SOURCE a faster sender's next-round
    message may be taken first: the tags (per pair, across rounds) still say the order.
    """
    rng = np.random.default_rng([SEED, rnd])
    out = []
    for src in range(W):
        items = []
        for item in range(int(rng.integers(1, 5))):
            others = [r for r in range(W) if r != src]
            x = rng.random()
            n = int(rng.choice(SIZES))
            if x < 0.55:
                k = int(rng.integers(2, len(others) + 1))
                dests = [int(d) for d in rng.permutation(others)[:k]]
                kind = ("burst", "persistent", "obj")[int(rng.integers(0, 3))]
                items.append((kind, dests, n, item))
            else:
                items.append(("plain", [int(rng.choice(others))], n, item))
        out.append(items)
    return out, rng


def send(items, rnd: int, seq: dict) -> tuple[list, list]:
    reqs, persistent = [], []
    for kind, dests, n, item in items:
        data = payload(ME, rnd, item, n)
        tags = []
        for d in dests:
            tags.append(seq.get(d, 0))
            seq[d] = tags[-1] + 1
        if kind == "plain":
            reqs.append(world.Isend(data, dests[0], tags[0]))
        elif kind == "burst":
            reqs += [world.Isend(data, d, t) for d, t in zip(dests, tags, strict=True)]
        elif kind == "persistent":
            ps = [world.Send_init(data, d, t) for d, t in zip(dests, tags, strict=True)]
            MPI.Prequest.Startall(ps)
            reqs += ps
            persistent += ps
        else:
            reqs += [world.isend(data.tobytes(), d, t) for d, t in zip(dests, tags, strict=True)]
    return reqs, persistent


def complete(reqs, persistent, rng) -> None:
    if rng.random() < 0.5:
        MPI.Request.Waitall(reqs)
    else:
        for i in rng.permutation(len(reqs)):
            reqs[i].Wait()
    for p in persistent:
        p.Free()


def expect(rnd: int) -> None:
    """Add round `rnd`'s messages to this rank to WANT."""
    for src, items in enumerate(plan(rnd)[0]):
        for kind, dests, n, item in items:
            for d in dests:
                if d == ME:
                    tag = EXPECT.get(src, 0)
                    EXPECT[src] = tag + 1
                    WANT[(src, tag)] = (kind, payload(src, rnd, item, n).tobytes(), rnd)


def kind_of(src: int, tag: int) -> str:
    """The kind of message (src, tag): a later round's may come first (ANY_SOURCE)."""
    while (src, tag) not in WANT:
        if PLANNED[0] > ROUND[0] + 1000:
            raise AssertionError(f"rank {ME}: message from {src} tag {tag} in no round")
        PLANNED[0] += 1
        expect(PLANNED[0])
    return WANT[(src, tag)][0]


def check(src: int, tag: int, got: bytes, raw: bool) -> None:
    nxt = NEXT.get(src, 0)
    if tag != nxt:
        raise AssertionError(f"rank {ME}: from {src} got tag {tag}, expected {nxt} "
                             "(lost, duplicated or reordered)")
    NEXT[src] = nxt + 1
    kind = kind_of(src, tag)
    _, data, _ = WANT.pop((src, tag))
    if kind == "obj" and raw:
        got = pickle.loads(got)
    if got != data:
        raise AssertionError(f"rank {ME}: wrong bytes from {src} tag {tag} ({kind}, "
                             f"{len(got)} vs {len(data)})")


def owed() -> list[int]:
    """The sources of this round's (and earlier rounds') messages not received yet."""
    return sorted({s for (s, _), w in WANT.items() if w[2] <= ROUND[0]})


def receive(rng) -> int:
    """Receive this round's messages, and any of a later round that come first.

    A round ends only when its messages are all in: ANY_SOURCE may take a later round's
    message in the place of this round's, and leaving that one for later would make the
    program erroneous (its sender waits for it to be received while this rank waits in the
    next round's bcast, which MPI lets synchronize, as the bridge's collective check does).
    Returns how many messages were received.
    """
    received = 0
    if rng.random() < 0.2:
        time.sleep(0.05)  # post nothing for a while: the bytes must wait (or pass on) anyway
    how = rng.random()
    if how < 0.4:  # everything up front, ANY_SOURCE/ANY_TAG
        count = sum(w[2] <= ROUND[0] for w in WANT.values())
        bufs = [bytearray(2 * max(SIZES)) for _ in range(count)]
        reqs = [world.Irecv(b, MPI.ANY_SOURCE, MPI.ANY_TAG) for b in bufs]
        sts = [MPI.Status() for _ in reqs]
        MPI.Request.Waitall(reqs, sts)
        for b, st in zip(bufs, sts, strict=True):
            check(st.Get_source(), st.Get_tag(), bytes(b[:st.Get_count(MPI.BYTE)]), True)
        received = count
    while mine := owed():  # one at a time: probe, then the form the message needs
        st = MPI.Status()
        src = mine[0] if how >= 0.7 else MPI.ANY_SOURCE
        msg = world.mprobe(src, MPI.ANY_TAG, st)
        s, t = st.Get_source(), st.Get_tag()
        if kind_of(s, t) == "obj":
            got = msg.recv()
        else:
            b = bytearray(st.Get_count(MPI.BYTE))
            msg.Recv(b)
            got = bytes(b)
        check(s, t, got, False)
        received += 1
    return received


EXPECT: dict = {}  # source -> tags planned so far
NEXT: dict = {}  # source -> the tag its next message must have
WANT: dict = {}  # (source, tag) -> (kind, bytes, round), planned and not received yet
ROUND, PLANNED = [0], [-1]  # the round running; the last one in WANT


def main() -> None:
    seq: dict = {}
    rounds = messages = 0
    stop = time.monotonic() + SECONDS
    while True:
        go = world.bcast(time.monotonic() < stop if ME == 0 else None, root=0)
        if not go:
            break
        ROUND[0] = rounds
        allitems = plan(rounds)[0]
        if PLANNED[0] < rounds:  # else planned already, when an early message of it came
            PLANNED[0] = rounds
            expect(rounds)
        own = np.random.default_rng([SEED, rounds, ME])
        reqs, persistent = send(allitems[ME], rounds, seq)  # completed after the receives
        messages += receive(own)
        complete(reqs, persistent, own)
        rounds += 1
    assert not WANT, f"rank {ME}: never received {sorted(WANT)[:10]}"
    world.Barrier()
    print(f"rank {ME}: burstfuzz ok rounds {rounds} messages {messages}", flush=True)


main()
