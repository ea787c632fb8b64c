"""Intercommunicator fuzz: random groups, random buffer collectives, every result checked.

`python interfuzz.py SEED ROUNDS [--blocking]`: every rank draws the same plan from SEED.
Each round splits the world into two groups at random (each non-empty, each spread over the
ranks as the draw falls, so across the zipper or not), makes the intercommunicator
(Create_intercomm, or Create_from_groups), Dups it, and runs a random list of calls on the
two: every buffer collective of an intercommunicator with random sizes (0 included), roots
in either group, ops, v-counts and Alltoallw layouts, blocking and non-blocking (started in
the plan's order on each communicator, completed together at the end of the round, two
communicators interleaved). `--blocking` runs every call blocking (MPICH 5.0.2 hangs in a
collective on an intercommunicator after an Ibcast with MPI.PROC_NULL ranks, so the native
run checks the program this way). Prints `rank R: interfuzz ok seed S rounds N calls C`.
"""

import sys

import numpy as np

if "--mmpi" in sys.argv:
    from mmpi import MPI
else:
    from mpi4py import MPI

world = MPI.COMM_WORLD
ME, W = world.Get_rank(), world.Get_size()
SEED, ROUNDS = int(sys.argv[1]), int(sys.argv[2])
BLOCKING = "--blocking" in sys.argv
KINDS = ["Barrier", "Bcast", "Gather", "Gatherv", "Scatter", "Scatterv", "Allgather",
         "Allgatherv", "Alltoall", "Alltoallv", "Alltoallw", "Allreduce", "Reduce",
         "Reduce_scatter_block", "Reduce_scatter"]
OPS = {"SUM": (MPI.SUM, np.add), "MAX": (MPI.MAX, np.maximum), "MIN": (MPI.MIN, np.minimum)}


def val(*key) -> np.ndarray:
    """The data a rank contributes to a call: int32 values drawn from the key."""
    n = key[-1]
    r = np.random.default_rng([SEED, *[k & 0x7FFFFFFF for k in key[:-1]]])
    return r.integers(-1000, 1000, n, dtype=np.int32)


