"""Stand-ins for mpi4py's classes in the bridged namespace: one class for native and bridged.

Under mmpi-run `MPI.Comm`, `MPI.Group`, `MPI.Request`... name subclasses of mpi4py's own that
accept both kinds of object: `isinstance` holds for mpi4py's objects too; a method called on
the class (`MPI.Group.Compare(g1, g2)`, `MPI.Request.Wait(req)`) runs the object's own method,
native or bridged; and mpi4py's objects still pickle, although `mpi4py.MPI.Comm` now names
the stand-in (pickle checks that a class is found under its name). `document` gives them
mpi4py's docstrings.
"""

from __future__ import annotations

import copyreg
import inspect

from .._startup.native import MPI


class StandIn(type):
    """Metaclass: isinstance/issubclass of a stand-in answer for the mpi4py class too."""

    def __instancecheck__(cls, obj) -> bool:
        native = cls.__dict__.get("_stands_for")
        return isinstance(obj, native) if native else type.__instancecheck__(cls, obj)

    def __subclasscheck__(cls, sub) -> bool:
        native = cls.__dict__.get("_stands_for")
        return issubclass(sub, native) if native else type.__subclasscheck__(cls, sub)

    def __eq__(cls, other) -> bool:
        # `type(obj) == MPI.Group` (mpi4py's tests and programs ask it) holds for mpi4py's
        # objects and for mmpi's bridged ones alike; `is` cannot, for a bridged subclass
        if cls is other:
            return True
        if not isinstance(other, type):
            return NotImplemented
        return _family(cls) is _family(other)

    __hash__ = type.__hash__

    def __call__(cls, *args, **kwargs):
        # mpi4py's copy constructor (MPI.Request(req), MPI.Message(msg)) makes a second
        # object for the same handle; a bridged object has no handle but lives in the
        # bridge, so its copy is the object itself, which stays in step with it
        if len(args) == 1 and not kwargs and getattr(args[0], "_copied_as_itself", False) \
                and isinstance(args[0], cls):
            return args[0]
        return type.__call__(cls, *args, **kwargs)


def _family(cls: type) -> type:
    """The mpi4py class an mmpi class is or stands for; any other class is its own."""
    if not cls.__module__.startswith("mmpi"):
        return cls
    for klass in cls.__mro__:
        if klass.__module__ == "mpi4py.MPI":
            return klass
    return cls


def _dispatcher(name: str, native_method):
    owns: dict[type, object] = {}  # per class: the MRO walk runs once, not on every call

    def call(self, *args, **kwargs):
        cls = type(self)
        own = owns.get(cls)
        if own is None:
            # the object's own method: the first in its class's MRO that is not a dispatcher
            # (a program's subclass around a bridged communicator has dispatchers before it)
            own = native_method
            for klass in cls.__mro__:
                found = klass.__dict__.get(name)
                if found is not None and not getattr(found, "_mmpi_dispatch", False):
                    own = found
                    break
            owns[cls] = own
        return own(self, *args, **kwargs)

    call.__name__ = name
    call.__doc__ = native_method.__doc__
    call._mmpi_dispatch = True
    return call


def dispatch_unbound(cls: type, native: type) -> None:
    """Give stand-in `cls` a dispatcher for each instance method of `native` it lacks."""
    for name in dir(native):
        if name.startswith("_") or name in cls.__dict__:
            continue
        raw = native.__dict__.get(name) if name in native.__dict__ else None
        if raw is None:
            for base in native.__mro__:
                if name in base.__dict__:
                    raw = base.__dict__[name]
                    break
        if isinstance(raw, (classmethod, staticmethod)) or not callable(raw):
            continue
        setattr(cls, name, _dispatcher(name, getattr(native, name)))


def _rebuild(kind: str, args):
    """Unpickle an mpi4py object whose class a stand-in names now (`kind`: the class)."""
    cls = getattr(MPI, kind)
    return cls.__new__(cls, *args)


def _named(name: str):
    """Unpickle a predefined mpi4py object (COMM_NULL, GROUP_EMPTY, ...)."""
    return getattr(MPI, name)


def pickle_natively(*classes: type) -> None:
    """Keep mpi4py's objects of these classes picklable with the stand-ins in place.

    Their own reduction names the class by reference, which now finds the stand-in; these
    name it through mpi4py's real module instead.
    """
    for cls in classes:
        def reduce(obj, cls=cls):
            how = cls.__reduce__(obj)
            if isinstance(how, str):
                return _named, (how,)
            _, (klass, *rest) = how
            return _rebuild, (klass.__name__, tuple(rest))

        copyreg.pickle(cls, reduce)


def _signed(name: str, fn, doc: str) -> str:
    """`doc` as mpi4py writes a docstring: the signature, a blank line, the text."""
    try:
        signature = str(inspect.signature(fn))
    except (TypeError, ValueError):
        signature = "(...)"
    return f"{name}{signature}\n\n{inspect.cleandoc(doc)}"


def document(obj, native) -> None:
    """Give `obj` of the bridged namespace (a class or a function) mpi4py's docstrings.

    The names mpi4py documents get its text, as a program's help() and mpi4py's test_doc
    expect; mmpi's own public ones are written as mpi4py writes them (signature first).
    """
    if not isinstance(obj, type):
        doc = getattr(native, "__doc__", None)
        if doc:
            obj.__doc__ = doc
        elif obj.__doc__ and not obj.__name__.startswith("_"):
            obj.__doc__ = _signed(obj.__name__, obj, obj.__doc__)
        return
    if native is not None and native.__doc__:
        obj.__doc__ = native.__doc__
    for name, attr in list(vars(obj).items()):
        if name.startswith("__"):
            continue
        fn = attr.__func__ if isinstance(attr, (classmethod, staticmethod)) else attr
        if not (inspect.isfunction(fn) or isinstance(fn, property)):
            continue
        if inspect.isfunction(fn) and fn.__name__ != name:  # an alias (`start = Start`)
            continue
        doc = getattr(getattr(native, name, None), "__doc__", None)
        if doc:
            fn.__doc__ = doc
        elif fn.__doc__ and not name.startswith("_") and not isinstance(fn, property):
            fn.__doc__ = _signed(name, fn, fn.__doc__)


__all__ = ["StandIn", "dispatch_unbound", "pickle_natively", "document"]
