"""MPI-IO across the zipper where it cannot work, or is not bridged: each rank prints one line.

argv: CASE DIR. Cases:
  apart     the clusters work in different directories (as on two file systems) and open
            data.bin there: FileSystemsApart on every rank
  twins     both directories hold a data.bin of the same size, but two files: the same
  shared    a shared file pointer call on a file opened across the zipper: NotBridged
  excl      MODE_EXCL on a file that exists: an MPI error on every rank, nothing hangs
"""

import os
import sys

import numpy as np
from mpi4py import MPI

import mmpi.errors

case, top = sys.argv[1], sys.argv[2]
world = MPI.COMM_WORLD
rank = world.Get_rank()
cluster = os.environ["MMPI_CLUSTER"]
if case in ("apart", "twins"):
    here = os.path.join(top, cluster)
    os.makedirs(here, exist_ok=True)
    if case == "twins":
        with open(os.path.join(here, "data.bin"), "wb") as f:
            f.write(b"\0" * 64)
    world.Barrier()
    os.chdir(here)
    try:
        MPI.File.Open(world, "data.bin", MPI.MODE_CREATE | MPI.MODE_RDWR)
        print(f"rank {rank}: opened", flush=True)
    except mmpi.errors.FileSystemsApart as exc:
        print(f"rank {rank}: apart: {exc}", flush=True)
elif case == "shared":
    f = MPI.File.Open(world, os.path.join(top, "data.bin"), MPI.MODE_CREATE | MPI.MODE_RDWR)
    try:
        f.Write_shared(np.zeros(1))
        print(f"rank {rank}: written", flush=True)
    except mmpi.errors.NotBridged as exc:
        print(f"rank {rank}: not bridged: {exc}", flush=True)
    f.Close()
elif case == "excl":
    name = os.path.join(top, "data.bin")
    if rank == 0:
        open(name, "wb").close()
    world.Barrier()
    try:
        MPI.File.Open(world, name, MPI.MODE_CREATE | MPI.MODE_EXCL | MPI.MODE_WRONLY)
        print(f"rank {rank}: opened", flush=True)
    except MPI.Exception as exc:
        print(f"rank {rank}: refused: error class {exc.Get_error_class()}", flush=True)
world.Barrier()
