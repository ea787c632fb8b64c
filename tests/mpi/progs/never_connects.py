"""The high cluster never joins the bridge (it never imports mmpi); the low one does."""

import os
import time

if os.environ.get("MMPI_CLUSTER") == "high":
    time.sleep(300)
else:
    from mmpi import MPI

    MPI.COMM_WORLD.Barrier()
    print("low: should not get here", flush=True)
