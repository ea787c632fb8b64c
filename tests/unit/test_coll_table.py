"""benchmarks/floor/coll_table.py: medians of `run.sh coll` rounds, from their text output."""

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
_spec = importlib.util.spec_from_file_location(
    "coll_table", ROOT / "benchmarks" / "floor" / "coll_table.py")
coll_table = importlib.util.module_from_spec(_spec)
sys.modules["coll_table"] = coll_table  # its dataclass looks its module up there
_spec.loader.exec_module(coll_table)

ROUND = """\
== round {n} 12:00:00
C native allreduce 8 B on 4 ranks: 20.0 us
C relayed allreduce 8 B on 2+2 ranks, low cluster: 30.0 us
C native bcast 1048576 B on 4 ranks: 400.0 us
C relayed bcast 1048576 B on 2+2 ranks, high cluster: {c} us
python native bcast 1048576 B on 4 ranks: 450.0 us
python relayed bcast 1048576 B on 2+2 ranks, high cluster: 640.0 us
(C relay) python relayed bcast 1048576 B on 2+2 ranks, low cluster: 560.0 us
(Python relay) C relayed bcast 1048576 B on 2+2 ranks, high cluster: 520.0 us
8                     6.98         57.35            8.22
1048576             246.88        515.34            {m}
8                    25.17         66.29            2.63
1048576             469.70       1230.89            2.62
65536                79.81        389.43            4.88
"""


def test_each_pairing_against_the_c_native_time_of_its_round():
    text = ROUND.format(n=1, c="480.0", m="1.40") + ROUND.format(n=2, c="720.0", m="2.00")
    rounds = coll_table.parse(text.splitlines())
    assert len(rounds) == 2
    assert rounds[0].relayed[("C/python", "bcast", 1 << 20)] == 560.0
    assert rounds[0].relayed[("python/C", "bcast", 1 << 20)] == 520.0
    assert rounds[1].mmpi[("bcast", 1 << 20)] == (515.34, 2.0)
    lines = coll_table.table(rounds)
    block = lines[lines.index("bcast 1048576 B (target <= 1.5), ratio to C native:"):]
    # C: 480/400 = 1.2 and 720/400 = 1.8; Python both: 1.6 twice, against the C relay 1.33/0.89
    assert block[1].split() == ["C", "relay,", "C", "ranks", "1.50", "[1.20-1.80]", "met",
                                "1", "of", "2"]
    assert block[2].split()[4:] == ["1.60", "[1.60-1.60]", "met", "0", "of", "2", "time", "/",
                                    "C", "relay's", "1.11"]
    assert block[5].startswith(f"  {'mmpi (its own ratio)':32}  1.70 [1.40-2.00]  met  1 of  2")
    # allreduce 8 B has only C and mmpi figures; 1 MiB allreduce only mmpi's
    assert f"  {'C relay, C ranks':32}  1.50 [1.50-1.50]  met  2 of  2" in lines
    assert not any(line.startswith("  Python relay, Python ranks") for line in
                   lines[:lines.index(block[0])])


def test_an_mmpi_row_out_of_order_is_an_error_naming_the_round():
    text = ROUND.format(n=1, c="480.0", m="1.40").replace("8                     6.98",
                                                             "65536                 6.98")
    with pytest.raises(ValueError, match=r"round 1: mmpi-bench row of 65536 B where bcast 8 B"):
        coll_table.parse(text.splitlines())


def test_calls_separated_as_mmpi_separates_them_are_their_own_pairings():
    # run.sh bcast: coll.py's ranks with SETTLE=polled print ", polled settle" in their line
    polled = ("python relayed bcast 1048576 B on 2+2 ranks, polled settle, high cluster: 800.0 us\n"
              "(C relay) python relayed bcast 1048576 B on 2+2 ranks, polled settle, low cluster: "
              "600.0 us\n")
    text = ROUND.format(n=1, c="480.0", m="1.40").replace("8                     6.98",
                                                             polled + "8                     6.98")
    r = coll_table.parse(text.splitlines())[0]
    assert r.relayed[("python", "bcast", 1 << 20)] == 640.0  # the blocking ones stay apart
    assert r.relayed[("python polled", "bcast", 1 << 20)] == 800.0
    assert r.relayed[("C/python polled", "bcast", 1 << 20)] == 600.0
    lines = coll_table.table([r])
    # against the round's C native (400) and C relay (480) times
    assert f"  {'Python relay and ranks, polled':32}  2.00 [2.00-2.00]  met  0 of  1  " \
           "time / C relay's 1.67" in lines
    assert f"  {'C relay, Python ranks, polled':32}  1.50 [1.50-1.50]  met  1 of  1  " \
           "time / C relay's 1.25" in lines


def test_barrier_rounds_are_against_mpi4py_native_and_read_mmpi_bench_s_dash_row():
    # run.sh barrier: coll.c has no barrier, so its block is against mpi4py's native barrier;
    # `mmpi-bench barrier` prints "-" where the others print a size
    text = """\
== round 1 12:00:00
python native barrier 0 B on 4 ranks: 30.0 us
python relayed barrier 0 B on 2+2 ranks, high cluster: 60.0 us
-                    29.81        158.68            5.32
== round 2 12:00:09
python native barrier 0 B on 4 ranks: 20.0 us
python relayed barrier 0 B on 2+2 ranks, low cluster: 70.0 us
-                    25.00         50.00            2.00
"""
    rounds = coll_table.parse(text.splitlines())
    assert rounds[0].mmpi == {("barrier", 0): (158.68, 5.32)}
    assert coll_table.table(rounds) == [
        "barrier 0 B (target <= 3), ratio to mpi4py native:",
        f"  {'Python relay, Python ranks':32}  2.75 [2.00-3.50]  met  1 of  2",
        f"  {'mmpi (its own ratio)':32}  3.66 [2.00-5.32]  met  1 of  2",
    ]
