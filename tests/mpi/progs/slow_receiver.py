"""Stream TOTAL MiB from rank 0 (low) to the last rank (high), which naps between receives.

The forwarder must not buffer the stream: its peak RSS (printed in its summary) may grow only
by its bounded chunk pool, whatever the total. `python slow_receiver.py TOTAL_MIB [NAP_S]`.
"""

import sys
import time
import zlib

import numpy as np

from mmpi import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
total = int(sys.argv[1]) << 20
nap = float(sys.argv[2]) if len(sys.argv) > 2 else 0.02
msg = 8 << 20
count = total // msg
last = size - 1
if rank == 0:
    data = np.random.default_rng(1).integers(0, 256, msg, dtype=np.uint8)
    crc = zlib.crc32(data)
    t0 = time.monotonic()
    for i in range(count):
        data[:8] = np.frombuffer(np.int64(i).tobytes(), np.uint8)
        comm.Send(data, last, 5)
    print(f"sent {count} x 8 MiB in {time.monotonic() - t0:.2f} s", flush=True)
elif rank == last:
    buf = np.empty(msg, np.uint8)
    for i in range(count):
        time.sleep(nap)
        comm.Recv(buf, 0, 5)
        seq = int(np.frombuffer(buf[:8].tobytes(), np.int64)[0])
        if seq != i:
            raise AssertionError(f"message {i} arrived as {seq}")
    print(f"received {count} x 8 MiB in order", flush=True)
comm.Barrier()
