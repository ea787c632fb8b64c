"""docs/architecture.md holds: import contracts kept, modules of a readable size."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_import_contracts_are_kept():
    exe = shutil.which("lint-imports")
    if exe is None:  # the test extra brings it; its absence is a broken install, not a pass
        pytest.fail("lint-imports is missing: pip install '.[test]'")
    r = subprocess.run([exe, "--no-cache"], cwd=ROOT, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    assert "0 broken" in r.stdout


def test_no_library_module_grows_past_a_few_hundred_lines():
    sizes = {p.relative_to(ROOT).as_posix(): len(p.read_text().splitlines())
             for p in (ROOT / "mmpi").rglob("*.py")}
    big = {p: n for p, n in sizes.items() if n > 520}
    assert not big, f"modules past ~500 lines (split them by concern): {big}"


def test_the_forwarder_imports_nothing_of_the_library_but_the_wire_contract():
    code = ("import sys, forwarder.daemon, forwarder.cli; "
            "print(sorted(m for m in sys.modules if m.startswith('mmpi')))")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    loaded = eval(r.stdout)
    assert all(m in ("mmpi", "mmpi.errors") or m.startswith("mmpi.wire") for m in loaded), loaded
