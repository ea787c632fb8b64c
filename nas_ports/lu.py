"""LU: the NPB 3.4 SSOR pseudo-application — pipelined lower/upper sweeps on a 2-D process grid."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mmpi import MPI

from . import _jit, _npb
from ._npb import Check, Result, Timer, World

EPSILON = 1.0e-8
OMEGA = 1.2
TOLRSD = 1.0e-8
C1, C2, C3, C4, C5 = 1.40, 0.40, 1.00e-01, 1.00, 1.40
# Message tags of the MPI original: the direction the data comes from.
FROM_S, FROM_N, FROM_E, FROM_W = 1, 2, 3, 4


@dataclass(frozen=True)
class LUClass:
    """Grid edge, SSOR steps, time step and the NPB 3.4 reference norms of one class."""

    n: int
    itmax: int
    dt: float
    xcr: tuple[float, float, float, float, float]  # RMS norms of the residual
    xce: tuple[float, float, float, float, float]  # RMS norms of the solution error
    xci: float  # surface integral


# NPB 3.4 reference values (verify.f90); the grid is n^3.
# fmt: off
CLASSES = {
    "S": LUClass(
        n=12, itmax=50, dt=0.5,
        xcr=(1.6196343210976702e-02, 2.1976745164821318e-03, 1.5179927653399185e-03,
             1.5029584435994323e-03, 3.4264073155896461e-02),
        xce=(6.4223319957960924e-04, 8.4144342047347926e-05, 5.8588269616485186e-05,
             5.8474222595157350e-05, 1.3103347914111294e-03),
        xci=7.8418928865937083e00,
    ),
    "W": LUClass(
        n=33, itmax=300, dt=1.5e-3,
        xcr=(0.1236511638192e02, 0.1317228477799e01, 0.2550120713095e01,
             0.2326187750252e01, 0.2826799444189e02),
        xce=(0.4867877144216e00, 0.5064652880982e-01, 0.9281818101960e-01,
             0.8570126542733e-01, 0.1084277417792e01),
        xci=0.1161399311023e02,
    ),
    "A": LUClass(
        n=64, itmax=250, dt=2.0,
        xcr=(7.7902107606689367e02, 6.3402765259692870e01, 1.9499249727292479e02,
             1.7845301160418537e02, 1.8384760349464247e03),
        xce=(2.9964085685471943e01, 2.8194576365003349e00, 7.3473412698774742e00,
             6.7139225687777051e00, 7.0715315688392578e01),
        xci=2.6030925604886277e01,
    ),
    "B": LUClass(
        n=102, itmax=250, dt=2.0,
        xcr=(3.5532672969982736e03, 2.6214750795310692e02, 8.8333721850952190e02,
             7.7812774739425265e02, 7.3087969592545314e03),
        xce=(1.1401176380212709e02, 8.1098963655421574e00, 2.8480597317698308e01,
             2.5905394567832939e01, 2.6054907504857413e02),
        xci=4.7887162703308227e01,
    ),
    "C": LUClass(
        n=162, itmax=250, dt=2.0,
        xcr=(1.03766980323537846e04, 8.92212458801008552e02, 2.56238814582660871e03,
             2.19194343857831427e03, 1.78078057261061185e04),
        xce=(2.15986399716949279e02, 1.55789559239863600e01, 5.41318863077207766e01,
             4.82262643154045421e01, 4.55902910043250358e02),
        xci=6.66404553572181300e01,
    ),
}
# fmt: on

# Coefficients of the exact solution, one row per equation (NPB's ce(m, 1..13)).
CE = np.array(
    [
        [2.0, 0.0, 0.0, 4.0, 5.0, 3.0, 0.5, 0.02, 0.01, 0.03, 0.5, 0.4, 0.3],
        [1.0, 0.0, 0.0, 0.0, 1.0, 2.0, 3.0, 0.01, 0.03, 0.02, 0.4, 0.3, 0.5],
        [2.0, 2.0, 0.0, 0.0, 0.0, 2.0, 3.0, 0.04, 0.03, 0.05, 0.3, 0.5, 0.4],
        [2.0, 2.0, 0.0, 0.0, 0.0, 2.0, 3.0, 0.03, 0.05, 0.04, 0.2, 0.1, 0.3],
        [5.0, 4.0, 3.0, 2.0, 0.1, 0.4, 0.3, 0.05, 0.04, 0.03, 0.1, 0.3, 0.2],
    ]
)


# --------------------------------------------------------------------------------------------
# Process grid and sub-domains


def _isqrt2(n: int) -> int:
    """NPB's isqrt2: the x extent of an n = x*y grid with y <= x <= 2y, or -1 if none."""
    if n <= 0:
        return -1
    square, xdim = 0, 1
    while square <= n:
        square = xdim * xdim
        if square == n:
            return xdim
        xdim += 1
    xdim -= 1
    ydim = n // xdim
    while xdim * ydim != n and 2 * ydim >= xdim:
        xdim += 1
        ydim = n // xdim
    if xdim * ydim != n or 2 * ydim < xdim:
        return -1
    return xdim


def process_grid(n: int) -> tuple[int, int] | None:
    """(xdim, ydim) of NPB's proc_grid for n ranks, or None if NPB rejects n."""
    xdiv = _isqrt2(n)
    if xdiv <= 0:
        return None
    xdim0, ydim0 = xdiv, n // xdiv
    ydim = int(np.sqrt(float(n)) + 0.001)
    xdim = n // ydim
    while ydim >= ydim0 and xdim * ydim != n:
        ydim -= 1
        xdim = n // ydim
    if xdim < xdim0 or ydim < ydim0 or xdim * ydim != n:
        return None
    return xdim, ydim


def allowed_counts(n0: int, limit: int = 64) -> list[int]:
    """Rank counts up to `limit` that NPB accepts for an n0^3 grid (sub-domains >= 3 wide)."""
    out = []
    for n in range(1, limit + 1):
        grid = process_grid(n)
        if grid and n0 // grid[0] >= 3 and n0 // grid[1] >= 3:
            out.append(n)
    return out


@dataclass(frozen=True)
class Subdomain:
    """A rank's block of the grid, Fortran-numbered: local i = 1..nx is global ipt+i."""

    xdim: int
    ydim: int
    row: int
    col: int
    north: int
    south: int
    west: int
    east: int
    nx: int
    ny: int
    nz: int
    ipt: int
    jpt: int
    ist: int
    iend: int
    jst: int
    jend: int


def subdomain(n0: int, rank: int, xdim: int, ydim: int) -> Subdomain:
    """Find a rank's neighbours and block (NPB's neighbors, subdomain): rows split i, columns j."""
    row = rank % xdim + 1
    col = rank // xdim + 1
    north = rank - 1 if row > 1 else -1
    south = rank + 1 if row < xdim else -1
    west = rank - xdim if col > 1 else -1
    east = rank + xdim if col < ydim else -1
    mm = n0 % xdim
    if row <= mm:
        nx = n0 // xdim + 1
        ipt = (row - 1) * nx
    else:
        nx = n0 // xdim
        ipt = (row - 1) * nx + mm
    mm = n0 % ydim
    if col <= mm:
        ny = n0 // ydim + 1
        jpt = (col - 1) * ny
    else:
        ny = n0 // ydim
        jpt = (col - 1) * ny + mm
    return Subdomain(
        xdim,
        ydim,
        row,
        col,
        north,
        south,
        west,
        east,
        nx,
        ny,
        n0,
        ipt,
        jpt,
        ist=2 if north == -1 else 1,
        iend=nx - 1 if south == -1 else nx,
        jst=2 if west == -1 else 1,
        jend=ny - 1 if east == -1 else ny,
    )


def _i(first: int, last: int) -> slice:
    """Fortran i or j range first..last (ghosts start at -1) as a numpy slice."""
    return slice(first + 1, last + 2)


def _k(first: int, last: int) -> slice:
    """Fortran k range first..last (k starts at 1) as a numpy slice."""
    return slice(first - 1, last)


