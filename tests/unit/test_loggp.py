"""Tests of bench.loggp: the LogGP fit recovers known parameters from synthetic round trips."""
# ruff: noqa: D103  (test names say what they check)

import random

import pytest

from bench.loggp import Point, check, fits, format_fits, line, predict, regions

N = 16
EAGER = dict(L=2.0, o_s=0.5, o_r=0.6, g=1.0, G=0.0005)  # below 16 KiB
RNDV = dict(L=2.0, o_s=1.5, o_r=1.2, g=8.0, G=0.0003)  # from 16 KiB: another protocol


def synthetic(noise: float, seed: int = 1) -> list[Point]:
    """PRTT data of the two protocols. Noise: each timing is off by up to `noise` of a round
    trip of that size (a measurement's jitter), the server's receive times by `noise` of
    themselves."""
    rnd = random.Random(seed)

    def jitter(x: float, scale: float) -> float:
        return x + scale * rnd.uniform(-noise, noise)

    points = []
    for k in range(23):  # 1 B .. 4 MiB
        s = 1 << k
        p = EAGER if s < 16384 else RNDV
        gap = p["g"] + (s - 1) * p["G"]
        d = 2 * gap + 5
        prtt1 = 2 * (p["o_s"] + p["L"] + (s - 1) * p["G"] + p["o_r"])
        points.append(Point(s, jitter(prtt1, prtt1), jitter(prtt1 + (N - 1) * gap, prtt1),
                            jitter(prtt1 + (N - 1) * (d + p["o_s"]), prtt1),
                            jitter(p["o_r"], p["o_r"]), N, d))
    return points


def test_a_line_through_points():
    assert line([0, 1, 2], [1, 3, 5]) == pytest.approx((1, 2))
    assert line([3], [7]) == (7, 0.0)


def test_exact_data_gives_the_parameters_and_the_protocol_switch():
    found = regions(synthetic(0.0))
    assert [(r.lo, r.hi) for r in found] == [(1, 8192), (16384, 4 << 20)]
    for r, want in zip(found, (EAGER, RNDV), strict=True):
        for key in ("L", "o_s", "o_r", "g", "G"):
            assert getattr(r, key) == pytest.approx(want[key], rel=1e-6), key


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_noisy_data_gives_the_parameters_within_five_percent(seed):
    found = regions(synthetic(0.01, seed))
    assert len(found) == 2 and found[0].hi == 8192 and found[1].lo == 16384
    for r, want in zip(found, (EAGER, RNDV), strict=True):
        for key in ("g", "G", "o_s", "o_r"):
            assert getattr(r, key) == pytest.approx(want[key], rel=0.05), (key, r)
        assert r.L == pytest.approx(want["L"], rel=0.25)  # what is left of a round trip
        assert r.residual < 0.12


def test_the_parameters_predict_one_way_time_and_bandwidth():
    found = regions(synthetic(0.0))
    r = predict(found, 1 << 20)
    assert r.lo == 16384
    assert r.one_way(1 << 20) == pytest.approx(1.5 + 2 + ((1 << 20) - 1) * 0.0003 + 1.2)
    assert r.bandwidth() == pytest.approx(1 / 0.0003)
    assert predict(found, 100).lo == 1
    assert r.as_json("bridged")["path"] == "bridged"
    assert set(r.as_json("native")) >= {"L", "o_s", "o_r", "g", "G", "from", "to", "path"}


def test_rows_of_three_paths_give_their_regions_and_the_forwarders_share():
    def side(p: Point) -> dict:
        return {"prtt1": p.prtt1, "prttn": p.prttn, "prttd": p.prttd, "o_r": p.o_r, "n": p.n,
                "d": p.d}

    pts = synthetic(0.0)
    rows = [{"bench": "loggp", "size": p.size, "native": side(p), "across": side(p),
             "bridged": side(p)} for p in pts]
    found = fits(rows)
    assert list(found) == ["native", "across", "bridged"]
    assert [(r.lo, r.hi) for r in found["bridged"]] == [(1, 8192), (16384, 4 << 20)]
    text = format_fits(found)
    assert text.count("\nbridged ") == 2 and "the forwarder adds" in text
    # the same path twice over: the forwarder "adds" minus one hop's latency and overhead
    one_hop = EAGER["L"] + EAGER["o_s"] + EAGER["o_r"]
    assert f"adds {-one_hop:.2f} us" in text


