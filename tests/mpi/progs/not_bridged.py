"""Calls the bridge does not provide yet raise NotBridged at once, on every rank: none hangs.

The patterns of mpi4py's own tests (test_dynproc, test_comm_inter): rank 0 accepts on
COMM_SELF while the others connect on a bridged communicator (a native Accept would wait for
ever); what intercommunicators between bridged groups lack. Each rank prints
`rank R: <call> <outcome>`.
"""

from mmpi import MPI
from mmpi.errors import NotBridged

world = MPI.COMM_WORLD
rank, size = world.Get_rank(), world.Get_size()


def outcome(name, call):
    try:
        call()
        result = "worked"
    except NotBridged as exc:
        assert name.split(".")[-1] in str(exc), exc
        assert isinstance(exc, (NotImplementedError, MPI.Exception)), type(exc).__mro__
        result = "NotBridged"
    except TypeError:
        result = "TypeError"
    print(f"rank {rank}: {name} {result}", flush=True)


# rank 0 accepts, the others connect (mpi4py's testAcceptConnect)
group = world.Get_group().Excl([0])
rest = world.Create(group)
if rank == 0:
    port = MPI.Open_port()
    world.send(port, dest=1)
    outcome("COMM_SELF.Accept", lambda: MPI.COMM_SELF.Accept(port))
    MPI.Close_port(port)
else:
    port = world.recv(source=0) if rank == 1 else None
    outcome("Connect", lambda: rest.Connect(port, root=0))
# and the other way round (testConnectAccept)
if rank == 0:
    port = world.recv(source=1)
    outcome("COMM_SELF.Connect", lambda: MPI.COMM_SELF.Connect(port))
else:
    port = MPI.Open_port() if rank == 1 else None
    if rank == 1:
        world.send(port, dest=0)
    outcome("Accept", lambda: rest.Accept(port, root=0))
    if rank == 1:
        MPI.Close_port(port)
# intercommunicators between bridged groups (test_comm_inter): bridged now; what they do not
# have yet says so by name
half = world.Split(rank % 2, rank)
inter = half.Create_intercomm(0, world, 1 - rank % 2)
outcome("Intercomm.Scan", lambda: inter.Scan(bytearray(1), bytearray(1)))
outcome("Intercomm.Scan_init", lambda: inter.Scan_init(bytearray(1), bytearray(1)))
outcome("Intercomm.Is_revoked", lambda: inter.Is_revoked())  # mpi4py's, on no native handle
inter.Free()
outcome("Intercomm", lambda: MPI.Intercomm(world))
# no native handle for a communicator across two jobs: said why, not "not yet"
for call in ("toint", "py2f"):
    try:
        getattr(world, call)()
    except NotBridged as exc:
        assert "impossible" in str(exc) and "two MPI jobs" in str(exc), exc
        print(f"rank {rank}: {call} impossible", flush=True)
# COMM_SELF is still COMM_SELF
outcome("COMM_SELF", lambda: MPI.COMM_SELF.Barrier())
assert MPI.COMM_SELF.Get_size() == 1 and MPI.COMM_SELF == MPI.Comm(MPI.COMM_SELF)
world.Barrier()
print(f"rank {rank}: done", flush=True)
