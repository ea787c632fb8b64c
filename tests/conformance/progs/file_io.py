"""MPI-IO on COMM_WORLD (across the zipper when bridged), in the directory argv names: explicit
offsets independent and collective, a strided view, individual file pointers, non-blocking
reads and writes, ordered calls on the shared file pointer, sizes and modes,
MODE_DELETE_ON_CLOSE.
Prints `rank R: <check> <value>`.
"""

import os
import sys

import numpy as np

args = sys.argv[1:]
if args[:1] == ["--mmpi"]:
    from mmpi import MPI

    args = args[1:]
else:
    from mpi4py import MPI

world = MPI.COMM_WORLD
rank, size = world.Get_rank(), world.Get_size()
path = os.path.join(args[0], "data.bin")
N = 4  # ints per rank in each section
SECTION = size * N * 4  # bytes
out = []


def say(check, value):
    out.append(f"rank {rank}: {check} {value}")


def settle(f):
    f.Sync()
    world.Barrier()
    f.Sync()


f = MPI.File.Open(world, path, MPI.MODE_CREATE | MPI.MODE_RDWR)
say("amode", f.Get_amode() == MPI.MODE_CREATE | MPI.MODE_RDWR)
say("group", (f.Get_group().Get_size(), f.Get_group().Get_rank()))
say("truthy", bool(f))
f.Set_size(0)

# section 0: each rank its block at an explicit offset, all at once; then read back
f.Write_at_all(rank * N * 4, np.arange(N, dtype="i4") + 100 * rank)
settle(f)
say("size", f.Get_size())
world.Barrier()  # a collective data call need not hold anyone back: nobody writes on yet
got = np.empty(N, "i4")
f.Read_at(((rank + 1) % size) * N * 4, got)
say("neighbour", got.tolist())
every = np.empty(size * N, "i4")
f.Read_at_all(0, every)
say("all", every.tolist())

# section 1: a strided view, rank r owning ints r, r + size, ... of the section
strided = MPI.INT.Create_vector(N, 1, size).Create_resized(0, SECTION).Commit()
f.Set_view(SECTION + rank * 4, MPI.INT, strided)
f.Write_all(np.full(N, 1000 + rank, "i4"))
say("position after view write", f.Get_position())
say("byte offset", f.Get_byte_offset(1))
f.Set_view(0, MPI.BYTE, MPI.BYTE)
strided.Free()
settle(f)
section = np.empty(size * N, "i4")
f.Read_at(SECTION, section)
say("strided", section.tolist())

# section 2: individual file pointers, and non-blocking calls
f.Seek(2 * SECTION + rank * N * 4)
f.Write(np.full(2, 7 + rank, "i4"))
say("position", f.Get_position())
req = f.Iwrite_at(2 * SECTION + rank * N * 4 + 8, np.full(2, 70 + rank, "i4"))
req.Wait()
settle(f)
back = np.empty(N, "i4")
f.Iread_at(2 * SECTION + ((rank + size - 1) % size) * N * 4, back).Wait()
say("pointer and non-blocking", back.tolist())
# section 3: the shared file pointer, collectively: rank r writes r + 1 ints in rank order
f.Seek_shared(3 * SECTION)
f.Write_ordered(np.full(rank + 1, 50 + rank, "i4"))
say("shared position", f.Get_position_shared())
settle(f)
ordered = np.empty(size * (size + 1) // 2, "i4")
f.Read_at(3 * SECTION, ordered)
say("ordered", ordered.tolist())
f.Seek_shared(3 * SECTION)
mine = np.empty(rank + 1, "i4")
f.Read_ordered(mine)
say("read ordered", mine.tolist())
f.Seek_shared(-4, MPI.SEEK_END)
say("shared from the end", f.Get_position_shared())
f.Set_atomicity(True)
say("atomicity", f.Get_atomicity())
say("extent", f.Get_type_extent(MPI.DOUBLE))
f.Close()
say("closed", f == MPI.FILE_NULL)

# MODE_DELETE_ON_CLOSE: gone once closed
scratch = os.path.join(args[0], "scratch.bin")
g = MPI.File.Open(world, scratch, MPI.MODE_CREATE | MPI.MODE_WRONLY | MPI.MODE_DELETE_ON_CLOSE)
g.Write_at(rank * 8, np.zeros(1))
g.Close()
world.Barrier()
say("deleted on close", not os.path.exists(scratch))
world.Barrier()
if rank == 0:
    MPI.File.Delete(path)
world.Barrier()
say("deleted", not os.path.exists(path))
every = world.gather(out, root=0)  # one writer: lines of several ranks never interleave
if rank == 0:
    print("\n".join(line for lines in every for line in lines), flush=True)
