"""mmpi.wire.compiled: a compiled module is used only with the MPI it was built for."""
# ruff: noqa: D103  (test names say what they check)

from __future__ import annotations

import sys
import types

import pytest

from mmpi.wire import compiled

MPICH = "MPICH Version:      5.0.2\nMPICH Release date: ..."
OPENMPI = "Open MPI v5.0.9, package: Open MPI user@localhost Distribution, ident: 5.0.9"


def test_the_family_of_an_mpi_library():
    assert compiled.family(MPICH) == "MPICH"
    assert compiled.family(OPENMPI) == "Open MPI"
    assert compiled.family("Intel(R) MPI Library 2021") is None


@pytest.fixture
def fake(monkeypatch):
    """A module `_mmpi_fake` that says it was built for MPICH."""
    module = types.ModuleType("_mmpi_fake")
    module.BUILT_FOR = "MPICH"
    module.__spec__ = types.SimpleNamespace(name="_mmpi_fake")
    monkeypatch.setitem(sys.modules, "_mmpi_fake", module)
    monkeypatch.setattr(compiled.importlib.util, "find_spec", lambda name: name == "_mmpi_fake"
                        or None)
    return module


def test_a_module_is_used_with_the_mpi_it_was_built_for(fake):
    assert compiled.load("_mmpi_fake", MPICH) == (fake, "")
    assert compiled.load("_mmpi_fake", OPENMPI) == (
        None, "built for MPICH, but mpi4py uses Open MPI")
    fake.BUILT_FOR = "Open MPI"
    assert compiled.load("_mmpi_fake", OPENMPI) == (fake, "")
    assert compiled.load("_mmpi_fake", "Intel(R) MPI")[0] is None


def test_a_module_not_built_says_so():
    module, why = compiled.load("_mmpi_no_such_module", MPICH)
    assert module is None and why.startswith("not built")
