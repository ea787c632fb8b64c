"""mpi4py's own completion calls (`Waitall`, `testany`, ...) on lists of native requests only.

Kept apart from request.py, which decides when a list holds no bridged request: mpi4py's
calls know what the bridge's cannot, such as inactive persistent requests.
"""

from __future__ import annotations

from .._startup.native import MPI

_native = MPI.Request


def natively(wait, name: str, requests, *args):
    """mpi4py's own `name` on native requests only: it knows inactive persistent ones.

    A wait polls politely with the matching test, which completes what it finds: MPICH's
    Get_status makes a completed persistent request inactive, losing its status. `wait(ready)`
    waits until ready() holds (request.py's polite wait).
    """
    reqs = list(requests)
    if name[0] in "Tt":
        return getattr(_native, name)(reqs, *args)
    test = getattr(_native, ("T" if name[0] == "W" else "t") + "est" + name[4:])
    kind, obj = name[4:], name[0] == "w"
    got = []

    def ready() -> bool:
        out = test(reqs, *args)
        if kind == "any":
            flag = out[1]
        elif kind == "all":
            flag = out[0] if obj else out
        else:
            done = out[0] if obj else out
            flag = done is None or len(done) > 0
        if flag:
            got.append(out)
        return flag

    wait(ready)
    out = got[0]
    if kind == "any":
        return (out[0], out[2]) if obj else out[0]
    if kind == "all":
        return out[1] if obj else True
    return out


__all__ = ["natively"]
