"""mpi4py.futures across the zipper: an MPIPoolExecutor (under `python -m mpi4py.futures`)
or an MPICommExecutor (`--comm`) maps tasks over the workers, some of which sit in the other
cluster. Prints
`rank 0: <check> <value>` lines (the manager's), the same natively and bridged.
"""

import sys

from mpi4py import MPI
from mpi4py.futures import MPICommExecutor, MPIPoolExecutor


def square(x):
    return x * x, MPI.COMM_WORLD.Get_size() > 0


def main():
    if "--comm" in sys.argv:
        with MPICommExecutor(MPI.COMM_WORLD, root=0) as executor:
            if executor is not None:
                print(f"rank 0: comm_map {list(executor.map(square, range(12)))}", flush=True)
        return
    with MPIPoolExecutor() as executor:
        print(f"rank 0: pool_map {list(executor.map(square, range(12), chunksize=2))}",
              flush=True)
        total = sum(executor.submit(square, k).result()[0] for k in range(5))
        print(f"rank 0: workers {executor.num_workers} submitted {total}", flush=True)


if __name__ == "__main__":  # workers import this module too (`python -m mpi4py.futures`)
    main()
