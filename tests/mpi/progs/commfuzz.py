"""Communicator fuzz: several communicators alive at once, every kind of call, every result checked.

`python commfuzz.py SEED SECONDS` runs natively (mpiexec) and bridged (mmpi-run) alike. Each
phase, a plan that every rank draws from the same seed makes communicators (Split, Dup,
Create, Create_group) from live ones, and runs on them a random mix of

* point-to-point batches: Isend/Issend/isend (objects) of 0 B to 2 MiB, received by Irecv with
  a specific source and tag, ANY_TAG, ANY_SOURCE, both, by matched probes, or as objects;
* collectives of every kind, blocking and not, buffer and object forms, sizes from 0 to
  hundreds of KiB per rank, IN_PLACE where MPI allows it;

then completes everything and frees some communicators (some while calls on them are still
pending). Non-blocking calls start in an order of each rank's own that keeps only the order on
each communicator (which MPI requires); blocking collectives come in the plan's order. Every
receive and every collective result is compared with what the plan says it must be: what was
received from whom, with what tag and size, in MPI's order. Prints one line per rank,
`rank R: fuzz ok seed S phases P calls C messages M bytes B`; anything wrong raises, naming
the seed, phase and item.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
import zlib

import numpy as np

from mmpi import MPI

world = MPI.COMM_WORLD
ME, W = world.Get_rank(), world.Get_size()
SEED, SECONDS = int(sys.argv[1]), float(sys.argv[2])
OPS = {"SUM": (MPI.SUM, np.add), "MAX": (MPI.MAX, np.maximum), "MIN": (MPI.MIN, np.minimum),
       "BXOR": (MPI.BXOR, np.bitwise_xor)}
COLLS = ["Barrier", "Bcast", "Reduce", "Allreduce", "Gather", "Gatherv", "Scatter", "Scatterv",
         "Allgather", "Allgatherv", "Alltoall", "Alltoallv", "Reduce_scatter_block",
         "Reduce_scatter", "Scan", "Exscan"]
OBJS = ["barrier", "bcast", "reduce", "allreduce", "gather", "scatter", "allgather",
        "alltoall", "scan", "exscan"]
stats = {"communicators": 0, "calls": 0, "batches": 0, "messages": 0, "bytes": 0}


class Wrong(AssertionError):
    pass


WAITING: list = []  # (what, request) being completed, for a dump on SIGUSR1


def dump(_sig, frame) -> None:
    """What this rank waits for (kill -USR1 a rank of a job that seems stuck)."""
    import traceback
    lines = [f"rank {ME}: at",
             *[line for line in traceback.format_stack(frame) if "commfuzz" in line],
             f"rank {ME}: waiting for"]
    for what, req in WAITING:
        done = getattr(req, "_op", None)
        lines.append(f"  {what}: {req!r} {getattr(done, 'done', '')}")
    print("\n".join(lines), file=sys.stderr, flush=True)


signal.signal(signal.SIGUSR1, dump)
PHASE = [0, time.monotonic()]  # the phase running, since when
LIMIT = float(os.environ.get("MMPI_FUZZ_PHASE_LIMIT", "60"))


def watchdog() -> None:
    """A phase that lasts LIMIT seconds is a hang: say where this rank waits, and fail."""
    while True:
        time.sleep(1)
        if time.monotonic() - PHASE[1] > LIMIT:
            print(f"rank {ME}: phase {PHASE[0]} of seed {SEED} hangs ({LIMIT:g} s)",
                  file=sys.stderr, flush=True)
            dump(None, sys._current_frames()[threading.main_thread().ident])
            os._exit(3)


threading.Thread(target=watchdog, daemon=True).start()


def values(key: tuple, wrank: int, n: int, dtype) -> np.ndarray:
    """What world rank `wrank` contributes to item `key`: cheap, and known to every rank."""
    h = zlib.crc32(repr((SEED, key, wrank)).encode())
    return ((np.arange(n, dtype=np.int64) * 31 + h) % 2001 - 1000).astype(dtype)


def size_of(rng) -> int:
    """Elements per rank: often none or a few, sometimes around the eager and block sizes."""
    x = rng.random()
    return (0 if x < 0.12 else int(rng.integers(1, 17)) if x < 0.5 else
            int(rng.integers(100, 1200)) if x < 0.8 else int(rng.integers(3000, 6000))
            if x < 0.95 else int(rng.integers(20000, 60000)))


class Comm:
    """A communicator of the plan: its world ranks in its rank order, and ours if a member."""

    def __init__(self, cid: int, members: tuple[int, ...], comm) -> None:
        self.cid, self.members, self.comm = cid, members, comm
        self.rank = members.index(ME) if ME in members else -1


# -- the plan: communicators ----------------------------------------------------------------------
class Making:
    """New communicators from a live one, planned (the same on every rank), made later."""

    def __init__(self, rng, live: list[Comm], next_id: int) -> None:
        self.parent = parent = live[int(rng.integers(0, len(live)))]
        n = len(parent.members)
        self.how = str(rng.choice(["Split", "Split", "Dup", "Create", "Create_group"]))
        self.made: list[Comm] = []
        if self.how == "Split":
            self.colors = rng.integers(-1, 3, n).tolist()  # -1: UNDEFINED
            self.keys = rng.integers(0, 3, n).tolist()
            groups: dict[int, list] = {}
            for i, c in enumerate(self.colors):
                if c >= 0:
                    groups.setdefault(c, []).append((self.keys[i], i))
            for c in sorted(groups):
                self.made.append(Comm(next_id, tuple(parent.members[i]
                                                     for _, i in sorted(groups[c])), None))
                self.made[-1].color = c
                next_id += 1
        else:
            k = int(rng.integers(1, n + 1))
            self.picked = list(range(n)) if self.how == "Dup" else \
                rng.permutation(n)[:k].tolist()
            self.tag = int(rng.integers(0, 100))
            self.made.append(Comm(next_id, tuple(parent.members[i] for i in self.picked), None))
            next_id += 1
        self.next_id = next_id

    def make(self) -> None:
        """Call MPI (every member of the parent; Create_group: the new members only)."""
        parent, how = self.parent, self.how
        WAITING[:] = [(f"{how} of comm {parent.cid} {parent.members} giving "
                       f"{[(c.cid, c.members) for c in self.made]}", None)]
        if parent.rank < 0:
            return
        if how == "Split":
            mine = self.colors[parent.rank]
            comm = parent.comm.Split(MPI.UNDEFINED if mine < 0 else mine,
                                     self.keys[parent.rank])
            if mine < 0 and comm != MPI.COMM_NULL:
                raise Wrong("Split with UNDEFINED gave a communicator")
            for c in self.made:
                if c.color == mine:
                    c.comm = comm
        elif how == "Dup":
            self.made[0].comm = parent.comm.Dup()
        else:
            new = self.made[0]
            group = parent.comm.Get_group().Incl(self.picked)
            comm = None
            if how == "Create":
                comm = parent.comm.Create(group)
            elif new.rank >= 0:
                comm = parent.comm.Create_group(group, self.tag)
            group.Free()
            if new.rank < 0 and comm not in (None, MPI.COMM_NULL):
                raise Wrong(f"{how}: a non-member got a communicator")
            new.comm = comm if new.rank >= 0 else None
        for c in self.made:
            if c.rank >= 0 and (c.comm.Get_rank(), c.comm.Get_size()) != (c.rank,
                                                                          len(c.members)):
                raise Wrong(f"{how}: rank {c.comm.Get_rank()} of {c.comm.Get_size()}, "
                            f"expected {c.rank} of {len(c.members)}")
        stats["communicators"] += 1


# -- point-to-point batches -----------------------------------------------------------------------
class Batch:
    """Messages on one communicator, (src, dst, tag, count) in the plan's order, and how each
    receiver takes them: Irecv with source and tag (exact), ANY_TAG, ANY_SOURCE, both (any),
    matched probes (probe), or as objects (a batch of objects)."""

    def __init__(self, rng, c: Comm, phase: int, item: int, sync_phase: bool) -> None:
        n = len(c.members)
        self.c, self.key = c, (phase, item)
        self.objects = bool(rng.random() < 0.2)
        self.msgs = []
        for _ in range(int(rng.integers(1, 3 * n + 2))):
            count = size_of(rng) if rng.random() < 0.95 else int(rng.integers(100000, 260000))
            tag = (phase % 4096) * 32 + int(rng.integers(0, 4))  # a phase's own tags
            sync = bool(rng.random() < 0.25)
            self.msgs.append((int(rng.integers(0, n)), int(rng.integers(0, n)), tag, count,
                              sync))
        modes = ["exact", "exact", "any_tag", "any_source"]
        if sync_phase:  # ANY_SOURCE with ANY_TAG could take the next phase's messages
            modes += ["any", "probe"]
        self.mode = [str(rng.choice(modes)) for _ in range(n)]
        self.later: list = []
        self.got: list = []

    def payload(self, k: int):
        src, _, _, n, _ = self.msgs[k]
        data = values((*self.key, k), self.c.members[src], n, np.int64)
        return {"k": k, "data": data} if self.objects else data

    def late(self) -> bool:
        """Whether this rank receives at the phase's end (probes, objects)."""
        return self.objects or self.mode[self.c.rank] == "probe"

    def start(self, reqs: list) -> None:
        c, me = self.c, self.c.rank
        stats["batches"] += 1
        for k, (src, dst, tag, _, sync) in enumerate(self.msgs):
            if src == me:
                p = self.payload(k)
                if self.objects:
                    req = c.comm.issend(p, dst, tag) if sync else c.comm.isend(p, dst, tag)
                else:
                    req = c.comm.Issend(p, dst, tag) if sync else c.comm.Isend(p, dst, tag)
                reqs.append((req, None, f"send {k} ({self.msgs[k][3]}, sync "
                             f"{self.msgs[k][4]}) to {dst} on comm {c.cid} {c.members} "
                             f"{self.key} objects {self.objects} modes {self.mode}"))
                stats["messages"] += 1
                stats["bytes"] += p["data"].nbytes if self.objects else p.nbytes
        mode = self.mode[me]
        mine = [(k, m) for k, m in enumerate(self.msgs) if m[1] == me]
        if self.late():
            self.later = mine
            return
        biggest = max([m[3] for _, m in mine] or [0])
        for k, (src, _, tag, n, _) in mine:
            source = MPI.ANY_SOURCE if mode in ("any_source", "any") else src
            rtag = MPI.ANY_TAG if mode in ("any_tag", "any") else tag
            buf = np.full((n if mode == "exact" else biggest) + 1, -7, np.int64)
            st = MPI.Status()
            reqs.append((c.comm.Irecv(buf, source, rtag), st,
                         f"recv {k} ({mode}) from {src} on comm {c.cid} {self.key}"))
            self.got.append((buf, st))

    def receive_late(self) -> None:
        """Matched probes, or object receives, in the plan's order (every send is posted)."""
        comm = self.c.comm
        for _k, (src, _, _, _, _) in self.later:
            st = MPI.Status()
            if self.objects:
                obj = comm.recv(None, src, MPI.ANY_TAG, st)
                self.got.append((obj, st))
            else:
                msg = comm.Mprobe(MPI.ANY_SOURCE, MPI.ANY_TAG, st)
                buf = np.full(st.Get_count(MPI.INT64_T) + 1, -7, np.int64)
                msg.Recv(buf[:-1])
                self.got.append((buf, st))

    def check(self) -> None:
        """Every message came once, intact, from whom the status says, in MPI's order."""
        me, mode = self.c.rank, self.mode[self.c.rank]
        by_tag = mode in ("exact", "any_source")  # else the order holds per source only
        expect: dict = {}
        for k, (src, dst, tag, _, _) in enumerate(self.msgs):
            if dst == me:
                expect.setdefault((src, tag if by_tag else None), []).append(k)
        if len(self.got) != sum(map(len, expect.values())):
            raise Wrong(f"{self.key}: {len(self.got)} messages, expected "
                        f"{sum(map(len, expect.values()))}")
        for data, st in self.got:
            src, tag = st.Get_source(), st.Get_tag()
            q = expect.get((src, tag if by_tag else None))
            if not q:
                raise Wrong(f"{self.key} on rank {me}: a message from {src} with tag {tag} "
                            f"that was not sent ({mode})")
            k = q.pop(0)
            if self.msgs[k][2] != tag:
                raise Wrong(f"{self.key} on rank {me}: message {k} from {src} has tag {tag}, "
                            f"sent with {self.msgs[k][2]} ({mode}: out of order)")
            want = self.payload(k)
            if self.objects:
                if not isinstance(data, dict) or data["k"] != k or not np.array_equal(
                        data["data"], want["data"]):
                    raise Wrong(f"{self.key} on rank {me}: object {k} from {src} differs")
                continue
            n = st.Get_count(MPI.INT64_T)
            if n != len(want) or not np.array_equal(data[:n], want):
                raise Wrong(f"{self.key} on rank {me}: message {k} from {src} ({n} elements,"
                            f" sent {len(want)}) differs ({mode})")
            if data[n] != -7:
                raise Wrong(f"{self.key} on rank {me}: bytes written past message {k}")