@dataclass(frozen=True)
class Coefficients:
    """NPB's setcoeff() for an n0^3 grid, plus dt and omega."""

    n0: int
    dt: float
    omega: float = OMEGA

    @property
    def d(self) -> float:
        """Grid spacing (the same in all three directions here)."""
        return 1.0 / (self.n0 - 1)

    def values(self) -> dict[str, float]:
        """Every named coefficient of the Fortran."""
        dxi = deta = dzeta = self.d
        v = {
            "dxi": dxi,
            "deta": deta,
            "dzeta": dzeta,
            "tx1": 1.0 / (dxi * dxi),
            "tx2": 1.0 / (2.0 * dxi),
            "tx3": 1.0 / dxi,
            "ty1": 1.0 / (deta * deta),
            "ty2": 1.0 / (2.0 * deta),
            "ty3": 1.0 / deta,
            "tz1": 1.0 / (dzeta * dzeta),
            "tz2": 1.0 / (2.0 * dzeta),
            "tz3": 1.0 / dzeta,
        }
        for m in range(1, 6):
            v[f"dx{m}"] = 0.75
            v[f"dy{m}"] = 0.75
            v[f"dz{m}"] = 1.00
        v["dssp"] = max(v["dx1"], v["dy1"], v["dz1"]) / 4.0
        return v

    def packed(self) -> np.ndarray:
        """Pack the coefficients the compiled sweeps need, in the order they unpack them."""
        v = self.values()
        names = ["tx1", "tx2", "ty1", "ty2", "tz1", "tz2"]
        names += [f"d{a}{m}" for a in "xyz" for m in range(1, 6)]
        return np.array([self.dt, self.omega] + [v[n] for n in names])


# --------------------------------------------------------------------------------------------
# The SSOR sweeps: compiled loop nests, one k-plane per call so that the pipelined exchange of
# the MPI original happens between planes.  Arrays are (5, nz, ny+4, nx+4): component first,
# then Fortran (k, j, i) mapped to [k-1, j+1, i+1].


@_jit.kernel("void(f8[:,:,:,::1], i8, i8, i8, f8[::1], f8[:,::1])", inline=True)
def _diag_block(u, kk, jj, ii, cf, d):  # pragma: no cover - compiled
    """Block diagonal of the Jacobian at one point (identical in jacld and jacu)."""
    dt, tx1, ty1, tz1 = cf[0], cf[2], cf[4], cf[6]
    dx1, dx2, dx3, dx4, dx5 = cf[8], cf[9], cf[10], cf[11], cf[12]
    dy1, dy2, dy3, dy4, dy5 = cf[13], cf[14], cf[15], cf[16], cf[17]
    dz1, dz2, dz3, dz4, dz5 = cf[18], cf[19], cf[20], cf[21], cf[22]
    r43 = 4.0 / 3.0
    c1345 = C1 * C3 * C4 * C5
    c34 = C3 * C4
    u1, u2, u3, u4, u5 = (
        u[0, kk, jj, ii],
        u[1, kk, jj, ii],
        u[2, kk, jj, ii],
        u[3, kk, jj, ii],
        u[4, kk, jj, ii],
    )
    tmp1 = 1.0 / u1
    tmp2 = tmp1 * tmp1
    tmp3 = tmp1 * tmp2
    d[0, 0] = 1.0 + dt * 2.0 * (tx1 * dx1 + ty1 * dy1 + tz1 * dz1)
    d[0, 1] = 0.0
    d[0, 2] = 0.0
    d[0, 3] = 0.0
    d[0, 4] = 0.0
    d[1, 0] = (
        dt
        * 2.0
        * (tx1 * (-r43 * c34 * tmp2 * u2) + ty1 * (-c34 * tmp2 * u2) + tz1 * (-c34 * tmp2 * u2))
    )
    d[1, 1] = (
        1.0
        + dt * 2.0 * (tx1 * r43 * c34 * tmp1 + ty1 * c34 * tmp1 + tz1 * c34 * tmp1)
        + dt * 2.0 * (tx1 * dx2 + ty1 * dy2 + tz1 * dz2)
    )
    d[1, 2] = 0.0
    d[1, 3] = 0.0
    d[1, 4] = 0.0
    d[2, 0] = (
        dt
        * 2.0
        * (tx1 * (-c34 * tmp2 * u3) + ty1 * (-r43 * c34 * tmp2 * u3) + tz1 * (-c34 * tmp2 * u3))
    )
    d[2, 1] = 0.0
    d[2, 2] = (
        1.0
        + dt * 2.0 * (tx1 * c34 * tmp1 + ty1 * r43 * c34 * tmp1 + tz1 * c34 * tmp1)
        + dt * 2.0 * (tx1 * dx3 + ty1 * dy3 + tz1 * dz3)
    )
    d[2, 3] = 0.0
    d[2, 4] = 0.0
    d[3, 0] = (
        dt
        * 2.0
        * (tx1 * (-c34 * tmp2 * u4) + ty1 * (-c34 * tmp2 * u4) + tz1 * (-r43 * c34 * tmp2 * u4))
    )
    d[3, 1] = 0.0
    d[3, 2] = 0.0
    d[3, 3] = (
        1.0
        + dt * 2.0 * (tx1 * c34 * tmp1 + ty1 * c34 * tmp1 + tz1 * r43 * c34 * tmp1)
        + dt * 2.0 * (tx1 * dx4 + ty1 * dy4 + tz1 * dz4)
    )
    d[3, 4] = 0.0
    d[4, 0] = (
        dt
        * 2.0
        * (
            tx1
            * (
                -(r43 * c34 - c1345) * tmp3 * (u2 * u2)
                - (c34 - c1345) * tmp3 * (u3 * u3)
                - (c34 - c1345) * tmp3 * (u4 * u4)
                - c1345 * tmp2 * u5
            )
            + ty1
            * (
                -(c34 - c1345) * tmp3 * (u2 * u2)
                - (r43 * c34 - c1345) * tmp3 * (u3 * u3)
                - (c34 - c1345) * tmp3 * (u4 * u4)
                - c1345 * tmp2 * u5
            )
            + tz1
            * (
                -(c34 - c1345) * tmp3 * (u2 * u2)
                - (c34 - c1345) * tmp3 * (u3 * u3)
                - (r43 * c34 - c1345) * tmp3 * (u4 * u4)
                - c1345 * tmp2 * u5
            )
        )
    )
    d[4, 1] = (
        dt
        * 2.0
        * (
            tx1 * (r43 * c34 - c1345) * tmp2 * u2
            + ty1 * (c34 - c1345) * tmp2 * u2
            + tz1 * (c34 - c1345) * tmp2 * u2
        )
    )
    d[4, 2] = (
        dt
        * 2.0
        * (
            tx1 * (c34 - c1345) * tmp2 * u3
            + ty1 * (r43 * c34 - c1345) * tmp2 * u3
            + tz1 * (c34 - c1345) * tmp2 * u3
        )
    )
    d[4, 3] = (
        dt
        * 2.0
        * (
            tx1 * (c34 - c1345) * tmp2 * u4
            + ty1 * (c34 - c1345) * tmp2 * u4
            + tz1 * (r43 * c34 - c1345) * tmp2 * u4
        )
    )
    d[4, 4] = (
        1.0
        + dt * 2.0 * (tx1 * c1345 * tmp1 + ty1 * c1345 * tmp1 + tz1 * c1345 * tmp1)
        + dt * 2.0 * (tx1 * dx5 + ty1 * dy5 + tz1 * dz5)
    )


@_jit.kernel("void(f8[:,:,:,::1], i8, i8, i8, f8, f8[::1], f8[:,::1])", inline=True)
def _x_block(u, kk, jj, ii, sign, cf, a):  # pragma: no cover - compiled
    """Jacobian block coupling to the x neighbour at (kk, jj, ii); sign -1 lower, +1 upper."""
    dt, tx1, tx2 = cf[0], cf[2], cf[3]
    dx1, dx2, dx3, dx4, dx5 = cf[8], cf[9], cf[10], cf[11], cf[12]
    r43 = 4.0 / 3.0
    c1345 = C1 * C3 * C4 * C5
    c34 = C3 * C4
    s = sign * dt
    u1, u2, u3, u4, u5 = (
        u[0, kk, jj, ii],
        u[1, kk, jj, ii],
        u[2, kk, jj, ii],
        u[3, kk, jj, ii],
        u[4, kk, jj, ii],
    )
    tmp1 = 1.0 / u1
    tmp2 = tmp1 * tmp1
    tmp3 = tmp1 * tmp2
    a[0, 0] = -dt * tx1 * dx1
    a[0, 1] = s * tx2
    a[0, 2] = 0.0
    a[0, 3] = 0.0
    a[0, 4] = 0.0
    a[1, 0] = s * tx2 * (
        -(u2 * tmp1) * (u2 * tmp1) + C2 * 0.50 * (u2 * u2 + u3 * u3 + u4 * u4) * tmp2
    ) - dt * tx1 * (-r43 * c34 * tmp2 * u2)
    a[1, 1] = s * tx2 * ((2.0 - C2) * (u2 * tmp1)) - dt * tx1 * (r43 * c34 * tmp1) - dt * tx1 * dx2
    a[1, 2] = s * tx2 * (-C2 * (u3 * tmp1))
    a[1, 3] = s * tx2 * (-C2 * (u4 * tmp1))
    a[1, 4] = s * tx2 * C2
    a[2, 0] = s * tx2 * (-(u2 * u3) * tmp2) - dt * tx1 * (-c34 * tmp2 * u3)
    a[2, 1] = s * tx2 * (u3 * tmp1)
    a[2, 2] = s * tx2 * (u2 * tmp1) - dt * tx1 * (c34 * tmp1) - dt * tx1 * dx3
    a[2, 3] = 0.0
    a[2, 4] = 0.0
    a[3, 0] = s * tx2 * (-(u2 * u4) * tmp2) - dt * tx1 * (-c34 * tmp2 * u4)
    a[3, 1] = s * tx2 * (u4 * tmp1)
    a[3, 2] = 0.0
    a[3, 3] = s * tx2 * (u2 * tmp1) - dt * tx1 * (c34 * tmp1) - dt * tx1 * dx4
    a[3, 4] = 0.0
    a[4, 0] = s * tx2 * (
        (C2 * (u2 * u2 + u3 * u3 + u4 * u4) * tmp2 - C1 * (u5 * tmp1)) * (u2 * tmp1)
    ) - dt * tx1 * (
        -(r43 * c34 - c1345) * tmp3 * (u2 * u2)
        - (c34 - c1345) * tmp3 * (u3 * u3)
        - (c34 - c1345) * tmp3 * (u4 * u4)
        - c1345 * tmp2 * u5
    )
    a[4, 1] = (
        s * tx2 * (C1 * (u5 * tmp1) - 0.50 * C2 * ((3.0 * u2 * u2 + u3 * u3 + u4 * u4) * tmp2))
        - dt * tx1 * (r43 * c34 - c1345) * tmp2 * u2
    )
    a[4, 2] = s * tx2 * (-C2 * (u3 * u2) * tmp2) - dt * tx1 * (c34 - c1345) * tmp2 * u3
    a[4, 3] = s * tx2 * (-C2 * (u4 * u2) * tmp2) - dt * tx1 * (c34 - c1345) * tmp2 * u4
    a[4, 4] = s * tx2 * (C1 * (u2 * tmp1)) - dt * tx1 * c1345 * tmp1 - dt * tx1 * dx5


