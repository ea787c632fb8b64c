"""What Hydra (MPICH 5.0.2) and the ranks printed as a job failed: failure-report test input."""

from __future__ import annotations

BANNER_KILLED = [  # what Hydra (MPICH 5.0.2) printed for a rank SIGKILLed by itself
    "",
    "=" * 83,
    "=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES",
    "=   PID 6718 RUNNING AT vm",
    "=   EXIT CODE: 9",
    "=   CLEANING UP REMAINING PROCESSES",
    "=   YOU CAN IGNORE THE BELOW CLEANUP MESSAGES",
    "=" * 83,
    "YOUR APPLICATION TERMINATED WITH THE EXIT STRING: Killed (signal 9)",
    "This typically refers to a problem with your application.",
    "Please see the FAQ page for debugging suggestions",
]
FORWARDER_CRASH = [  # ...and for the forwarder whose UCX copy from a vanished rank failed
    "[vm:6700:0:6710]      cma_ep.c:85   process_vm_readv(pid=6719 {0x7f0558e93010,524288}"
    "-->{0x7f2580932010,524288}) returned -1: No such process",
    *BANNER_KILLED[:3],
    "=   PID 6700 RUNNING AT vm",
    "=   EXIT CODE: 6",
    *BANNER_KILLED[5:8],
    "YOUR APPLICATION TERMINATED WITH THE EXIT STRING: Aborted (signal 6)",
]
TRACEBACK = [
    "Traceback (most recent call last):",
    '  File "faults.py", line 29, in <module>',
    '    raise RuntimeError(f"injected failure on rank {rank}")',
    "RuntimeError: injected failure on rank 3",
]
ABORT_1 = (
    "Abort(1) on node 1 (rank 1 in comm 0): application called MPI_Abort(MPI_COMM_WORLD, 1)"
    " - process 1"
)
