"""Start-up: the import hook that bridges `import mpi4py.MPI`, and mpi4py's own module.

`site/` is the directory mmpi-run puts first on the ranks' PYTHONPATH (its sitecustomize
installs the hook); it is data, not a package, so no module of it can be imported as ours.
"""