# -- collectives ----------------------------------------------------------------------------------
class Coll:
    """One collective call on a communicator: its arguments, and what it must give."""

    def __init__(self, rng, c: Comm, phase: int, item: int, blocking: bool) -> None:
        self.c, self.key = c, (phase, item)
        n = len(c.members)
        self.blocking = blocking
        self.obj = blocking and rng.random() < 0.25
        self.name = str(rng.choice(OBJS if self.obj else COLLS))
        self.root = int(rng.integers(0, n))
        self.op = str(rng.choice(list(OPS)))
        self.dtype = np.int64 if rng.random() < 0.7 else np.int32
        self.count = size_of(rng)
        self.counts = [size_of(rng) // 4 for _ in range(n)]  # v-variants: per rank
        self.matrix = [[size_of(rng) // 8 for _ in range(n)] for _ in range(n)]  # alltoallv
        self.in_place = rng.random() < 0.25

    def mine(self, wrank: int, n: int):
        return values(self.key, wrank, n, self.dtype)

    def reduce(self, arrays):
        f = OPS[self.op][1]
        out = arrays[0].copy()
        for a in arrays[1:]:
            out = f(out, a)
        return out

    def start(self, reqs: list):
        """Call it (blocking: to the end); return the check to run once it has completed."""
        c, r, n = self.c, self.c.rank, len(self.c.members)
        stats["calls"] += 1
        if self.obj:
            return self._objects()
        name = self.name if self.blocking else "I" + self.name.lower() if self.name == \
            "Barrier" else "I" + self.name[0].lower() + self.name[1:]
        call = getattr(c.comm, name)
        op = OPS[self.op][0]
        m, cnt, root = self.members, self.count, self.root
        if self.name == "Barrier":
            args, check = (), None
        elif self.name == "Bcast":
            buf = self.mine(m[root], cnt) if r == root else np.zeros(cnt, self.dtype)
            args, check = (buf, root), (lambda: self._eq(buf, self.mine(m[root], cnt)))
        elif self.name in ("Reduce", "Allreduce"):
            send = self.mine(m[r], cnt)
            recv = np.zeros(cnt, self.dtype)
            total = self.reduce([self.mine(w, cnt) for w in m])
            here = self.name == "Allreduce" or r == root
            if self.in_place and here:
                recv[:] = send
                send = MPI.IN_PLACE
            args = (send, recv if here else None, op) + ((root,) if self.name == "Reduce" else ())
            check = (lambda: self._eq(recv, total)) if here else None
        elif self.name in ("Gather", "Allgather"):
            send = self.mine(m[r], cnt)
            here = self.name == "Allgather" or r == root
            recv = np.zeros(cnt * n, self.dtype) if here else None
            full = np.concatenate([self.mine(w, cnt) for w in m]) if here else None
            if self.in_place and here:
                recv[r * cnt:(r + 1) * cnt] = send
                send = MPI.IN_PLACE
            args = (send, recv) + ((root,) if self.name == "Gather" else ())
            check = (lambda: self._eq(recv, full)) if here else None
        elif self.name in ("Gatherv", "Allgatherv"):
            cs = self.counts
            send = self.mine(m[r], cs[r])
            here = self.name == "Allgatherv" or r == root
            recv = np.zeros(sum(cs), self.dtype) if here else None
            full = (np.concatenate([self.mine(w, k) for w, k in zip(m, cs, strict=True)])
                    if here else None)
            args = (send, [recv, cs] if here else None) + ((root,) if self.name == "Gatherv"
                                                            else ())
            check = (lambda: self._eq(recv, full)) if here else None
        elif self.name == "Scatter":
            full = self.mine(m[root], cnt * n)
            recv = np.zeros(cnt, self.dtype)
            args = (full if r == root else None, recv, root)
            check = lambda: self._eq(recv, full[r * cnt:(r + 1) * cnt])  # noqa: E731
        elif self.name == "Scatterv":
            cs = self.counts
            full = self.mine(m[root], sum(cs))
            at = int(np.sum(cs[:r]))
            recv = np.zeros(cs[r], self.dtype)
            args = ([full, cs] if r == root else None, recv, root)
            check = lambda: self._eq(recv, full[at:at + cs[r]])  # noqa: E731
        elif self.name == "Alltoall":
            send = self.mine(m[r], cnt * n)
            recv = np.zeros(cnt * n, self.dtype)
            want = np.concatenate([self.mine(w, cnt * n)[r * cnt:(r + 1) * cnt] for w in m])
            if self.in_place:
                recv[:] = send
                send = MPI.IN_PLACE
            args, check = (send, recv), (lambda: self._eq(recv, want))
        elif self.name == "Alltoallv":
            mx = self.matrix  # mx[i][j]: what i sends j
            sc = mx[r]
            rc = [mx[j][r] for j in range(n)]
            send = self.mine(m[r], sum(sc))
            recv = np.zeros(sum(rc), self.dtype)
            parts = []
            for j in range(n):
                theirs = self.mine(m[j], sum(mx[j]))
                at = int(np.sum(mx[j][:r]))
                parts.append(theirs[at:at + mx[j][r]])
            want = np.concatenate(parts) if parts else recv
            args, check = ([send, sc], [recv, rc]), (lambda: self._eq(recv, want))
        elif self.name in ("Reduce_scatter_block", "Reduce_scatter"):
            cs = [cnt] * n if self.name == "Reduce_scatter_block" else self.counts
            send = self.mine(m[r], sum(cs))
            at = int(np.sum(cs[:r]))
            recv = np.zeros(cs[r], self.dtype)
            want = self.reduce([self.mine(w, sum(cs)) for w in m])[at:at + cs[r]]
            args = (send, recv, cs, op) if self.name == "Reduce_scatter" else (send, recv, op)
            check = lambda: self._eq(recv, want)  # noqa: E731
        else:  # Scan, Exscan
            send = self.mine(m[r], cnt)
            recv = np.zeros(cnt, self.dtype)
            upto = [self.mine(w, cnt) for w in m[:r + (self.name == "Scan")]]
            args = (send, recv, op)
            check = (lambda: self._eq(recv, self.reduce(upto))) if upto else None
        if self.name != "Barrier":
            stats["bytes"] += sum(a.nbytes for a in args if isinstance(a, np.ndarray))
        got = call(*args)
        if not self.blocking:
            reqs.append((got, None, f"{self._what()} on comm {c.cid} {self.key}"))
        return check

    def _objects(self):
        c, r, n = self.c, self.c.rank, len(self.c.members)
        comm, m, root = c.comm, self.members, self.root
        mine = [int(x) for x in self.mine(m[r], 3)] + [m[r]]

        def of(w):
            return [int(x) for x in self.mine(w, 3)] + [w]

        name = self.name
        if name == "barrier":
            comm.barrier()
            return None
        if name == "bcast":
            got = comm.bcast(mine if r == root else None, root)
            return lambda: self._same(got, of(m[root]))
        if name in ("reduce", "allreduce", "scan", "exscan"):
            value = sum(mine)
            got = (comm.reduce(value, op=MPI.SUM, root=root) if name == "reduce" else
                   getattr(comm, name)(value, op=MPI.SUM))
            upto = (m if name in ("reduce", "allreduce") else
                    m[:r + 1] if name == "scan" else m[:r])
            if name == "reduce" and r != root:
                return lambda: self._same(got, None)
            if name == "exscan" and r == 0:
                return None
            return lambda: self._same(got, sum(sum(of(w)) for w in upto))
        if name in ("gather", "allgather"):
            got = comm.gather(mine, root) if name == "gather" else comm.allgather(mine)
            want = [of(w) for w in m] if name == "allgather" or r == root else None
            return lambda: self._same(got, want)
        if name == "scatter":
            got = comm.scatter([of(m[root]) + [j] for j in range(n)] if r == root else None,
                               root)
            return lambda: self._same(got, of(m[root]) + [r])
        got = comm.alltoall([mine + [j] for j in range(n)])
        return lambda: self._same(got, [of(w) + [r] for w in m])

    @property
    def members(self):
        return self.c.members

    def _eq(self, got, want) -> None:
        if got.dtype != want.dtype or not np.array_equal(got, want):
            raise Wrong(f"phase/item {self.key} on comm {self.c.cid} (rank {self.c.rank} of "
                        f"{len(self.c.members)}): {self._what()} gave a wrong result")

    def _same(self, got, want) -> None:
        if got != want:
            raise Wrong(f"phase/item {self.key} on comm {self.c.cid}: {self._what()} gave "
                        f"{str(got)[:80]}, expected {str(want)[:80]}")

    def _what(self) -> str:
        return (f"{'' if self.blocking else 'I'}{self.name}(count {self.count}, root "
                f"{self.root}, {self.op}, {np.dtype(self.dtype).name}"
                f"{', IN_PLACE' if self.in_place else ''})")


# -- a phase --------------------------------------------------------------------------------------
def copy_status(into, st) -> None:
    into.source, into.tag = st.Get_source(), st.Get_tag()
    into.Set_elements(MPI.BYTE, st.Get_count(MPI.BYTE))


def complete(reqs: list, rng) -> None:
    """Complete every request, in this rank's own random order and way; fill the statuses."""
    order = rng.permutation(len(reqs)).tolist()
    rq = [reqs[i][0] for i in order]
    sts = [reqs[i][1] for i in order]
    WAITING[:] = [(reqs[i][2], reqs[i][0]) for i in order]
    how = int(rng.integers(0, 4))
    if how == 0:
        for q, st in zip(rq, sts, strict=True):
            q.Wait(st)
    elif how == 1:
        MPI.Request.Waitall(rq, [st if st is not None else MPI.Status() for st in sts])
    else:
        pending = list(range(len(rq)))
        while pending:
            if how == 2:
                st = MPI.Status()
                i = MPI.Request.Waitany([rq[j] for j in pending], st)
                j = pending.pop(i)
                if sts[j] is not None:
                    copy_status(sts[j], st)
                continue
            got = [MPI.Status() for _ in pending]
            done = MPI.Request.Testsome([rq[j] for j in pending], got)
            for k, i in enumerate(done or []):
                if sts[pending[i]] is not None:
                    copy_status(sts[pending[i]], got[k])
            for i in sorted(done or [], reverse=True):
                pending.pop(i)


def phase(p: int, live: list[Comm], next_id: int):
    rng = np.random.default_rng([SEED, p])  # the plan: the same on every rank
    own = np.random.default_rng([SEED, p, ME, 1])  # this rank's own orders
    # new communicators first; more between the segments below (while calls on their parents
    # are still pending)
    for _ in range(int(rng.integers(0, 3))):
        m = Making(rng, live, next_id)
        m.make()
        live, next_id = live + m.made, m.next_id
    sync = bool(rng.random() < 0.3)
    # segments of non-blocking items, each followed by one blocking collective, a making of
    # communicators, or nothing; at most one batch of messages per communicator and phase, so
    # that a wildcard receive of one batch cannot take another's message
    segments, batched = [], set()
    item = 0
    for _ in range(int(rng.integers(1, 4))):
        nb = []
        for _ in range(int(rng.integers(0, 6))):
            c = live[int(rng.integers(0, len(live)))]
            if rng.random() < 0.45 and c.cid not in batched:
                batched.add(c.cid)
                nb.append(Batch(rng, c, p, item, sync))
            else:
                nb.append(Coll(rng, c, p, item, False))
            item += 1
        x = rng.random()
        if x < 0.7:
            c = live[int(rng.integers(0, len(live)))]
            after = Coll(rng, c, p, item, True)
        elif x < 0.85:
            after = Making(rng, live, next_id)
            live, next_id = live + after.made, after.next_id
        else:
            after = None
        segments.append((nb, after))
        item += 1
    frees = [c for c in live[1:] if rng.random() < 0.35]
    early = {c.cid for c in frees if rng.random() < 0.3}  # freed with calls pending
    reqs, checks, batches = [], [], []
    for nb, blocking in segments:
        # this rank's own start order: any interleaving that keeps each communicator's order
        queues: dict[int, list] = {}
        for x in nb:
            if x.c.rank >= 0:
                queues.setdefault(x.c.cid, []).append(x)
        while queues:
            cid = list(queues)[int(own.integers(0, len(queues)))]
            x = queues[cid].pop(0)
            if not queues[cid]:
                del queues[cid]
            if isinstance(x, Batch):
                x.start(reqs)
                batches.append(x)
            else:
                checks.append(x.start(reqs))
        if isinstance(blocking, Making):
            blocking.make()
        elif blocking is not None and blocking.c.rank >= 0:
            checks.append(blocking.start(reqs))
    late = {b.c.cid for b in batches if b.later}
    for c in frees:
        if c.cid in early and c.cid not in late and c.comm is not None:
            c.comm.Free()
    for b in batches:
        if b.later:
            b.receive_late()
    complete(reqs, own)
    for b in batches:
        b.check()
    for check in checks:
        if check is not None:
            check()
    for c in frees:
        if (c.cid not in early or c.cid in late) and c.comm is not None:
            c.comm.Free()
    return [c for c in live if c not in frees], next_id, sync


def main() -> None:
    live = [Comm(0, tuple(range(W)), world)]
    t0 = time.monotonic()
    p, next_id, go = 0, 1, True
    while go:
        PHASE[:] = [p, time.monotonic()]
        try:
            live, next_id, sync = phase(p, live, next_id)
        except Wrong as exc:
            raise Wrong(f"seed {SEED} phase {p}: {exc}") from None
        p += 1
        if sync or p % 8 == 0:  # all meet here (an allreduce); rank 0 says if time is up
            go = world.allreduce(ME != 0 or time.monotonic() - t0 < SECONDS, op=MPI.LAND)
    world.Barrier()
    print(f"rank {ME}: fuzz ok seed {SEED} phases {p} communicators {stats['communicators']} "
          f"collectives {stats['calls']} batches "
          f"{stats['batches']} messages {stats['messages']} bytes {stats['bytes']}", flush=True)


main()
