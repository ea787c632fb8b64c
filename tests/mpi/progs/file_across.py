"""MPI-IO across the zipper where it cannot work, or is not bridged: each rank prints one line.

argv: CASE DIR. Cases:
  apart     the clusters work in different directories (as on two file systems) and open
            data.bin there: FileSystemsApart on every rank
  twins     both directories hold a data.bin of the same size, but two files: the same
  shared    independent calls on the shared file pointer from every rank at once: each
            rank's block lands whole, none overlaps, and the reads take the file once
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
    size = world.Get_size()
    f = MPI.File.Open(world, os.path.join(top, "data.bin"), MPI.MODE_CREATE | MPI.MODE_RDWR)
    f.Set_view(0, MPI.INT64_T)
    for k in range(3):  # three rounds of rank + 1 values each, written at once
        f.Write_shared(np.full(rank + 1, 10 * rank + k, np.int64))
    f.Iwrite_shared(np.full(2, 1000 + rank, np.int64)).Wait()
    world.Barrier()
    total = 3 * size * (size + 1) // 2 + 2 * size
    where = f.Get_position_shared()
    whole = np.zeros(total, np.int64)
    f.Read_at(0, whole)
    # every block whole: a run of one value, as long as its writer wrote
    runs, at = [], 0
    while at < total:
        n = 2 if whole[at] >= 1000 else int(whole[at]) // 10 + 1
        assert (whole[at:at + n] == whole[at]).all(), whole
        runs.append(int(whole[at]))
        at += n
    assert sorted(runs) == sorted([10 * r + k for r in range(size) for k in range(3)]
                                  + [1000 + r for r in range(size)]), runs
    # the reads take the file once between them, in pieces of 2
    f.Seek_shared(0)
    mine = []
    while True:
        got = np.full(2, -1, np.int64)
        st = MPI.Status()
        f.Read_shared(got, st)
        if st.Get_count(MPI.INT64_T) < 2:
            mine.extend(got[:st.Get_count(MPI.INT64_T)].tolist())
            break
        mine.extend(got.tolist())
    every = world.allgather(mine)
    assert sorted(sum(every, [])) == sorted(whole.tolist()), every
    f.Write_ordered(np.full(1, rank, np.int64))  # a collective after them: at the end
    after = f.Get_position_shared()
    f.Close()
    print(f"rank {rank}: shared ok {where} {after}", flush=True)
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
