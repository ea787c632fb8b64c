"""CG: the NPB 3.4 conjugate-gradient kernel — inverse power method on a random sparse matrix."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import INSTALL_HINT, MissingExtra

try:
    import scipy.sparse as sp
except ImportError as exc:
    raise MissingExtra(f"the CG kernel needs scipy, which the nas extra brings: {INSTALL_HINT}") \
        from exc

from mmpi import MPI

from . import _npb
from ._npb import Check, Result, Timer, World

RCOND = 0.1
CGITMAX = 25
EPSILON = 1.0e-10
TAG_TRANSPOSE = 1


@dataclass(frozen=True)
class CGClass:
    """Matrix order, nonzeros per generated row, outer iterations, shift and reference zeta."""

    na: int
    nonzer: int
    niter: int
    shift: float
    zeta: float


CLASSES = {
    "S": CGClass(1400, 7, 15, 10.0, 8.5971775078648),
    "W": CGClass(7000, 8, 15, 12.0, 10.362595087124),
    "A": CGClass(14000, 11, 15, 20.0, 17.130235054029),
    "B": CGClass(75000, 13, 75, 60.0, 22.712745482631),
    "C": CGClass(150000, 15, 75, 110.0, 28.973605592845),
}


@dataclass(frozen=True)
class Partition:
    """NPB's 2-D block decomposition of the matrix, with Fortran's 1-based bounds.

    Reductions across a processor row are NPB's recursive exchanges with `reduce_exch_proc`
    (one entry per halving step, listed for i = 1..l2npcols), not a sub-communicator.
    """

    npcols: int
    nprows: int
    proc_row: int
    proc_col: int
    firstrow: int
    lastrow: int
    firstcol: int
    lastcol: int
    send_start: int
    send_len: int
    exch_proc: int
    exch_recv_length: int
    reduce_exch_proc: tuple[int, ...]
    reduce_send_starts: tuple[int, ...]
    reduce_send_lengths: tuple[int, ...]
    reduce_recv_starts: tuple[int, ...]
    reduce_recv_lengths: tuple[int, ...]

    @property
    def nrows(self) -> int:
        """Rows of the local block."""
        return self.lastrow - self.firstrow + 1

    @property
    def ncols(self) -> int:
        """Columns of the local block."""
        return self.lastcol - self.firstcol + 1

    @property
    def l2npcols(self) -> int:
        """Number of exchange steps in a row reduction."""
        return len(self.reduce_exch_proc)


def process_grid(size: int) -> tuple[int, int]:
    """(npcols, nprows) for a power-of-two count: columns get the extra factor of two."""
    log = _npb.ilog2(size)
    return 1 << (log - log // 2), 1 << (log // 2)


def partition(na: int, me: int, size: int) -> Partition:
    """Work out this rank's block and exchange partners (NPB's setup_submatrix_info)."""
    npcols, nprows = process_grid(size)
    proc_row = me // npcols
    proc_col = me - proc_row * npcols
    if na // npcols * npcols == na:
        col_size = na // npcols
        firstcol = proc_col * col_size + 1
        lastcol = firstcol - 1 + col_size
        row_size = na // nprows
        firstrow = proc_row * row_size + 1
        lastrow = firstrow - 1 + row_size
    else:
        extra_rows = na - na // nprows * nprows
        if proc_row < extra_rows:
            row_size = na // nprows + 1
            firstrow = proc_row * row_size + 1
        else:
            row_size = na // nprows
            firstrow = extra_rows * (row_size + 1) + (proc_row - extra_rows) * row_size + 1
        lastrow = firstrow - 1 + row_size
        if npcols == nprows:
            extra_cols = na - na // npcols * npcols
            if proc_col < extra_cols:
                col_size = na // npcols + 1
                firstcol = proc_col * col_size + 1
            else:
                col_size = na // npcols
                firstcol = extra_cols * (col_size + 1) + (proc_col - extra_cols) * col_size + 1
            lastcol = firstcol - 1 + col_size
        else:
            # Two column blocks per row block: split each row-sized piece in two halves.
            half = npcols // 2
            extra_cols = na - na // half * half
            if proc_col // 2 < extra_cols:
                col_size = na // half + 1
                firstcol = (proc_col // 2) * col_size + 1
            else:
                col_size = na // half
                firstcol = extra_cols * (col_size + 1) + (proc_col // 2 - extra_cols) * col_size + 1
            lastcol = firstcol - 1 + col_size
            if me % 2 == 0:
                lastcol = firstcol - 1 + (col_size - 1) // 2 + 1
            else:
                firstcol = firstcol + (col_size - 1) // 2 + 1
                lastcol = firstcol - 1 + col_size // 2

    nrows = lastrow - firstrow + 1
    if npcols == nprows:
        send_start, send_len = 1, nrows
        exch_proc = (me % nprows) * nprows + me // nprows
    else:
        if me % 2 == 0:
            send_start, send_len = 1, (1 + nrows) // 2
        else:
            send_start, send_len = (1 + nrows) // 2 + 1, nrows // 2
        exch_proc = 2 * (((me // 2) % nprows) * nprows + me // 2 // nprows) + me % 2

    l2npcols = _npb.ilog2(npcols)
    exch, s_starts, s_lens, r_starts, r_lens = [], [], [], [], []
    div_factor = npcols
    for i in range(1, l2npcols + 1):
        j = (proc_col + div_factor // 2) % div_factor + proc_col // div_factor * div_factor
        exch.append(proc_row * npcols + j)
        div_factor //= 2
        if nprows == npcols:
            s_starts.append(send_start)
            s_lens.append(send_len)
            r_lens.append(nrows)
        else:
            r_lens.append(send_len)
            if i == l2npcols:
                s_lens.append(nrows - send_len)
                s_starts.append(send_start + send_len if me % 2 == 0 else 1)
            else:
                s_lens.append(send_len)
                s_starts.append(send_start)
        r_starts.append(send_start)

    return Partition(
        npcols,
        nprows,
        proc_row,
        proc_col,
        firstrow,
        lastrow,
        firstcol,
        lastcol,
        send_start,
        send_len,
        exch_proc,
        lastcol - firstcol + 1,
        tuple(exch),
        tuple(s_starts),
        tuple(s_lens),
        tuple(r_starts),
        tuple(r_lens),
    )


# --------------------------------------------------------------------------------------------
# Set-up: makea/sprnvc/sparse


def _sparse_vectors(n: int, nonzer: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """NPB's sprnvc + vecset for every outer row, drawing from one random stream.

    Returns (indices, values, counts): row `o` of the padded arrays holds the `counts[o]`
    1-based positions and values of outer vector o.
    """
    nn1 = 1 << (n - 1).bit_length()  # smallest power of two not less than n
    width = nonzer + 1
    idx = np.zeros((n, width), dtype=np.int64)
    val = np.zeros((n, width), dtype=np.float64)
    counts = np.empty(n, dtype=np.int64)
    block = 1 << 16  # even, so (value, location) pairs never straddle two blocks
    stream = _npb.Stream(block)
    buf: list[float] = []
    pos = 0
    x = seed
    for outer in range(n):
        chosen: list[int] = []
        values: list[float] = []
        while len(chosen) < nonzer:
            if pos == len(buf):
                x, draw = stream.fill(x)
                buf = draw.tolist()
                pos = 0
            vecelt, vecloc = buf[pos], buf[pos + 1]
            pos += 2
            i = int(nn1 * vecloc) + 1
            if i > n or i in chosen:
                continue
            chosen.append(i)
            values.append(vecelt)
        # vecset: the diagonal position gets 0.5, appended if the vector does not hold it.
        row = outer + 1
        if row in chosen:
            values[chosen.index(row)] = 0.5
        else:
            chosen.append(row)
            values.append(0.5)
        k = len(chosen)
        idx[outer, :k] = chosen
        val[outer, :k] = values
        counts[outer] = k
    return idx, val, counts


def makea(cls: CGClass, part: Partition, seed: int) -> sp.csr_matrix:
    """Build this rank's block of NPB's matrix (local column numbering), untimed."""
    n = cls.na
    idx, val, counts = _sparse_vectors(n, cls.nonzer, seed)
    ratio = RCOND ** (1.0 / n)
    # size is multiplied by ratio after each outer vector, exactly as the Fortran loop does.
    sizes = np.cumprod(np.concatenate(([1.0], np.full(n - 1, ratio))))
    present = np.arange(idx.shape[1])[None, :] < counts[:, None]
    col_ok = present & (idx >= part.firstcol) & (idx <= part.lastcol)
    row_ok = present & (idx >= part.firstrow) & (idx <= part.lastrow)

    rows, cols, elts = [], [], []
    chunk = 4096
    for lo in range(0, n, chunk):
        hi = min(lo + chunk, n)
        scale = sizes[lo:hi, None] * val[lo:hi]  # size * v(ivelt)
        # Element (outer, ivelt, ivelt1) in the loop order of makea.
        elt = val[lo:hi, None, :] * scale[:, :, None]
        keep = col_ok[lo:hi, :, None] & row_ok[lo:hi, None, :]
        rows.append(np.broadcast_to(idx[lo:hi, None, :], elt.shape)[keep])
        cols.append(np.broadcast_to(idx[lo:hi, :, None], elt.shape)[keep])
        elts.append(elt[keep])
    # rcond - shift on the diagonal bounds the smallest eigenvalue from below.
    diag = np.arange(max(part.firstrow, part.firstcol), min(part.lastrow, part.lastcol) + 1)
    rows.append(diag)
    cols.append(diag)
    elts.append(np.full(len(diag), RCOND - cls.shift))
    row = np.concatenate(rows) - part.firstrow
    col = np.concatenate(cols) - part.firstcol
    elt = np.concatenate(elts)
    return _assemble(row, col, elt, part.nrows, part.ncols)


def _assemble(row: np.ndarray, col: np.ndarray, elt: np.ndarray, nrows: int, ncols: int):
    """NPB's sparse(): add duplicates in generation order, drop zeros, keep first-seen order."""
    key = row * ncols + col
    uniq, first, group = np.unique(key, return_index=True, return_inverse=True)
    # bincount adds the weights in input order, starting from 0 — the Fortran accumulation.
    sums = np.bincount(group, weights=elt, minlength=len(uniq))
    keep = sums != 0.0
    uniq, first, sums = uniq[keep], first[keep], sums[keep]
    g_row = uniq // ncols
    # Within a row NPB lists columns in the order they first appeared.
    order = np.lexsort((first, g_row))
    g_row, g_col, sums = g_row[order], (uniq % ncols)[order], sums[order]
    indptr = np.concatenate(([0], np.cumsum(np.bincount(g_row, minlength=nrows))))
    return sp.csr_matrix((sums, g_col, indptr), shape=(nrows, ncols))


