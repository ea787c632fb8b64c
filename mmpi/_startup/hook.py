"""Unmodified mpi4py programs under mmpi-run: `import mpi4py.MPI` gives the bridged namespace.

Installed at interpreter start-up in every rank (see `_startup/sitecustomize.py`): a finder
that answers the import of `mpi4py.MPI` with `mmpi.MPI`, which takes mpi4py's real module from
here (`native`) and joins the bridge. Nothing happens until the program imports mpi4py.MPI,
so Python processes of the job that never use MPI are left alone.

With the hook off (`bridge=False`), importing mpi4py.MPI before mmpi has is refused: that rank
would run in a world of its own cluster only, and the job would "succeed" as two.
`rc_option` reads mpi4py's options (`mpi4py.rc`) as mpi4py's module does at import.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import os
import sys

_TARGET = "mpi4py.MPI"
_BRIDGED = "mmpi.MPI"  # what the import of _TARGET gives under mmpi-run


class _Loader(importlib.abc.Loader):
    def __init__(self, finder: _Finder) -> None:
        self.finder = finder

    def create_module(self, spec):
        if not self.finder.bridge:
            raise ImportError(
                "mmpi-run started this rank with the mpi4py hook off (--no-mpi4py-hook), and "
                "the program imports mpi4py.MPI directly: it would run as a separate world of "
                "one cluster. Import `from mmpi import MPI` instead, or drop the flag."
            )
        # By name, as a finder answers for any module: the hook sits below the library it
        # hands out (mmpi.MPI takes the real module from `native`, then joins the bridge).
        return importlib.import_module(_BRIDGED)

    def exec_module(self, module) -> None:
        """The module is complete already."""


class _Finder(importlib.abc.MetaPathFinder):
    def __init__(self, bridge: bool) -> None:
        self.bridge = bridge
        self.real = None

    def find_spec(self, name, path=None, target=None):
        if name != _TARGET or (self.real is not None and not self.bridge):
            return None
        return importlib.machinery.ModuleSpec(name, _Loader(self), origin="mmpi")

    def real_import(self):
        """mpi4py's own MPI module, imported with this finder out of the way."""
        if self.real is None:
            sys.meta_path.remove(self)
            try:
                self.real = importlib.import_module(_TARGET)
            finally:
                sys.meta_path.insert(0, self)
            if self.bridge:  # the name goes to the bridged module on the next import
                del sys.modules[_TARGET]
                delattr(sys.modules["mpi4py"], "MPI")
        return self.real


_finder: _Finder | None = None


def install(bridge: bool) -> None:
    """Put the finder first on sys.meta_path (once)."""
    global _finder
    if _finder is None:
        _finder = _Finder(bridge)
        sys.meta_path.insert(0, _finder)


def native():
    """mpi4py's own MPI module (what mmpi's internals use, whatever `mpi4py.MPI` names)."""
    if _finder is not None:
        return _finder.real_import()
    return importlib.import_module(_TARGET)


_TRUE, _FALSE = ("true", "yes", "on", "y", "1"), ("false", "no", "off", "n", "0")


def rc_option(name: str, default):
    """mpi4py's option `name` as its MPI module reads it at import.

    The environment's MPI4PY_RC_<NAME> first, then `mpi4py.rc` (a program may have deleted
    it), else `default`.
    """
    value = os.environ.get(f"MPI4PY_RC_{name.upper()}")
    if value:
        lowered = value.lower()
        if value.strip(" \t").isdigit() and type(default) is int:
            return int(value)
        if lowered in _TRUE or lowered in _FALSE:
            return lowered in _TRUE
        return lowered
    rc = sys.modules.get("mpi4py.rc")
    if rc is None:
        rc = getattr(sys.modules.get("mpi4py"), "rc", None)
    return getattr(rc, name, default)


def active() -> bool:
    """Whether `import mpi4py.MPI` gives the bridged namespace in this process."""
    return _finder is not None and _finder.bridge
