"""benchmarks/ab_table.py reads what benchmarks/ab.sh collects: medians per point and variant."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
_spec = importlib.util.spec_from_file_location("ab_table", ROOT / "benchmarks" / "ab_table.py")
ab_table = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ab_table)

OUT = """\
== [MMPI_FWD_MODE=direction] round 1
8                     1.75          1.86         34.80           19.92           18.66
-                    31.86        266.60            8.37
1       4194304           12230.95       3452.24            0.28           1.00           1.00
4       4194304           12230.95       2452.24            0.20           0.70           0.71
== [/tmp/tree] round 1
8                     1.78          2.01         40.02           22.45           19.91
-                    29.88         96.40            3.23
1       4194304           12000.00       3000.00            0.25           1.00           1.00
4       4194304           12000.00       2400.00            0.20           0.70           0.80
== [MMPI_FWD_MODE=direction] round 2
8                     1.75          1.86         30.00           19.92           18.66
-                    31.86        100.00            8.37
DONE
"""


def test_bridged_figures_per_point_and_variant_in_round_order():
    data = ab_table.parse(OUT.splitlines(), ["latency", "barrier"])
    direction, tree = "MMPI_FWD_MODE=direction", "/tmp/tree"
    assert data[(0, "latency", "8")] == {direction: [34.80, 30.00], tree: [40.02]}
    assert data[(1, "barrier", "-")] == {direction: [266.60, 100.00], tree: [96.40]}
    assert data[(2, "pairs 1", "4194304")][tree] == [3000.00]
    assert data[(3, "pairs 4", "4194304")][direction] == [2452.24]
    assert data[(1003, "pairs 4 / 1 pair", "4194304")] == {direction: [0.71], tree: [0.80]}


def test_the_table_prints_each_variants_median(tmp_path, capsys):
    out = tmp_path / "ab.txt"
    out.write_text(OUT)
    ab_table.main(["ab_table.py", str(out), "latency,barrier"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["point", "MMPI_FWD_MODE=direction", "/tmp/tree"]
    barrier = next(line for line in lines if line.startswith("barrier -"))
    assert barrier.split()[2:4] == ["183.3", "266.6/100"]