@_jit.kernel("void(f8[:,:,:,::1], i8, i8, i8, f8, f8[::1], f8[:,::1])", inline=True)
def _y_block(u, kk, jj, ii, sign, cf, b):  # pragma: no cover - compiled
    """Jacobian block coupling to the y neighbour at (kk, jj, ii); sign -1 lower, +1 upper."""
    dt, ty1, ty2 = cf[0], cf[4], cf[5]
    dy1, dy2, dy3, dy4, dy5 = cf[13], cf[14], cf[15], cf[16], cf[17]
    r43 = 4.0 / 3.0
    c1345 = C1 * C3 * C4 * C5
    c34 = C3 * C4
    s = sign * dt
    u1, u2, u3, u4, u5 = (
        u[0, kk, jj, ii],
        u[1, kk, jj, ii],
        u[2, kk, jj, ii],
        u[3, kk, jj, ii],
        u[4, kk, jj, ii],
    )
    tmp1 = 1.0 / u1
    tmp2 = tmp1 * tmp1
    tmp3 = tmp1 * tmp2
    b[0, 0] = -dt * ty1 * dy1
    b[0, 1] = 0.0
    b[0, 2] = s * ty2
    b[0, 3] = 0.0
    b[0, 4] = 0.0
    b[1, 0] = s * ty2 * (-(u2 * u3) * tmp2) - dt * ty1 * (-c34 * tmp2 * u2)
    b[1, 1] = s * ty2 * (u3 * tmp1) - dt * ty1 * (c34 * tmp1) - dt * ty1 * dy2
    b[1, 2] = s * ty2 * (u2 * tmp1)
    b[1, 3] = 0.0
    b[1, 4] = 0.0
    b[2, 0] = s * ty2 * (
        -(u3 * tmp1) * (u3 * tmp1) + 0.50 * C2 * ((u2 * u2 + u3 * u3 + u4 * u4) * tmp2)
    ) - dt * ty1 * (-r43 * c34 * tmp2 * u3)
    b[2, 1] = s * ty2 * (-C2 * (u2 * tmp1))
    b[2, 2] = s * ty2 * ((2.0 - C2) * (u3 * tmp1)) - dt * ty1 * (r43 * c34 * tmp1) - dt * ty1 * dy3
    b[2, 3] = s * ty2 * (-C2 * (u4 * tmp1))
    b[2, 4] = s * ty2 * C2
    b[3, 0] = s * ty2 * (-(u3 * u4) * tmp2) - dt * ty1 * (-c34 * tmp2 * u4)
    b[3, 1] = 0.0
    b[3, 2] = s * ty2 * (u4 * tmp1)
    b[3, 3] = s * ty2 * (u3 * tmp1) - dt * ty1 * (c34 * tmp1) - dt * ty1 * dy4
    b[3, 4] = 0.0
    b[4, 0] = s * ty2 * (
        (C2 * (u2 * u2 + u3 * u3 + u4 * u4) * tmp2 - C1 * (u5 * tmp1)) * (u3 * tmp1)
    ) - dt * ty1 * (
        -(c34 - c1345) * tmp3 * (u2 * u2)
        - (r43 * c34 - c1345) * tmp3 * (u3 * u3)
        - (c34 - c1345) * tmp3 * (u4 * u4)
        - c1345 * tmp2 * u5
    )
    b[4, 1] = s * ty2 * (-C2 * (u2 * u3) * tmp2) - dt * ty1 * (c34 - c1345) * tmp2 * u2
    b[4, 2] = (
        s * ty2 * (C1 * (u5 * tmp1) - 0.50 * C2 * ((u2 * u2 + 3.0 * u3 * u3 + u4 * u4) * tmp2))
        - dt * ty1 * (r43 * c34 - c1345) * tmp2 * u3
    )
    b[4, 3] = s * ty2 * (-C2 * (u3 * u4) * tmp2) - dt * ty1 * (c34 - c1345) * tmp2 * u4
    b[4, 4] = s * ty2 * (C1 * (u3 * tmp1)) - dt * ty1 * c1345 * tmp1 - dt * ty1 * dy5


@_jit.kernel("void(f8[:,:,:,::1], i8, i8, i8, f8, f8[::1], f8[:,::1])", inline=True)
def _z_block(u, kk, jj, ii, sign, cf, c):  # pragma: no cover - compiled
    """Jacobian block coupling to the z neighbour at (kk, jj, ii); sign -1 lower, +1 upper."""
    dt, tz1, tz2 = cf[0], cf[6], cf[7]
    dz1, dz2, dz3, dz4, dz5 = cf[18], cf[19], cf[20], cf[21], cf[22]
    r43 = 4.0 / 3.0
    c1345 = C1 * C3 * C4 * C5
    c34 = C3 * C4
    s = sign * dt
    u1, u2, u3, u4, u5 = (
        u[0, kk, jj, ii],
        u[1, kk, jj, ii],
        u[2, kk, jj, ii],
        u[3, kk, jj, ii],
        u[4, kk, jj, ii],
    )
    tmp1 = 1.0 / u1
    tmp2 = tmp1 * tmp1
    tmp3 = tmp1 * tmp2
    c[0, 0] = -dt * tz1 * dz1
    c[0, 1] = 0.0
    c[0, 2] = 0.0
    c[0, 3] = s * tz2
    c[0, 4] = 0.0
    c[1, 0] = s * tz2 * (-(u2 * u4) * tmp2) - dt * tz1 * (-c34 * tmp2 * u2)
    c[1, 1] = s * tz2 * (u4 * tmp1) - dt * tz1 * c34 * tmp1 - dt * tz1 * dz2
    c[1, 2] = 0.0
    c[1, 3] = s * tz2 * (u2 * tmp1)
    c[1, 4] = 0.0
    c[2, 0] = s * tz2 * (-(u3 * u4) * tmp2) - dt * tz1 * (-c34 * tmp2 * u3)
    c[2, 1] = 0.0
    c[2, 2] = s * tz2 * (u4 * tmp1) - dt * tz1 * (c34 * tmp1) - dt * tz1 * dz3
    c[2, 3] = s * tz2 * (u3 * tmp1)
    c[2, 4] = 0.0
    c[3, 0] = s * tz2 * (
        -(u4 * tmp1) * (u4 * tmp1) + 0.50 * C2 * ((u2 * u2 + u3 * u3 + u4 * u4) * tmp2)
    ) - dt * tz1 * (-r43 * c34 * tmp2 * u4)
    c[3, 1] = s * tz2 * (-C2 * (u2 * tmp1))
    c[3, 2] = s * tz2 * (-C2 * (u3 * tmp1))
    c[3, 3] = s * tz2 * (2.0 - C2) * (u4 * tmp1) - dt * tz1 * (r43 * c34 * tmp1) - dt * tz1 * dz4
    c[3, 4] = s * tz2 * C2
    c[4, 0] = s * tz2 * (
        (C2 * (u2 * u2 + u3 * u3 + u4 * u4) * tmp2 - C1 * (u5 * tmp1)) * (u4 * tmp1)
    ) - dt * tz1 * (
        -(c34 - c1345) * tmp3 * (u2 * u2)
        - (c34 - c1345) * tmp3 * (u3 * u3)
        - (r43 * c34 - c1345) * tmp3 * (u4 * u4)
        - c1345 * tmp2 * u5
    )
    c[4, 1] = s * tz2 * (-C2 * (u2 * u4) * tmp2) - dt * tz1 * (c34 - c1345) * tmp2 * u2
    c[4, 2] = s * tz2 * (-C2 * (u3 * u4) * tmp2) - dt * tz1 * (c34 - c1345) * tmp2 * u3
    c[4, 3] = (
        s * tz2 * (C1 * (u5 * tmp1) - 0.50 * C2 * ((u2 * u2 + u3 * u3 + 3.0 * u4 * u4) * tmp2))
        - dt * tz1 * (r43 * c34 - c1345) * tmp2 * u4
    )
    c[4, 4] = s * tz2 * (C1 * (u4 * tmp1)) - dt * tz1 * c1345 * tmp1 - dt * tz1 * dz5