class Call:
    """One collective on one intercommunicator, drawn the same on every rank."""

    def __init__(self, rng, inter, groups, mine: int, tag: int) -> None:
        self.inter, self.groups, self.g, self.tag = inter, groups, mine, tag
        self.kind = str(rng.choice(KINDS))
        self.n = int(rng.choice([0, 1, 3, 17, 200]))
        self.root_group = int(rng.integers(2))
        self.root = int(rng.integers(len(groups[self.root_group])))
        self.op = str(rng.choice(list(OPS)))
        self.blocking = BLOCKING or bool(rng.integers(2))
        # per (group, local rank) counts of the v-forms, drawn for both groups
        self.counts = [[[int(rng.integers(0, 5)) for _ in range(len(groups[1 - g]))]
                        for _ in range(len(groups[g]))] for g in (0, 1)]
        self.total = int(rng.integers(1, 4)) * len(groups[0]) * len(groups[1])
        self.check = None

    # the world rank of local rank i of group g, and what it gives to the call
    def who(self, g, i):
        return self.groups[g][i]

    def data(self, g, i, n, to=0):
        return val(self.tag, self.who(g, i), to, n)

    def start(self):
        k, g, inter, n = self.kind, self.g, self.inter, self.n
        lr, ls, rs = inter.Get_rank(), inter.Get_size(), inter.Get_remote_size()
        other = 1 - g
        rooted = k in ("Bcast", "Gather", "Gatherv", "Scatter", "Scatterv", "Reduce")
        if rooted:
            here = g == self.root_group
            root = (MPI.ROOT if lr == self.root else MPI.PROC_NULL) if here else self.root
        call = getattr(inter, k if self.blocking else "I" + k[0].lower() + k[1:])
        args, want = self._args(k, g, lr, ls, rs, other, n, root if rooted else None)
        self.check = want
        req = call(*args)
        return None if self.blocking else req

    def _args(self, k, g, lr, ls, rs, other, n, root):
        """The call's arguments here, and a function checking what they hold after."""
        z = np.int32
        if k == "Barrier":
            return (), lambda: None
        if k == "Bcast":
            buf = self.data(g, lr, n) if root == MPI.ROOT else np.full(n, -7, z)
            want = None if root in (MPI.ROOT, MPI.PROC_NULL) else \
                self.data(other, self.root, n)
            return (buf, root), lambda: want is None or _same(buf, want, self)
        if k in ("Gather", "Gatherv"):
            v = k == "Gatherv"
            counts = [self.counts[other][j][0] if v else n for j in range(rs)]
            if root == MPI.ROOT:
                buf = np.full(sum(counts), -7, z)
                want = np.concatenate([self.data(other, j, c) for j, c in enumerate(counts)]
                                      or [np.zeros(0, z)])
                return (None, [buf, counts] if v else buf, root), \
                    lambda: _same(buf, want, self)
            mine = self.data(g, lr, self.counts[g][lr][0] if v else n)
            return (mine, None, root), lambda: None
        if k in ("Scatter", "Scatterv"):
            v = k == "Scatterv"
            if root == MPI.ROOT:
                counts = [self.counts[other][j][0] if v else n for j in range(rs)]
                send = np.concatenate([self.data(g, lr, c, j) for j, c in enumerate(counts)]
                                      or [np.zeros(0, z)])
                return ([send, counts] if v else send, None, root), lambda: None
            if root == MPI.PROC_NULL:
                return (None, None, root), lambda: None
            c = self.counts[g][lr][0] if v else n
            buf = np.full(c, -7, z)
            want = self.data(other, self.root, c, lr)
            return (None, buf, root), lambda: _same(buf, want, self)
        if k in ("Allgather", "Allgatherv"):
            v = k == "Allgatherv"
            counts = [self.counts[other][j][0] if v else n for j in range(rs)]
            buf = np.full(sum(counts), -7, z)
            want = np.concatenate([self.data(other, j, c) for j, c in enumerate(counts)]
                                  or [np.zeros(0, z)])
            mine = self.data(g, lr, self.counts[g][lr][0] if v else n)
            return (mine, [buf, counts] if v else buf), lambda: _same(buf, want, self)
        if k in ("Alltoall", "Alltoallv", "Alltoallw"):
            # to remote rank j: counts[g][lr][j] values (n each for Alltoall)
            sc = [n if k == "Alltoall" else self.counts[g][lr][j] for j in range(rs)]
            rc = [n if k == "Alltoall" else self.counts[other][i][lr] for i in range(rs)]
            send = np.concatenate([self.data(g, lr, c, j) for j, c in enumerate(sc)]
                                  or [np.zeros(0, z)])
            buf = np.full(sum(rc), -7, z)
            want = np.concatenate([self.data(other, i, c, lr) for i, c in enumerate(rc)]
                                  or [np.zeros(0, z)])
            if k == "Alltoall":
                return (send, buf), lambda: _same(buf, want, self)
            if k == "Alltoallv":
                return ([send, sc], [buf, rc]), lambda: _same(buf, want, self)
            sd, rd = _displs(sc, 4), _displs(rc, 4)
            return ([send, sc, sd, [MPI.INT] * rs], [buf, rc, rd, [MPI.INT] * rs]), \
                lambda: _same(buf, want, self)
        op, f = OPS[self.op]
        if k in ("Allreduce", "Reduce"):
            mine = self.data(g, lr, n)
            want = _fold(f, [self.data(other, j, n) for j in range(rs)])
            if k == "Allreduce":
                buf = np.full(n, -7, z)
                return (mine, buf, op), lambda: _same(buf, want, self)
            if root == MPI.ROOT:
                buf = np.full(n, -7, z)
                return (None, buf, op, root), lambda: _same(buf, want, self)
            return (mine if root != MPI.PROC_NULL else None, None, op, root), lambda: None
        # Reduce_scatter(_block): each group's vectors have `total` values, split over the
        # receiving group equally (block) or by counts drawn from the total
        mine = self.data(g, lr, self.total)
        whole = _fold(f, [self.data(other, j, self.total) for j in range(rs)])
        if k == "Reduce_scatter_block":
            each = self.total // ls
            buf = np.full(each, -7, z)
            return (mine, buf, op), lambda: _same(buf, whole[lr * each:(lr + 1) * each], self)
        cuts = sorted(int(x) for x in np.random.default_rng([SEED, self.tag, g]).integers(
            0, self.total + 1, ls - 1))
        counts = [b - a for a, b in zip([0, *cuts], [*cuts, self.total], strict=True)]
        at = sum(counts[:lr])
        buf = np.full(counts[lr], -7, z)
        return (mine, buf, counts, op), \
            lambda: _same(buf, whole[at:at + counts[lr]], self)


def _displs(counts, size):
    out, at = [], 0
    for c in counts:
        out.append(at)
        at += c * size
    return out


def _fold(f, arrays):
    out = arrays[0].copy()
    for a in arrays[1:]:
        out = f(out, a)
    return out


def _same(got, want, call):
    if not np.array_equal(got, want):
        raise AssertionError(f"seed {SEED}: rank {ME}: {call.kind} (tag {call.tag}, n {call.n}, "
                             f"root {call.root_group}:{call.root}) gave {got[:8]} ... want "
                             f"{want[:8]} ...")


def round_(r: int, calls: int) -> int:
    rng = np.random.default_rng([SEED, r])
    k = int(rng.integers(1, W))  # group 1's size
    order = rng.permutation(W).tolist()
    groups = [sorted(order[k:]), sorted(order[:k])]
    g = 0 if ME in groups[0] else 1
    mine, theirs = groups[g], groups[1 - g]
    if rng.integers(2):
        local = world.Split(g, ME)
        inter = local.Create_intercomm(0, world, theirs[0], tag=r)
        local.Free()
    else:
        wg = world.Get_group()
        inter = MPI.Intercomm.Create_from_groups(wg.Incl(mine), 0, wg.Incl(theirs), 0,
                                                 f"fuzz{r}")
    comms = [inter, inter.Dup()]
    plan = [Call(rng, comms[int(rng.integers(2))], groups, g, 1000 * r + i)
            for i in range(int(rng.integers(3, 12)))]
    reqs = [q for q in (c.start() for c in plan) if q is not None]
    MPI.Request.Waitall(reqs)
    for c in plan:
        c.check()
    for c in comms:
        c.Free()
    return calls + len(plan)


done = 0
for rnd in range(ROUNDS):
    done = round_(rnd, done)
world.Barrier()
print(f"rank {ME}: interfuzz ok seed {SEED} rounds {ROUNDS} calls {done}", flush=True)
