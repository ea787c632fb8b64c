"""A process that is not part of the job connects to a forwarder port (it learnt the port
name, not the secret). `python stranger.py PORTFILE MODE` with MODE wrong-secret | silent."""

import os
import sys
import time

from mpi4py import MPI

from mmpi.wire import protocol as P

port = open(sys.argv[1]).read()
inter = MPI.COMM_WORLD.Connect(port, MPI.INFO_NULL, 0)
if sys.argv[2] == "wrong-secret":
    hello = P.encode_control(secret="0" * 32, cluster="low", size=1)
    inter.Send([hello, MPI.BYTE], 0, P.T_HELLO)
print("stranger: connected", flush=True)
time.sleep(3)
os._exit(0)  # no goodbye: a stranger owes the forwarder nothing
