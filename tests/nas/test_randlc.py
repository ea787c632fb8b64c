"""Pin nas_ports' randlc/vranlc to NPB's double-precision generator, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from nas_ports import _npb

A = 1220703125.0
SEED = 314159265.0


def reference_randlc(x: float, a: float) -> tuple[float, float]:
    """NPB's randlc as written in the C/Fortran sources: 23-bit halves in double precision."""
    r23 = 0.5**23
    t23 = 2.0**23
    r46 = r23 * r23
    t46 = t23 * t23
    a1 = float(int(r23 * a))
    a2 = a - t23 * a1
    x1 = float(int(r23 * x))
    x2 = x - t23 * x1
    t1 = a1 * x2 + a2 * x1
    t2 = float(int(r23 * t1))
    z = t1 - t23 * t2
    t3 = t23 * z + a2 * x2
    t4 = float(int(r46 * t3))
    x = t3 - t46 * t4
    return x, r46 * x


def reference_stream(n: int, x: float, a: float = A) -> tuple[float, list[float]]:
    """Draw `n` numbers with the reference generator; return (final seed, numbers)."""
    out = []
    for _ in range(n):
        x, r = reference_randlc(x, a)
        out.append(r)
    return x, out


def test_first_values_from_the_npb_seed() -> None:
    """The first five numbers from seed 314159265, a = 5^13, as exact doubles."""
    # The first numbers of the stream every NPB kernel starts from, as exact doubles.
    expected = [
        float.fromhex("0x1.96cb937105a80p-1"),
        float.fromhex("0x1.bcf61fa2c2c80p-1"),
        float.fromhex("0x1.4b9662cb36680p-1"),
        float.fromhex("0x1.9235448762880p-1"),
        float.fromhex("0x1.2313e3ee25000p-6"),
    ]
    x: int | float = SEED
    got = []
    for _ in expected:
        x, r = _npb.randlc(x, A)
        got.append(r)
    assert got == expected
    assert x == 1250169187877


@pytest.mark.parametrize(
    "seed, a", [(SEED, A), (271828183.0, A), (1.0, 5.0**13), (2.0**46 - 1, 3.0)]
)
def test_randlc_matches_the_double_precision_reference(seed: float, a: float) -> None:
    """200 steps of randlc equal NPB's double-precision algorithm bit for bit."""
    x_ref, expect = reference_stream(200, seed, a)
    x: int | float = seed
    for r_ref in expect:
        x, r = _npb.randlc(x, a)
        assert r == r_ref
    assert float(x) == x_ref


@pytest.mark.parametrize("n", [0, 1, 2, 3, 7, 64, 1000, 4097])
def test_vranlc_matches_scalar_reference(n: int) -> None:
    """The vectorised vranlc equals n scalar reference steps, including n = 0."""
    x_ref, expect = reference_stream(n, SEED)
    x, got = _npb.vranlc(n, SEED, A)
    assert got.dtype == np.float64
    assert got.tolist() == expect
    assert float(x) == x_ref


def test_vranlc_blocks_continue_the_stream() -> None:
    """Consecutive blocks from one Stream concatenate to one long draw."""
    _, whole = _npb.vranlc(3000, SEED, A)
    stream = _npb.Stream(1000, A)
    x: int | float = SEED
    parts = []
    for _ in range(3):
        x, block = stream.fill(x)
        parts.append(block.copy())
    assert np.array_equal(np.concatenate(parts), whole)


def test_jump_ahead_lands_where_stepping_does() -> None:
    """Seed times a^k mod 2^46 is where k single steps end up."""
    # EP and IS start each rank/batch at seed * a^k instead of stepping k times.
    k = 12345
    x_ref, _ = reference_stream(k, SEED)
    jumped = (int(SEED) * _npb.pow46(A, k)) & _npb.MASK46
    assert float(jumped) == x_ref


def test_vranlc_edge_of_the_modulus() -> None:
    """Seeds and multipliers just below 2^46 exercise every carry of the split product."""
    a = 2.0**46 - 3
    seed = 2.0**46 - 5
    x_ref, expect = reference_stream(50, seed, a)
    x, got = _npb.vranlc(50, seed, a)
    assert got.tolist() == expect
    assert float(x) == x_ref


def test_bad_seed_is_rejected() -> None:
    """A seed that is not an integer in [0, 2^46) is refused, not silently truncated."""
    with pytest.raises(ValueError):
        _npb.randlc(0.5, A)
    with pytest.raises(ValueError):
        _npb.randlc(2.0**46, A)
