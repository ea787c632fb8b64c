"""Pass a token around every rank of the bridged world and check it comes back intact."""

import numpy as np

from mmpi import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
token = np.zeros(1, dtype="i8")
status = MPI.Status()
if rank == 0:
    token[0] = 1
    comm.Send(token, dest=(rank + 1) % size, tag=7)
    comm.Recv(token, source=size - 1, tag=7, status=status)
else:
    comm.Recv(token, source=rank - 1, tag=7, status=status)
    token += 1
    comm.Send(token, dest=(rank + 1) % size, tag=7)
where = getattr(comm, "cluster", "native")
print(f"rank {rank}/{size} ({where}) got token {token[0]} from rank {status.Get_source()}",
      flush=True)
comm.Barrier()
if rank == 0:
    assert token[0] == size, f"token came back as {token[0]}, expected {size}"
    print(f"ring of {size} ranks OK", flush=True)
