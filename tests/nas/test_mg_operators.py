"""MG's compiled loop operators and its numpy fallbacks must agree (to rounding)."""

from __future__ import annotations

import numpy as np
import pytest

from nas_ports import _jit, mg

pytestmark = pytest.mark.skipif(not _jit.ENABLED, reason="Numba not available: one path only")

RNG = np.random.default_rng(20240607)


def field(shape: tuple[int, int, int]) -> np.ndarray:
    """Draw a random field of the given (i3, i2, i1) shape."""
    return RNG.standard_normal(shape)


@pytest.mark.parametrize("shape", [(6, 7, 9), (10, 10, 10), (3, 5, 4)])
def test_resid_and_psinv(shape: tuple[int, int, int]) -> None:
    """The resid and psinv loops agree with the whole-array code, ghosts included."""
    u, v = field(shape), field(shape)
    r_loop, r_np = field(shape), None
    r_np = r_loop.copy()
    a = mg.A_COEF
    mg._resid_loops(u, v, r_loop, a[0], a[2], a[3])
    mg._resid_numpy(u, v, r_np, a[0], a[2], a[3])
    np.testing.assert_allclose(r_loop, r_np, rtol=1e-13, atol=1e-13)

    c = mg.SMOOTHER_B
    u_loop, u_np = u.copy(), u.copy()
    mg._psinv_loops(v, u_loop, c[0], c[1], c[2])
    mg._psinv_numpy(v, u_np, c[0], c[1], c[2])
    np.testing.assert_allclose(u_loop, u_np, rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("fine", [(10, 10, 10), (6, 10, 18), (3, 6, 10)])
def test_rprj3(fine: tuple[int, int, int]) -> None:
    """Restriction agrees, also when a fine axis holds a single point (d = 2)."""
    coarse = tuple(2 + (m - 2) // 2 if m > 3 else 3 for m in fine)
    r = field(fine)
    d3, d2, d1 = (2 if m == 3 else 1 for m in fine)
    s_loop, s_np = np.zeros(coarse), np.zeros(coarse)
    mg._rprj3_loops(r, s_loop, d1, d2, d3)
    mg._rprj3_numpy(r, s_np, d1, d2, d3)
    np.testing.assert_allclose(s_loop, s_np, rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("coarse", [(4, 4, 4), (5, 6, 10)])
def test_interp(coarse: tuple[int, int, int]) -> None:
    """Interpolation agrees, and the general (thin-grid) form reduces to the common one."""
    z = field(coarse)
    fine = tuple(2 * m - 2 for m in coarse)
    u0 = field(fine)
    u_loop, u_np, u_thin = u0.copy(), u0.copy(), u0.copy()
    mg._interp_loops(z, u_loop)
    mg._interp_numpy(z, u_np)
    mg._interp_thin(z, u_thin)  # the general form must reduce to the common one
    np.testing.assert_allclose(u_loop, u_np, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(u_loop, u_thin, rtol=1e-13, atol=1e-13)


def test_norm() -> None:
    """The L2 sum and max norm agree."""
    r = field((7, 8, 9))
    s_loop, m_loop = mg._norm_loops(r)
    s_np, m_np = mg._norm_numpy(r)
    assert s_loop == pytest.approx(s_np, rel=1e-13)
    assert m_loop == m_np
