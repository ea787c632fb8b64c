"""docs/architecture.md holds: import contracts kept, every module in a room, no circles.

`python tests/unit/test_architecture.py` prints the import circles of the rank side (with the
imports made for type checkers only, which run nothing): the command docs/architecture.md
names.
"""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # Python 3.11 on

ROOT = Path(__file__).resolve().parents[2]


def test_import_contracts_are_kept():
    exe = shutil.which("lint-imports")
    if exe is None:  # the test extra brings it; its absence is a broken install, not a pass
        pytest.fail("lint-imports is missing: pip install '.[test]'")
    r = subprocess.run([exe, "--no-cache"], cwd=ROOT, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    assert "0 broken" in r.stdout


def _layers() -> list[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    contract = next(c for c in config["tool"]["importlinter"]["contracts"] if c["type"] == "layers")
    return [name.strip() for layer in contract["layers"] for name in layer.split("|")]


def test_every_module_of_the_library_lies_in_a_layer():
    layers = _layers()
    modules = []
    for path in (ROOT / "mmpi").rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if "site" in parts:  # mmpi/_startup/site: put on the ranks' PYTHONPATH, no package
            continue
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        if name != "mmpi":
            modules.append(name)
    outside = [m for m in modules
               if not any(m == layer or m.startswith(layer + ".") for layer in layers)]
    assert not outside, f"modules in no layer of pyproject.toml's contract: {outside}"


def circles(package: str = "mmpi", type_checking: bool = True) -> list[list[str]]:
    """The import circles (strongly connected modules) of `package`, largest first."""
    import grimp

    graph = grimp.build_graph(package, include_external_packages=False, cache_dir=None,
                              exclude_type_checking_imports=not type_checking)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's algorithm
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.find_modules_directly_imported_by(v):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                part.append(w)
                if w == v:
                    break
            if len(part) > 1:
                found.append(sorted(part))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10000))
    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return sorted(found, key=len, reverse=True)


def test_no_import_circle_when_the_library_runs():
    assert circles(type_checking=False) == []


def test_circles_of_type_annotations_stay_within_a_few_files():
    # An engine's transports name the engine, a collective's view names its communicator:
    # imports under TYPE_CHECKING only, but a reader follows them too.
    big = [c for c in circles() if len(c) > 6]
    assert not big, big


def test_the_forwarder_imports_nothing_of_the_library_but_the_wire_contract():
    code = ("import sys, forwarder.daemon, forwarder.cli; "
            "print(sorted(m for m in sys.modules if m.startswith('mmpi')))")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    loaded = eval(r.stdout)
    assert all(m in ("mmpi", "mmpi.errors") or m.startswith("mmpi.wire") for m in loaded), loaded


if __name__ == "__main__":
    for circle in circles():
        print(f"{len(circle)} files: {' '.join(circle)}")