# --------------------------------------------------------------------------------------------
# The kernel


class Solver:
    """Vectors (1-based, as in the Fortran) and communication schedule of one rank."""

    def __init__(self, world: World, part: Partition, a: sp.csr_matrix, naa: int) -> None:
        self.comm = world.comm
        self.part = part
        self.a = a
        n = naa + 2
        self.x = np.ones(n)
        self.z = np.zeros(n)
        self.p = np.zeros(n)
        self.q = np.zeros(n)
        self.r = np.zeros(n)
        self.w = np.zeros(n)
        self._one = np.empty(1)
        self._two = np.empty(2)

    def row_sum(self, values: np.ndarray) -> np.ndarray:
        """Sum small `values` over the processor row by NPB's pairwise exchanges."""
        part = self.part
        total = values.copy()
        incoming = np.empty_like(total)
        for i, partner in enumerate(part.reduce_exch_proc, start=1):
            req = self.comm.Irecv([incoming, MPI.DOUBLE], source=partner, tag=i)
            self.comm.Send([total, MPI.DOUBLE], dest=partner, tag=i)
            req.Wait()
            total += incoming
        return total

    def row_dot(self, a: np.ndarray, b: np.ndarray) -> float:
        """Global dot product of two column-distributed vectors."""
        ncols = self.part.ncols
        local = np.array([np.dot(a[1 : ncols + 1], b[1 : ncols + 1])])
        return float(self.row_sum(local)[0])

    def matvec(self, v: np.ndarray, out: np.ndarray) -> None:
        """Set out = A.v for the distributed matrix: local product, row reduction, transpose."""
        part = self.part
        comm = self.comm
        w = self.w
        w[1 : part.nrows + 1] = self.a @ v[1 : part.ncols + 1]
        steps = range(part.l2npcols - 1, -1, -1)
        for i in steps:
            partner = part.reduce_exch_proc[i]
            rs, rl = part.reduce_recv_starts[i], part.reduce_recv_lengths[i]
            ss, sl = part.reduce_send_starts[i], part.reduce_send_lengths[i]
            req = comm.Irecv([out[rs : rs + rl], MPI.DOUBLE], source=partner, tag=i + 1)
            comm.Send([w[ss : ss + sl], MPI.DOUBLE], dest=partner, tag=i + 1)
            req.Wait()
            st = part.send_start
            w[st : st + rl] += out[st : st + rl]
        n = part.exch_recv_length
        if part.l2npcols:
            st, sl = part.send_start, part.send_len
            req = comm.Irecv([out[1 : n + 1], MPI.DOUBLE], source=part.exch_proc, tag=TAG_TRANSPOSE)
            comm.Send([w[st : st + sl], MPI.DOUBLE], dest=part.exch_proc, tag=TAG_TRANSPOSE)
            req.Wait()
        else:
            out[1 : n + 1] = w[1 : n + 1]

    def conj_grad(self) -> float:
        """25 CG iterations on A.z = x; return ||x - A.z|| (NPB's conj_grad)."""
        part = self.part
        nc = part.ncols
        x, z, p, q, r, w = self.x, self.z, self.p, self.q, self.r, self.w
        q[:] = 0.0
        z[:] = 0.0
        r[:] = x
        p[:] = r
        w[:] = 0.0
        rho = self.row_dot(r, r)
        pc, qc, rc, zc = p[1 : nc + 1], q[1 : nc + 1], r[1 : nc + 1], z[1 : nc + 1]
        for _ in range(CGITMAX):
            self.matvec(p, q)
            w[1 : max(part.nrows, nc) + 1] = 0.0
            d = self.row_dot(p, q)
            alpha = rho / d
            rho0 = rho
            zc += alpha * pc
            rc -= alpha * qc
            rho = self.row_dot(r, r)
            beta = rho / rho0
            pc *= beta
            pc += rc
        # Residual norm, explicitly: r = A.z, then ||x - r||.
        self.matvec(z, r)
        diff = x[1 : nc + 1] - rc
        return float(np.sqrt(self.row_sum(np.array([np.dot(diff, diff)]))[0]))

    def power_step(self) -> tuple[float, float]:
        """One inverse-power step: CG solve, then x = z/||z||; return (rnorm, x.z)."""
        rnorm = self.conj_grad()
        nc = self.part.ncols
        xc, zc = self.x[1 : nc + 1], self.z[1 : nc + 1]
        norms = self.row_sum(np.array([np.dot(xc, zc), np.dot(zc, zc)]))
        xc[:] = zc * (1.0 / np.sqrt(norms[1]))
        return rnorm, float(norms[0])