@_jit.kernel("void(f8[:,::1], f8[::1])", inline=True)
def _solve_block(t, x):  # pragma: no cover - compiled
    """Replace x by D^-1 x with NPB's unpivoted elimination; `t` (D) is overwritten."""
    for p in range(4):
        tmp1 = 1.0 / t[p, p]
        for r in range(p + 1, 5):
            tmp = tmp1 * t[r, p]
            for c in range(p + 1, 5):
                t[r, c] = t[r, c] - tmp * t[p, c]
            x[r] = x[r] - x[p] * tmp
    for r in range(4, -1, -1):
        acc = x[r]
        for c in range(r + 1, 5):
            acc = acc - t[r, c] * x[c]
        x[r] = acc / t[r, r]


@_jit.kernel("void(f8[:,:,:,::1], f8[:,:,:,::1], i8, i8, i8, i8, i8, f8[::1])")
def _lower_plane(u, v, k, ist, iend, jst, jend, cf):  # pragma: no cover - compiled
    """Run NPB's jacld + blts on plane k: v <- L^-1 v, rows by increasing j then i."""
    omega = cf[1]
    d = np.empty((5, 5))
    a = np.empty((5, 5))
    b = np.empty((5, 5))
    c = np.empty((5, 5))
    x = np.empty(5)
    kk = k - 1
    for j in range(jst, jend + 1):
        jj = j + 1
        for i in range(ist, iend + 1):
            ii = i + 1
            _diag_block(u, kk, jj, ii, cf, d)
            _z_block(u, kk - 1, jj, ii, -1.0, cf, a)
            _y_block(u, kk, jj - 1, ii, -1.0, cf, b)
            _x_block(u, kk, jj, ii - 1, -1.0, cf, c)
            for m in range(5):
                x[m] = v[m, kk, jj, ii] - omega * (
                    a[m, 0] * v[0, kk - 1, jj, ii]
                    + a[m, 1] * v[1, kk - 1, jj, ii]
                    + a[m, 2] * v[2, kk - 1, jj, ii]
                    + a[m, 3] * v[3, kk - 1, jj, ii]
                    + a[m, 4] * v[4, kk - 1, jj, ii]
                )
            for m in range(5):
                x[m] = x[m] - omega * (
                    b[m, 0] * v[0, kk, jj - 1, ii]
                    + c[m, 0] * v[0, kk, jj, ii - 1]
                    + b[m, 1] * v[1, kk, jj - 1, ii]
                    + c[m, 1] * v[1, kk, jj, ii - 1]
                    + b[m, 2] * v[2, kk, jj - 1, ii]
                    + c[m, 2] * v[2, kk, jj, ii - 1]
                    + b[m, 3] * v[3, kk, jj - 1, ii]
                    + c[m, 3] * v[3, kk, jj, ii - 1]
                    + b[m, 4] * v[4, kk, jj - 1, ii]
                    + c[m, 4] * v[4, kk, jj, ii - 1]
                )
            _solve_block(d, x)
            for m in range(5):
                v[m, kk, jj, ii] = x[m]


@_jit.kernel("void(f8[:,:,:,::1], f8[:,:,:,::1], i8, i8, i8, i8, i8, f8[::1])")
def _upper_plane(u, v, k, ist, iend, jst, jend, cf):  # pragma: no cover - compiled
    """Run NPB's jacu + buts on plane k (the upper solve), by decreasing j then i."""
    omega = cf[1]
    d = np.empty((5, 5))
    a = np.empty((5, 5))
    b = np.empty((5, 5))
    c = np.empty((5, 5))
    tv = np.empty(5)
    kk = k - 1
    for j in range(jend, jst - 1, -1):
        jj = j + 1
        for i in range(iend, ist - 1, -1):
            ii = i + 1
            _diag_block(u, kk, jj, ii, cf, d)
            _x_block(u, kk, jj, ii + 1, 1.0, cf, a)
            _y_block(u, kk, jj + 1, ii, 1.0, cf, b)
            _z_block(u, kk + 1, jj, ii, 1.0, cf, c)
            for m in range(5):
                tv[m] = omega * (
                    c[m, 0] * v[0, kk + 1, jj, ii]
                    + c[m, 1] * v[1, kk + 1, jj, ii]
                    + c[m, 2] * v[2, kk + 1, jj, ii]
                    + c[m, 3] * v[3, kk + 1, jj, ii]
                    + c[m, 4] * v[4, kk + 1, jj, ii]
                )
            for m in range(5):
                tv[m] = tv[m] + omega * (
                    b[m, 0] * v[0, kk, jj + 1, ii]
                    + a[m, 0] * v[0, kk, jj, ii + 1]
                    + b[m, 1] * v[1, kk, jj + 1, ii]
                    + a[m, 1] * v[1, kk, jj, ii + 1]
                    + b[m, 2] * v[2, kk, jj + 1, ii]
                    + a[m, 2] * v[2, kk, jj, ii + 1]
                    + b[m, 3] * v[3, kk, jj + 1, ii]
                    + a[m, 3] * v[3, kk, jj, ii + 1]
                    + b[m, 4] * v[4, kk, jj + 1, ii]
                    + a[m, 4] * v[4, kk, jj, ii + 1]
                )
            _solve_block(d, tv)
            for m in range(5):
                v[m, kk, jj, ii] = v[m, kk, jj, ii] - tv[m]


# --------------------------------------------------------------------------------------------
# The right-hand side operator along one direction.  `w`/`out` are (5, A, B, L) views with the
# direction last; Fortran index f along it is numpy index f + off.  Same arithmetic, point by
# point, as the loops of NPB's rhs/erhs; the compiled version is used when Numba is there.

_LINE_SIG = (
    "void(f8[:,:,:,:], f8[:,:,:,:], i8, i8, i8, i8, i8, f8, f8, f8, f8[::1], b1, b1, i8,"
    " i8, i8, f8, i8)"
)