def test_the_check_compares_predictions_with_the_other_benchmarks():
    found = {"bridged": regions(synthetic(0.0))}
    r = found["bridged"]
    rows = [{"bench": "latency", "size": 8, "bridged": {"value": r[0].one_way(8)}},
            {"bench": "latency", "size": 1 << 20, "bridged": {"value": 2 * r[1].one_way(1 << 20)}},
            {"bench": "bw", "size": 1 << 20,
             "bridged": {"value": (1 << 20) / (r[1].g + ((1 << 20) - 1) * r[1].G)}},
            {"bench": "rate", "size": 8, "pairs": 1, "bridged": {"value": 1e6 / r[0].g * 3}}]
    text = check(found, rows)
    assert "bridged  latency    predicted within 20% at 1 of 2 sizes; farthest: 1048576 B, -50%" \
        in text
    assert "bw         predicted within 15% at 1 of 1 sizes" in text
    assert "rate       predicted within 20% at 0 of 1 sizes; farthest: 8 B, -67%; " \
        "missed: 8 B -67%" in text


def test_the_latency_check_leaves_sizes_at_a_region_change_aside():
    found = {"native": regions(synthetic(0.0))}
    first, second = found["native"][:2]
    # a size where the protocol changes, measured far off, does not count; one inside does
    rows = [{"bench": "latency", "size": s, "native": {"value": 3 * predict(found["native"], s)
                                                       .one_way(s)}}
            for s in (first.hi, second.lo, 64)]
    text = check(found, rows)
    assert "latency    predicted within 20% at 0 of 1 sizes; farthest: 64 B, -67%; " \
        "missed: 64 B -67%" in text


def test_the_plot_has_a_panel_per_path(tmp_path):
    pytest.importorskip("matplotlib")
    from bench import report

    rows = [{"bench": "loggp", "size": p.size, "unit": "us",
             "native": {"prtt1": p.prtt1, "prttn": p.prttn, "prttd": p.prttd, "o_r": p.o_r,
                        "n": p.n, "d": p.d, "value": p.prtt1 / 2}}
            for p in synthetic(0.0)]
    written = report.write_plots(rows, tmp_path)
    assert (tmp_path / "loggp.png") in written and (tmp_path / "loggp.png").stat().st_size > 0


def _off_by(points: list[Point], size: int, factor: float) -> list[Point]:
    """`points` with the back-to-back round trip of `size` made slower by `factor` in gap."""
    out = []
    for p in points:
        if p.size == size:
            p = Point(p.size, p.prtt1, p.prtt1 + factor * (p.prttn - p.prtt1), p.prttd, p.o_r,
                      p.n, p.d)
        out.append(p)
    return out


def test_one_size_off_the_line_is_noise_not_a_protocol_change():
    found = regions(_off_by(synthetic(0.0), 64, 1.5))
    assert [(r.lo, r.hi) for r in found] == [(1, 8192), (16384, 4 << 20)]
    assert found[0].noise == (64,) and found[1].noise == ()
    assert found[0].g == pytest.approx(EAGER["g"], rel=1e-6)
    assert "64" in format_fits({"native": found}).splitlines()[2]
    # two sizes in a row off the line are not noise: the region breaks there
    twice = regions(_off_by(_off_by(synthetic(0.0), 64, 1.5), 128, 1.5))
    assert twice[0].hi < 64 and twice[0].noise == ()
    # nor is the last size a region could take: a change of protocol shows there first
    last = regions(_off_by(synthetic(0.0), 4 << 20, 1.5))
    assert all(r.noise == () for r in last) and last[-1].lo == 4 << 20


def test_the_one_way_line_meets_the_round_trips_it_was_fitted_on():
    found = regions(synthetic(0.0))
    assert all(r.rt_residual == pytest.approx(0, abs=1e-9) for r in found)
    # overheads that vary inside a region: L is what the region's line leaves, not a point's
    pts = [Point(p.size, p.prtt1, p.prttn, p.prttd, p.o_r * (3 if p.size == 2 else 1), p.n,
                 p.d) for p in synthetic(0.0)]
    first = regions(pts)[0]
    assert first.one_way(1024) == pytest.approx(
        next(p.prtt1 / 2 for p in pts if p.size == 1024), rel=1e-6)


def test_the_check_says_how_well_the_round_trips_agree_with_latency():
    found = {"native": regions(synthetic(0.0))}
    pts = {p.size: p for p in synthetic(0.0)}
    rows = [{"bench": "loggp", "size": s, "native": {"prtt1": pts[s].prtt1}} for s in (8, 64)]
    rows += [{"bench": "latency", "size": 8, "native": {"value": pts[8].prtt1 / 2}},
             {"bench": "latency", "size": 64, "native": {"value": pts[64].prtt1}},
             {"bench": "latency", "size": 128, "native": {"value": 1.0}}]  # no round trip
    text = check(found, rows)
    assert "# native   round trip measured within 20% at 1 of 2 sizes; farthest: 64 B, -50%; " \
        "missed: 64 B -50%" in text
