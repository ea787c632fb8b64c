"""Make `from mpi4py import MPI` give the bridged world in every Python process of the ranks.

mmpi-run puts this directory first on PYTHONPATH, so Python runs this file at start-up.
Only under mmpi-run (MMPI_RENDEZVOUS is set). MMPI_MPI4PY_HOOK=0 (mmpi-run --no-mpi4py-hook)
keeps mpi4py as it is, but a rank that imports it without mmpi then fails at once instead of
running as a separate world. Any other sitecustomize on the path still runs, after this one.
"""

import os
import sys


def _chain() -> None:
    """Run the sitecustomize this one shadows, if there is one."""
    here = os.path.dirname(os.path.abspath(__file__))
    sys.modules.pop("sitecustomize", None)
    path = sys.path[:]
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    try:
        import sitecustomize  # noqa: F401
    except ImportError:
        pass
    finally:
        sys.path[:] = path


if os.environ.get("MMPI_RENDEZVOUS"):
    try:
        from mmpi import _hook

        _hook.install(os.environ.get("MMPI_MPI4PY_HOOK", "1") != "0")
    except ImportError:  # mmpi is not installed for this Python: nothing to hook
        pass
_chain()