def run(world: World, klass: str) -> Result:
    """Run CG of class `klass` on `world`; the result is complete on rank 0."""
    cls = CLASSES[klass]
    if not _npb.is_power_of_two(world.size):
        raise _npb.unsupported_ranks(
            world, "cg", "a power-of-two number of ranks (1, 2, 4, 8, ...)"
        )
    _npb.header(
        world,
        "CG",
        f" Size: {cls.na:10d}  (class {klass})",
        f" Iterations: {cls.niter:5d}",
        f" Number of nonzeroes per row: {cls.nonzer:8d}",
        f" Eigenvalue shift: {cls.shift:9.3f}",
        f" Total number of processes: {world.size:6d}",
    )
    part = partition(cls.na, world.rank, world.size)
    # The first number of the stream is drawn (and thrown away) before makea, as in NPB.
    seed, _ = _npb.randlc(_npb.SEED_DEFAULT, _npb.A_DEFAULT)
    a = makea(cls, part, seed)
    solver = Solver(world, part, a, cls.na // part.nprows)

    # One untimed iteration to touch every page, then start again from x = 1.
    solver.power_step()
    solver.x[:] = 1.0

    timer = Timer()
    world.comm.Barrier()
    timer.start()
    zeta = 0.0
    for it in range(1, cls.niter + 1):
        rnorm, xz = solver.power_step()
        if it == 1 or it == cls.niter or it % 5 == 0:
            zeta = cls.shift + 1.0 / xz
            if it == 1:
                _npb.say(world, "", "   iteration           ||r||                 zeta")
            _npb.say(world, f"    {it:5d}       {rnorm:20.14e}{zeta:20.13f}")
    elapsed = timer.stop()

    tmax = np.zeros(1)
    world.comm.Reduce([np.array([elapsed]), MPI.DOUBLE], [tmax, MPI.DOUBLE], op=MPI.MAX, root=0)
    seconds = float(tmax[0])
    nz = float(cls.nonzer)
    flops = 2.0 * cls.niter * cls.na * (3.0 + nz * (nz + 1) + 25.0 * (5.0 + nz * (nz + 1)) + 3.0)
    return Result(
        name="CG",
        klass=klass,
        size=str(cls.na),
        iterations=cls.niter,
        seconds=seconds,
        mops=1e-6 * flops / seconds if seconds > 0 else 0.0,
        optype="floating point",
        checks=[Check("zeta", zeta, cls.zeta, EPSILON)],
        active=world.size,
        notes=[f"(process grid: {part.nprows} rows x {part.npcols} columns)"],
    )