@_jit.kernel(_LINE_SIG)
def _line_loops(
    w,
    out,
    normal,
    lo,
    hi,
    first,
    last,
    t1,
    t2,
    t3,
    dco,
    lower_edge,
    upper_edge,
    n,
    d1,
    d2,
    dssp,
    off,
):  # pragma: no cover - compiled
    r43 = 4.0 / 3.0
    c1c5 = C1 * C5
    flux = np.empty((5, w.shape[3]))
    for p in range(w.shape[1]):
        for q in range(w.shape[2]):
            # Convective flux on lo..hi, then its central difference.
            for f in range(lo, hi + 1):
                x = f + off
                w1 = w[0, p, q, x]
                w2 = w[1, p, q, x]
                w3 = w[2, p, q, x]
                w4 = w[3, p, q, x]
                w5 = w[4, p, q, x]
                wn = w[normal, p, q, x]
                un = wn / w1
                qq = 0.50 * (w2 * w2 + w3 * w3 + w4 * w4) / w1
                flux[0, x] = wn
                flux[1, x] = w2 * un
                flux[2, x] = w3 * un
                flux[3, x] = w4 * un
                flux[4, x] = (C1 * w5 - C2 * qq) * un
                flux[normal, x] = wn * un + C2 * (w5 - qq)
            for f in range(first, last + 1):
                x = f + off
                for m in range(5):
                    out[m, p, q, x] = out[m, p, q, x] - t2 * (flux[m, x + 1] - flux[m, x - 1])
            # Viscous flux on first..hi from the velocities at f and f-1.
            for f in range(first, hi + 1):
                x = f + off
                tmp = 1.0 / w[0, p, q, x]
                v2 = tmp * w[1, p, q, x]
                v3 = tmp * w[2, p, q, x]
                v4 = tmp * w[3, p, q, x]
                v5 = tmp * w[4, p, q, x]
                tmp = 1.0 / w[0, p, q, x - 1]
                v2m = tmp * w[1, p, q, x - 1]
                v3m = tmp * w[2, p, q, x - 1]
                v4m = tmp * w[3, p, q, x - 1]
                v5m = tmp * w[4, p, q, x - 1]
                flux[1, x] = t3 * (v2 - v2m)
                flux[2, x] = t3 * (v3 - v3m)
                flux[3, x] = t3 * (v4 - v4m)
                if normal == 1:
                    vn, vnm = v2, v2m
                elif normal == 2:
                    vn, vnm = v3, v3m
                else:
                    vn, vnm = v4, v4m
                flux[normal, x] = r43 * t3 * (vn - vnm)
                flux[4, x] = (
                    0.50
                    * (1.0 - c1c5)
                    * t3
                    * ((v2 * v2 + v3 * v3 + v4 * v4) - (v2m * v2m + v3m * v3m + v4m * v4m))
                    + (1.0 / 6.0) * t3 * (vn * vn - vnm * vnm)
                    + c1c5 * t3 * (v5 - v5m)
                )
            for f in range(first, last + 1):
                x = f + off
                out[0, p, q, x] = out[0, p, q, x] + dco[0] * t1 * (
                    w[0, p, q, x - 1] - 2.0 * w[0, p, q, x] + w[0, p, q, x + 1]
                )
                for m in range(1, 5):
                    out[m, p, q, x] = (
                        out[m, p, q, x]
                        + t3 * C3 * C4 * (flux[m, x + 1] - flux[m, x])
                        + dco[m]
                        * t1
                        * (w[m, p, q, x - 1] - 2.0 * w[m, p, q, x] + w[m, p, q, x + 1])
                    )
            # Fourth-order dissipation, one-sided next to the physical boundary.
            for m in range(5):
                if lower_edge:
                    x = 2 + off
                    out[m, p, q, x] = out[m, p, q, x] - dssp * (
                        5.0 * w[m, p, q, x] - 4.0 * w[m, p, q, x + 1] + w[m, p, q, x + 2]
                    )
                    x = 3 + off
                    out[m, p, q, x] = out[m, p, q, x] - dssp * (
                        -4.0 * w[m, p, q, x - 1]
                        + 6.0 * w[m, p, q, x]
                        - 4.0 * w[m, p, q, x + 1]
                        + w[m, p, q, x + 2]
                    )
                for f in range(d1, d2 + 1):
                    x = f + off
                    out[m, p, q, x] = out[m, p, q, x] - dssp * (
                        w[m, p, q, x - 2]
                        - 4.0 * w[m, p, q, x - 1]
                        + 6.0 * w[m, p, q, x]
                        - 4.0 * w[m, p, q, x + 1]
                        + w[m, p, q, x + 2]
                    )
                if upper_edge:
                    x = n - 2 + off
                    out[m, p, q, x] = out[m, p, q, x] - dssp * (
                        w[m, p, q, x - 2]
                        - 4.0 * w[m, p, q, x - 1]
                        + 6.0 * w[m, p, q, x]
                        - 4.0 * w[m, p, q, x + 1]
                    )
                    x = n - 1 + off
                    out[m, p, q, x] = out[m, p, q, x] - dssp * (
                        w[m, p, q, x - 2] - 4.0 * w[m, p, q, x - 1] + 5.0 * w[m, p, q, x]
                    )


def _line_numpy(
    w,
    out,
    normal,
    lo,
    hi,
    first,
    last,
    t1,
    t2,
    t3,
    dco,
    lower_edge,
    upper_edge,
    n,
    d1,
    d2,
    dssp,
    off,
):
    """Whole-array version of `_line_loops` (the path without Numba)."""
    r43 = 4.0 / 3.0
    c1c5 = C1 * C5

    def wc(m: int, f0: int, f1: int) -> np.ndarray:
        return w[m, ..., f0 + off : f1 + off + 1]

    def oc(m: int, f0: int, f1: int) -> np.ndarray:
        return out[m, ..., f0 + off : f1 + off + 1]

    w1, w2, w3, w4, w5 = (wc(m, lo, hi) for m in range(5))
    wn = (w2, w3, w4)[normal - 1]
    un = wn / w1
    q = 0.50 * (w2 * w2 + w3 * w3 + w4 * w4) / w1
    flux = [wn, w2 * un, w3 * un, w4 * un, (C1 * w5 - C2 * q) * un]
    flux[normal] = wn * un + C2 * (w5 - q)
    lo_off = lo + off  # numpy index of flux[..., 0]

    def fl(f: list, m: int, f0: int, f1: int, base: int) -> np.ndarray:
        return f[m][..., f0 + off - base : f1 + off - base + 1]

    for m in range(5):
        o = oc(m, first, last)
        o -= t2 * (
            fl(flux, m, first + 1, last + 1, lo_off) - fl(flux, m, first - 1, last - 1, lo_off)
        )

    tmp = 1.0 / wc(0, first - 1, hi)
    vel = [tmp * wc(m, first - 1, hi) for m in range(1, 5)]
    v2c, v3c, v4c, v5c = (v[..., 1:] for v in vel)
    v2p, v3p, v4p, v5p = (v[..., :-1] for v in vel)
    vnc, vnp = (v2c, v3c, v4c)[normal - 1], (v2p, v3p, v4p)[normal - 1]
    g = [None, t3 * (v2c - v2p), t3 * (v3c - v3p), t3 * (v4c - v4p)]
    g[normal] = r43 * t3 * (vnc - vnp)
    g.append(
        0.50
        * (1.0 - c1c5)
        * t3
        * ((v2c * v2c + v3c * v3c + v4c * v4c) - (v2p * v2p + v3p * v3p + v4p * v4p))
        + (1.0 / 6.0) * t3 * (vnc * vnc - vnp * vnp)
        + c1c5 * t3 * (v5c - v5p)
    )
    g_off = first + off
    for m in range(5):
        o = oc(m, first, last)
        second = wc(m, first - 1, last - 1) - 2.0 * wc(m, first, last) + wc(m, first + 1, last + 1)
        if m == 0:
            o += dco[0] * t1 * second
        else:
            o[...] = (
                o
                + t3
                * C3
                * C4
                * (fl(g, m, first + 1, last + 1, g_off) - fl(g, m, first, last, g_off))
                + dco[m] * t1 * second
            )

    for m in range(5):
        if lower_edge:
            o = oc(m, 2, 2)
            o -= dssp * (5.0 * wc(m, 2, 2) - 4.0 * wc(m, 3, 3) + wc(m, 4, 4))
            o = oc(m, 3, 3)
            o -= dssp * (-4.0 * wc(m, 2, 2) + 6.0 * wc(m, 3, 3) - 4.0 * wc(m, 4, 4) + wc(m, 5, 5))
        if d2 >= d1:
            o = oc(m, d1, d2)
            o -= dssp * (
                wc(m, d1 - 2, d2 - 2)
                - 4.0 * wc(m, d1 - 1, d2 - 1)
                + 6.0 * wc(m, d1, d2)
                - 4.0 * wc(m, d1 + 1, d2 + 1)
                + wc(m, d1 + 2, d2 + 2)
            )
        if upper_edge:
            o = oc(m, n - 2, n - 2)
            o -= dssp * (
                wc(m, n - 4, n - 4)
                - 4.0 * wc(m, n - 3, n - 3)
                + 6.0 * wc(m, n - 2, n - 2)
                - 4.0 * wc(m, n - 1, n - 1)
            )
            o = oc(m, n - 1, n - 1)
            o -= dssp * (
                wc(m, n - 3, n - 3) - 4.0 * wc(m, n - 2, n - 2) + 5.0 * wc(m, n - 1, n - 1)
            )


_line_terms = _line_loops if _jit.ENABLED else _line_numpy


# --------------------------------------------------------------------------------------------
# The application


