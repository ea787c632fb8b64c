"""Make `from mpi4py import MPI` give the bridged world in every Python process of the ranks.

mmpi-run puts this directory first on PYTHONPATH, so Python runs this file at start-up.
Only under mmpi-run (MMPI_RENDEZVOUS is set). MMPI_MPI4PY_HOOK=0 (mmpi-run --no-mpi4py-hook)
keeps mpi4py as it is, but a rank that imports it without mmpi then fails at once instead of
running as a separate world. Any other sitecustomize on the path still runs, after this one.
"""

import os
import sys


def _chain() -> None:
    """Run the sitecustomize this one shadows, if there is one (under another module name)."""
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    for entry in sys.path:
        folder = os.path.abspath(entry or ".")
        path = os.path.join(folder, "sitecustomize.py")
        if folder != here and os.path.isfile(path):
            spec = importlib.util.spec_from_file_location("_mmpi_shadowed_sitecustomize", path)
            module = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = module
            spec.loader.exec_module(module)
            return


if os.environ.get("MMPI_OUTPUT_MARK") == "1":  # under Open MPI (mmpi_output_mark)
    import mmpi_output_mark

    if mmpi_output_mark.rank_here() is not None:
        mmpi_output_mark.install(mmpi_output_mark.rank_here())

# A process a rank spawned (MPI_Comm_spawn: Hydra sets PMI_SPAWNED) is no rank of the job:
# plain mpi4py, in its parent's cluster.
if os.environ.get("MMPI_RENDEZVOUS") and os.environ.get("PMI_SPAWNED") != "1":
    try:
        from mmpi._startup import hook as _hook

        _hook.install(os.environ.get("MMPI_MPI4PY_HOOK", "1") != "0")
    except ImportError:  # mmpi is not installed for this Python: nothing to hook
        pass
_chain()