class Applu:
    """Fields, coefficients and exchanges of one rank."""

    def __init__(self, world: World, cls: LUClass, sub: Subdomain) -> None:
        self.world = world
        self.comm = world.comm
        self.cls = cls
        self.sub = sub
        self.coef = Coefficients(cls.n, cls.dt)
        self.k = self.coef.values()
        self.cf = self.coef.packed()
        self.dx = np.array([self.k[f"dx{m}"] for m in range(1, 6)])
        self.dy = np.array([self.k[f"dy{m}"] for m in range(1, 6)])
        self.dz = np.array([self.k[f"dz{m}"] for m in range(1, 6)])
        shape = (5, sub.nz, sub.ny + 4, sub.nx + 4)
        self.u = np.zeros(shape)
        self.rsd = np.zeros(shape)
        self.frct = np.zeros(shape)
        self.rsdnm = np.zeros(5)
        self.errnm = np.zeros(5)
        self.frc = 0.0

    # -- exact solution, boundary and initial values -------------------------------------

    def exact(self, iglob, jglob, k) -> np.ndarray:
        """Evaluate the exact solution at global Fortran indices (broadcast); shape (5, ...)."""
        n0 = self.cls.n
        xi = np.asarray((np.asarray(iglob) - 1) / float(n0 - 1), dtype=float)
        eta = np.asarray((np.asarray(jglob) - 1) / float(n0 - 1), dtype=float)
        zeta = np.asarray((np.asarray(k) - 1) / float(self.sub.nz - 1), dtype=float)
        xi, eta, zeta = np.broadcast_arrays(xi, eta, zeta)
        out = np.empty((5,) + xi.shape)
        for m in range(5):
            ce = CE[m]
            out[m] = (
                ce[0]
                + ce[1] * xi
                + ce[2] * eta
                + ce[3] * zeta
                + ce[4] * xi * xi
                + ce[5] * eta * eta
                + ce[6] * zeta * zeta
                + ce[7] * xi * xi * xi
                + ce[8] * eta * eta * eta
                + ce[9] * zeta * zeta * zeta
                + ce[10] * xi * xi * xi * xi
                + ce[11] * eta * eta * eta * eta
                + ce[12] * zeta * zeta * zeta * zeta
            )
        return out

    def setbv(self) -> None:
        """Dirichlet values from the exact solution on the faces of the global cube."""
        s, u = self.sub, self.u
        n0 = self.cls.n
        ig = s.ipt + np.arange(1, s.nx + 1)
        jg = s.jpt + np.arange(1, s.ny + 1)
        ks = np.arange(1, s.nz + 1)
        u[:, _k(1, 1), _i(1, s.ny), _i(1, s.nx)] = self.exact(
            ig[None, None, :], jg[None, :, None], 1
        )
        u[:, _k(s.nz, s.nz), _i(1, s.ny), _i(1, s.nx)] = self.exact(
            ig[None, None, :], jg[None, :, None], s.nz
        )
        if s.west == -1:
            u[:, :, 2, _i(1, s.nx)] = self.exact(ig[None, :], 1, ks[:, None])
        if s.east == -1:
            u[:, :, s.ny + 1, _i(1, s.nx)] = self.exact(ig[None, :], n0, ks[:, None])
        if s.north == -1:
            u[:, :, _i(1, s.ny), 2] = self.exact(1, jg[None, :], ks[:, None])
        if s.south == -1:
            u[:, :, _i(1, s.ny), s.nx + 1] = self.exact(n0, jg[None, :], ks[:, None])

    def setiv(self) -> None:
        """Interior start: transfinite interpolation of the boundary values."""
        s, u = self.sub, self.u
        n0 = self.cls.n
        ks = np.arange(2, s.nz)
        jl = np.arange(1, s.ny + 1)
        il = np.arange(1, s.nx + 1)
        jl = jl[(s.jpt + jl != 1) & (s.jpt + jl != n0)]
        il = il[(s.ipt + il != 1) & (s.ipt + il != n0)]
        if not (len(ks) and len(jl) and len(il)):
            return
        K = ks[:, None, None]
        jglob = (s.jpt + jl)[None, :, None]
        iglob = (s.ipt + il)[None, None, :]
        zeta = (K - 1) / float(s.nz - 1)
        eta = (jglob - 1) / float(n0 - 1)
        xi = (iglob - 1) / float(n0 - 1)
        ue_1jk = self.exact(1, jglob, K)
        ue_nx0jk = self.exact(n0, jglob, K)
        ue_i1k = self.exact(iglob, 1, K)
        ue_iny0k = self.exact(iglob, n0, K)
        ue_ij1 = self.exact(iglob, jglob, 1)
        ue_ijnz = self.exact(iglob, jglob, s.nz)
        pxi = (1.0 - xi) * ue_1jk + xi * ue_nx0jk
        peta = (1.0 - eta) * ue_i1k + eta * ue_iny0k
        pzeta = (1.0 - zeta) * ue_ij1 + zeta * ue_ijnz
        val = pxi + peta + pzeta - pxi * peta - peta * pzeta - pzeta * pxi + pxi * peta * pzeta
        u[:, ks[0] - 1 : ks[-1], (jl + 1)[:, None], (il + 1)[None, :]] = val

    # -- communication ---------------------------------------------------------------------

    def exchange_1(self, g: np.ndarray, k: int, iex: int) -> None:
        """One k-plane line to/from the neighbours: the pipeline of the triangular sweeps."""
        s, comm = self.sub, self.comm
        kk = k - 1
        jr, ir = _i(s.jst, s.jend), _i(s.ist, s.iend)
        if iex == 0:
            if s.north != -1:
                buf = np.empty((s.jend - s.jst + 1, 5))
                comm.Recv([buf, MPI.DOUBLE], source=s.north, tag=FROM_N)
                g[:, kk, jr, 1] = buf.T
            if s.west != -1:
                buf = np.empty((s.iend - s.ist + 1, 5))
                comm.Recv([buf, MPI.DOUBLE], source=s.west, tag=FROM_W)
                g[:, kk, 1, ir] = buf.T
        elif iex == 1:
            if s.south != -1:
                buf = np.empty((s.jend - s.jst + 1, 5))
                comm.Recv([buf, MPI.DOUBLE], source=s.south, tag=FROM_S)
                g[:, kk, jr, s.nx + 2] = buf.T
            if s.east != -1:
                buf = np.empty((s.iend - s.ist + 1, 5))
                comm.Recv([buf, MPI.DOUBLE], source=s.east, tag=FROM_E)
                g[:, kk, s.ny + 2, ir] = buf.T
        elif iex == 2:
            if s.south != -1:
                comm.Send(
                    [np.ascontiguousarray(g[:, kk, jr, s.nx + 1].T), MPI.DOUBLE],
                    dest=s.south,
                    tag=FROM_N,
                )
            if s.east != -1:
                comm.Send(
                    [np.ascontiguousarray(g[:, kk, s.ny + 1, ir].T), MPI.DOUBLE],
                    dest=s.east,
                    tag=FROM_W,
                )
        else:
            if s.north != -1:
                comm.Send(
                    [np.ascontiguousarray(g[:, kk, jr, 2].T), MPI.DOUBLE], dest=s.north, tag=FROM_S
                )
            if s.west != -1:
                comm.Send(
                    [np.ascontiguousarray(g[:, kk, 2, ir].T), MPI.DOUBLE], dest=s.west, tag=FROM_E
                )

    def exchange_3(self, g: np.ndarray, iex: int) -> None:
        """Swap two ghost layers of a whole field: north/south (iex 0) or east/west (iex 1)."""
        s, comm = self.sub, self.comm
        if iex == 0:
            lo, hi, n, lines = s.north, s.south, s.nx, _i(1, s.ny)
            tag_down, tag_up = FROM_N, FROM_S
        else:
            lo, hi, n, lines = s.west, s.east, s.ny, _i(1, s.nx)
            tag_down, tag_up = FROM_W, FROM_E

        def plane(f: int) -> tuple:
            # Fortran i = f (iex 0) or j = f (iex 1), every k, every line of the other axis.
            return (
                (slice(None), slice(None), lines, f + 1)
                if iex == 0
                else (slice(None), slice(None), f + 1, lines)
            )

        def pack(first: int, second: int) -> np.ndarray:
            # NPB's buffer: (5, line, k) with m fastest, first plane then second plane.
            return np.concatenate(
                [np.moveaxis(g[plane(f)], 0, -1).ravel() for f in (first, second)]
            )

        def unpack(buf: np.ndarray, first: int, second: int) -> None:
            half = buf.size // 2
            shape = (s.nz, g[plane(first)].shape[-1], 5)
            g[plane(first)] = np.moveaxis(buf[:half].reshape(shape), -1, 0)
            g[plane(second)] = np.moveaxis(buf[half:].reshape(shape), -1, 0)

        size = 2 * g[plane(1)].size
        # Towards higher i (or j) first, then back, in the order of the MPI original.
        if lo != -1:
            inbox = np.empty(size)
            req = comm.Irecv([inbox, MPI.DOUBLE], source=lo, tag=tag_down)
        if hi != -1:
            comm.Send([pack(n - 1, n), MPI.DOUBLE], dest=hi, tag=tag_down)
        if lo != -1:
            req.Wait()
            unpack(inbox, -1, 0)
        if hi != -1:
            inbox = np.empty(size)
            req = comm.Irecv([inbox, MPI.DOUBLE], source=hi, tag=tag_up)
        if lo != -1:
            comm.Send([pack(2, 1), MPI.DOUBLE], dest=lo, tag=tag_up)
        if hi != -1:
            req.Wait()
            unpack(inbox, n + 2, n + 1)

    # -- right-hand sides ------------------------------------------------------------------

    def _flux_terms(self, w: np.ndarray, out: np.ndarray) -> None:
        """Add NPB's discrete operator applied to `w` into `out` (rhs and erhs share it).

        Each direction is handed to `_line_terms` as views with that direction last.
        """
        s, c = self.sub, self.k
        nz = s.nz
        ks, js, is_ = _k(2, nz - 1), _i(s.jst, s.jend), _i(s.ist, s.iend)
        # xi (Fortran i) after the north/south exchange of two ghost layers.
        self.exchange_3(w, 0)
        _line_terms(
            w[:, ks, js, :],
            out[:, ks, js, :],
            1,
            1 if s.north == -1 else 0,
            s.nx if s.south == -1 else s.nx + 1,
            s.ist,
            s.iend,
            c["tx1"],
            c["tx2"],
            c["tx3"],
            self.dx,
            s.north == -1,
            s.south == -1,
            s.nx,
            4 if s.north == -1 else 1,
            s.nx - 3 if s.south == -1 else s.nx,
            c["dssp"],
            1,
        )
        # eta (Fortran j) after the east/west exchange.
        self.exchange_3(w, 1)
        _line_terms(
            w[:, ks, :, is_].transpose(0, 1, 3, 2),
            out[:, ks, :, is_].transpose(0, 1, 3, 2),
            2,
            1 if s.west == -1 else 0,
            s.ny if s.east == -1 else s.ny + 1,
            s.jst,
            s.jend,
            c["ty1"],
            c["ty2"],
            c["ty3"],
            self.dy,
            s.west == -1,
            s.east == -1,
            s.ny,
            4 if s.west == -1 else 1,
            s.ny - 3 if s.east == -1 else s.ny,
            c["dssp"],
            1,
        )
        # zeta: not decomposed, so no exchange; k is numpy index k-1.
        _line_terms(
            w[:, :, js, is_].transpose(0, 2, 3, 1),
            out[:, :, js, is_].transpose(0, 2, 3, 1),
            3,
            1,
            nz,
            2,
            nz - 1,
            c["tz1"],
            c["tz2"],
            c["tz3"],
            self.dz,
            True,
            True,
            nz,
            4,
            nz - 3,
            c["dssp"],
            -1,
        )

    def erhs(self) -> None:
        """Compute the forcing term: the operator applied to the exact solution."""
        s = self.sub
        self.frct[...] = 0.0
        ig = s.ipt + np.arange(1, s.nx + 1)
        jg = s.jpt + np.arange(1, s.ny + 1)
        ks = np.arange(1, s.nz + 1)
        self.rsd[:, :, _i(1, s.ny), _i(1, s.nx)] = self.exact(
            ig[None, None, :], jg[None, :, None], ks[:, None, None]
        )
        self._flux_terms(self.rsd, self.frct)

    def rhs(self) -> None:
        """Steady-state residual: rsd = operator(u) - frct."""
        s = self.sub
        inner = (slice(None), slice(None), _i(1, s.ny), _i(1, s.nx))
        np.negative(self.frct[inner], out=self.rsd[inner])
        self._flux_terms(self.u, self.rsd)

    # -- norms, error, surface integral ----------------------------------------------------

    def _global_rms(self, local: np.ndarray) -> np.ndarray:
        total = np.empty(5)
        self.comm.Allreduce(
            [np.ascontiguousarray(local), MPI.DOUBLE], [total, MPI.DOUBLE], op=MPI.SUM
        )
        n0 = self.cls.n
        return np.sqrt(total / (float(n0 - 2) * (n0 - 2) * (n0 - 2)))

    def l2norm(self, v: np.ndarray) -> np.ndarray:
        """RMS over the interior of each of the five components, over all ranks."""
        s = self.sub
        x = v[:, _k(2, s.nz - 1), _i(s.jst, s.jend), _i(s.ist, s.iend)]
        return self._global_rms(np.einsum("mkji,mkji->m", x, x))

    def error(self) -> np.ndarray:
        """RMS difference between u and the exact solution over the interior."""
        s = self.sub
        ig = s.ipt + np.arange(s.ist, s.iend + 1)
        jg = s.jpt + np.arange(s.jst, s.jend + 1)
        ks = np.arange(2, s.nz)
        diff = (
            self.exact(ig[None, None, :], jg[None, :, None], ks[:, None, None])
            - self.u[:, _k(2, s.nz - 1), _i(s.jst, s.jend), _i(s.ist, s.iend)]
        )
        return self._global_rms(np.einsum("mkji,mkji->m", diff, diff))

    def _sum_all(self, x: float) -> float:
        out = np.empty(1)
        self.comm.Allreduce([np.array([x]), MPI.DOUBLE], [out, MPI.DOUBLE], op=MPI.SUM)
        return float(out[0])

    def pintgr(self) -> float:
        """Surface integral of the pressure-like quantity over three faces of the box."""
        s, u, comm = self.sub, self.u, self.comm
        n0 = self.cls.n
        ii1, ii2, ji1, ji2, ki1, ki2 = 2, n0 - 1, 2, n0 - 2, 3, n0 - 1
        nx, ny, nz, ipt, jpt = s.nx, s.ny, s.nz, s.ipt, s.jpt
        ibeg, ifin = nx + 1, 0
        iglob1, iglob2 = ipt + 1, ipt + nx
        if iglob1 >= ii1 and iglob2 < ii2 + nx:
            ibeg = 1
        if iglob1 > ii1 - nx and iglob2 <= ii2:
            ifin = nx
        if ii1 <= iglob2 and ii1 >= iglob1:
            ibeg = ii1 - ipt
        if ii2 >= iglob1 and ii2 <= iglob2:
            ifin = ii2 - ipt
        jbeg, jfin = ny + 1, 0
        jglob1, jglob2 = jpt + 1, jpt + ny
        if jglob1 >= ji1 and jglob2 < ji2 + ny:
            jbeg = 1
        if jglob1 > ji1 - ny and jglob2 <= ji2:
            jfin = ny
        if ji1 >= jglob1 and ji1 <= jglob2:
            jbeg = ji1 - jpt
        if ji2 >= jglob1 and ji2 <= jglob2:
            jfin = ji2 - jpt
        ifin1 = ifin - 1 if ipt + ifin == ii2 else ifin
        jfin1 = jfin - 1 if jpt + jfin == ji2 else jfin
        size = max(nx, ny, nz) + 2
        # phi arrays are indexed with the Fortran indices (which start at 0) directly.

        def pressure(k_: slice, j_: slice, i_: slice) -> np.ndarray:
            w = u[:, k_, j_, i_]
            return C2 * (w[4] - 0.50 * (w[1] * w[1] + w[2] * w[2] + w[3] * w[3]) / w[0])

        def box_sum(p1: np.ndarray, p2: np.ndarray, a0: int, a1: int, b0: int, b1: int) -> float:
            if a1 < a0 or b1 < b0:
                return 0.0
            total = 0.0
            for p in (p1, p2):
                total += float(
                    (
                        p[a0 : a1 + 1, b0 : b1 + 1]
                        + p[a0 + 1 : a1 + 2, b0 : b1 + 1]
                        + p[a0 : a1 + 1, b0 + 1 : b1 + 2]
                        + p[a0 + 1 : a1 + 2, b0 + 1 : b1 + 2]
                    ).sum()
                )
            return total

        # Top and bottom (k = ki1, ki2): phi(i, j).
        phi1 = np.zeros((size, size))
        phi2 = np.zeros((size, size))
        if jfin >= jbeg and ifin >= ibeg:
            phi1[ibeg : ifin + 1, jbeg : jfin + 1] = pressure(
                _k(ki1, ki1), _i(jbeg, jfin), _i(ibeg, ifin)
            )[0].T
            phi2[ibeg : ifin + 1, jbeg : jfin + 1] = pressure(
                _k(ki2, ki2), _i(jbeg, jfin), _i(ibeg, ifin)
            )[0].T
        # exchange_4: a line from the east, then a column (with corners) from the south.
        if jfin1 == ny:
            dum = np.empty(2 * nx)
            comm.Recv([dum, MPI.DOUBLE], source=s.east, tag=FROM_E)
            phi1[1 : nx + 1, ny + 1] = dum[:nx]
            phi2[1 : nx + 1, ny + 1] = dum[nx:]
        if jbeg == 1:
            comm.Send(
                [np.concatenate([phi1[1 : nx + 1, 1], phi2[1 : nx + 1, 1]]), MPI.DOUBLE],
                dest=s.west,
                tag=FROM_E,
            )
        if ifin1 == nx:
            dum = np.empty(2 * (ny + 2))
            comm.Recv([dum, MPI.DOUBLE], source=s.south, tag=FROM_S)
            phi1[nx + 1, 0 : ny + 2] = dum[: ny + 2]
            phi2[nx + 1, 0 : ny + 2] = dum[ny + 2 :]
        if ibeg == 1:
            comm.Send(
                [np.concatenate([phi1[1, 0 : ny + 2], phi2[1, 0 : ny + 2]]), MPI.DOUBLE],
                dest=s.north,
                tag=FROM_S,
            )
        frc1 = (
            self.k["dxi"]
            * self.k["deta"]
            * self._sum_all(box_sum(phi1, phi2, ibeg, ifin1, jbeg, jfin1))
        )

        # Faces j = ji1 and j = ji2: phi(i, k).
        phi1 = np.zeros((size, size))
        phi2 = np.zeros((size, size))
        ind1 = jpt + jbeg == ji1
        ind2 = jpt + jfin == ji2
        if ind1 and ifin >= ibeg:
            phi1[ibeg : ifin + 1, ki1 : ki2 + 1] = pressure(
                _k(ki1, ki2), _i(jbeg, jbeg), _i(ibeg, ifin)
            )[:, 0, :].T
        if ind2 and ifin >= ibeg:
            phi2[ibeg : ifin + 1, ki1 : ki2 + 1] = pressure(
                _k(ki1, ki2), _i(jfin, jfin), _i(ibeg, ifin)
            )[:, 0, :].T
        for flag, phi in ((ind1, phi1), (ind2, phi2)):
            if flag:
                self._exchange_5(phi, ibeg, ifin1)
        frc2 = (
            self.k["dxi"]
            * self.k["dzeta"]
            * self._sum_all(box_sum(phi1, phi2, ibeg, ifin1, ki1, ki2 - 1))
        )

        # Faces i = ii1 and i = ii2: phi(j, k).
        phi1 = np.zeros((size, size))
        phi2 = np.zeros((size, size))
        ind1 = ipt + ibeg == ii1
        ind2 = ipt + ifin == ii2
        if ind1 and jfin >= jbeg:
            phi1[jbeg : jfin + 1, ki1 : ki2 + 1] = pressure(
                _k(ki1, ki2), _i(jbeg, jfin), _i(ibeg, ibeg)
            )[:, :, 0].T
        if ind2 and jfin >= jbeg:
            phi2[jbeg : jfin + 1, ki1 : ki2 + 1] = pressure(
                _k(ki1, ki2), _i(jbeg, jfin), _i(ifin, ifin)
            )[:, :, 0].T
        for flag, phi in ((ind1, phi1), (ind2, phi2)):
            if flag:
                self._exchange_6(phi, jbeg, jfin1)
        frc3 = (
            self.k["deta"]
            * self.k["dzeta"]
            * self._sum_all(box_sum(phi1, phi2, jbeg, jfin1, ki1, ki2 - 1))
        )
        return 0.25 * (frc1 + frc2 + frc3)

    def _exchange_5(self, g: np.ndarray, ibeg: int, ifin1: int) -> None:
        s = self.sub
        if ifin1 == s.nx:
            dum = np.empty(s.nz)
            self.comm.Recv([dum, MPI.DOUBLE], source=s.south, tag=FROM_S)
            g[s.nx + 1, 1 : s.nz + 1] = dum
        if ibeg == 1:
            self.comm.Send(
                [np.ascontiguousarray(g[1, 1 : s.nz + 1]), MPI.DOUBLE], dest=s.north, tag=FROM_S
            )

    def _exchange_6(self, g: np.ndarray, jbeg: int, jfin1: int) -> None:
        s = self.sub
        if jfin1 == s.ny:
            dum = np.empty(s.nz)
            self.comm.Recv([dum, MPI.DOUBLE], source=s.east, tag=FROM_E)
            g[s.ny + 1, 1 : s.nz + 1] = dum
        if jbeg == 1:
            self.comm.Send(
                [np.ascontiguousarray(g[1, 1 : s.nz + 1]), MPI.DOUBLE], dest=s.west, tag=FROM_E
            )

    # -- SSOR ---------------------------------------------------------------------------------

    def ssor(self, niter: int, verbose: bool) -> float:
        """`niter` SSOR steps; return this rank's time for them (set-up excluded)."""
        s, u, rsd, cf = self.sub, self.u, self.rsd, self.cf
        itmax = self.cls.itmax
        inorm = itmax
        tmp = 1.0 / (self.coef.omega * (2.0 - self.coef.omega))
        inner = (slice(None), _k(2, s.nz - 1), _i(s.jst, s.jend), _i(s.ist, s.iend))
        self.rhs()
        self.rsdnm = self.l2norm(rsd)
        timer = Timer()
        self.comm.Barrier()
        timer.start()
        for istep in range(1, niter + 1):
            if verbose and (istep % 20 == 0 or istep == itmax or istep == 1) and niter > 1:
                _npb.say(self.world, f" Time step {istep:4d}")
            rsd[inner] *= self.cls.dt
            for k in range(2, s.nz):
                self.exchange_1(rsd, k, 0)
                _lower_plane(u, rsd, k, s.ist, s.iend, s.jst, s.jend, cf)
                self.exchange_1(rsd, k, 2)
            for k in range(s.nz - 1, 1, -1):
                self.exchange_1(rsd, k, 1)
                _upper_plane(u, rsd, k, s.ist, s.iend, s.jst, s.jend, cf)
                self.exchange_1(rsd, k, 3)
            u[inner] += tmp * rsd[inner]
            if istep % inorm == 0:
                self.l2norm(rsd)  # NPB's delunm: computed (and reduced), not reported
            self.rhs()
            if istep % inorm == 0 or istep == itmax:
                self.rsdnm = self.l2norm(rsd)
            if np.all(self.rsdnm < TOLRSD):
                _npb.say(
                    self.world, f" convergence was achieved after {istep:4d} pseudo-time steps"
                )
                break
        return timer.stop()


def run(world: World, klass: str) -> Result:
    """Run LU of class `klass` on `world`; the result is complete on rank 0."""
    cls = CLASSES[klass]
    grid = process_grid(world.size)
    if grid is None or cls.n // grid[0] < 3 or cls.n // grid[1] < 3:
        counts = ", ".join(str(n) for n in allowed_counts(cls.n, 64))
        raise _npb.unsupported_ranks(
            world,
            "lu",
            f"a rank count that NPB's proc_grid accepts for class {klass}, i.e. n = x*y with "
            f"y <= x <= 2y and sub-domains at least 3 points wide (up to 64: {counts})",
        )
    xdim, ydim = grid
    sub = subdomain(cls.n, world.rank, xdim, ydim)
    _npb.header(
        world,
        "LU",
        f" Size: {cls.n:4d}x{cls.n:4d}x{cls.n:4d}  (class {klass})",
        f" Iterations: {cls.itmax:4d}",
        f" Total number of processes: {world.size:6d}",
        "",
    )
    app = Applu(world, cls, sub)
    app.setbv()
    app.setiv()
    app.erhs()
    # One untimed step to touch all data (and run the compiled kernels once), then reset.
    warm = Timer()
    warm.start()
    app.ssor(1, verbose=False)
    warmup = warm.stop()
    app.setbv()
    app.setiv()
    elapsed = app.ssor(cls.itmax, verbose=True)

    tmax = np.empty(1)
    world.comm.Allreduce([np.array([elapsed]), MPI.DOUBLE], [tmax, MPI.DOUBLE], op=MPI.MAX)
    errnm = app.error()
    frc = app.pintgr()
    seconds = float(tmax[0])
    n = float(cls.n)
    flops = (
        1e-6
        * cls.itmax
        * (
            1984.77 * n * n * n
            - 10923.3 * (3.0 * n / 3.0) ** 2
            + 27770.9 * (3.0 * n) / 3.0
            - 144010.0
        )
    )
    checks = [
        Check(f"residual RMS norm {m + 1}", float(app.rsdnm[m]), cls.xcr[m], EPSILON)
        for m in range(5)
    ]
    checks += [
        Check(f"error RMS norm {m + 1}", float(errnm[m]), cls.xce[m], EPSILON) for m in range(5)
    ]
    checks.append(Check("surface integral", frc, cls.xci, EPSILON))
    return Result(
        name="LU",
        klass=klass,
        size=f"{cls.n}x{cls.n}x{cls.n}",
        iterations=cls.itmax,
        seconds=seconds,
        mops=flops / seconds if seconds > 0 else 0.0,
        optype="floating point",
        checks=checks,
        active=world.size,
        notes=[
            f"(process grid: {xdim} x {ydim}; dt = {cls.dt}; untimed start-up step {warmup:.2f} s)",
            f"({_jit.describe()})",
        ],
    )
