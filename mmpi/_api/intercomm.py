"""The bridged intercommunicator: mpi4py's `Intercomm` API between two bridged groups.

Point-to-point calls address the remote group (`intercore` Rule 1) and are those of every
bridged communicator. A collective call is one on the local group's private communicator plus
the leaders' messages (`intercore` Rule 2): a rooted call gives its data to the other group's
leader, which spreads it in its group; an all-to-all call gathers at the leaders, which swap.
The buffer forms, blocking, non-blocking and persistent, are `inter_methods`'s; the object forms
and the calls that make communicators are here. Calls without a form (Scan, Create_group,
...) raise NotBridged by name.
"""

from __future__ import annotations

import inspect
import pickle

from .._startup.native import MPI
from ..errors import NotBridged, RootError, UsageError
from . import intercore as _inter
from .bridged import _Bridged, intracomm_class
from .coll_methods import CollectiveMethods
from .create_methods import CommunicatorMethods
from .group import BridgedGroup
from .inter_methods import InterCollectiveMethods
from .intercoll import T_ROOTED as _T_ROOTED
from .intercoll import T_SWAP as _T_SWAP
from .persist_methods import PersistentMethods, add_persistent

ROOT, PROC_NULL = MPI.ROOT, MPI.PROC_NULL


class Intercomm(InterCollectiveMethods, _Bridged, MPI.Intercomm):
    """An intercommunicator between two groups of the bridged world (mirrors mpi4py's)."""

    # -- the groups ----------------------------------------------------------------------
    def Get_size(self) -> int:
        """The size of the local group."""
        self._open("Get_size")
        return len(self._core.local_members)

    def Get_rank(self) -> int:
        """The rank of this process in the local group."""
        self._open("Get_rank")
        return self._core.rank

    @property
    def size(self) -> int:
        """The size of the local group."""
        return self.Get_size()

    @property
    def rank(self) -> int:
        """The rank of this process in the local group."""
        return self.Get_rank()

    def Get_group(self):
        """The local group."""
        self._open("Get_group")
        return BridgedGroup(self._core.local_members, self._core.engine.vrank)

    @property
    def group(self):
        """The local group."""
        return self.Get_group()

    def Get_remote_size(self) -> int:
        """The size of the remote group."""
        self._open("Get_remote_size")
        return self._core.size

    @property
    def remote_size(self) -> int:
        """The size of the remote group."""
        return self.Get_remote_size()

    def Get_remote_group(self):
        """The remote group."""
        self._open("Get_remote_group")
        return BridgedGroup(self._core.members, self._core.engine.vrank)

    @property
    def remote_group(self):
        """The remote group."""
        return self.Get_remote_group()

    def Is_inter(self) -> bool:
        """True: an intercommunicator."""
        self._open("Is_inter")
        return True

    def Is_intra(self) -> bool:
        """False: an intercommunicator."""
        self._open("Is_intra")
        return False

    @property
    def is_inter(self) -> bool:
        """True: an intercommunicator."""
        return self.Is_inter()

    @property
    def is_intra(self) -> bool:
        """False: an intercommunicator."""
        return self.Is_intra()

    # -- new communicators ---------------------------------------------------------------
    def Dup(self, info=None):
        """A new intercommunicator of the same groups."""
        core = _inter.dup(self._core)
        return self._wrap(core, "", type(self))  # as MPICH: a duplicate has no name

    def Clone(self):
        """As Dup."""
        return self.Dup()


    def Split(self, color: int = 0, key: int = 0):
        """The intercommunicator of the ranks of both groups that gave `color`."""
        self._check("Split")
        color, key = int(color), int(key)
        if color < 0 and color != MPI.UNDEFINED:
            raise UsageError(f"Split on rank {self._core.rank}: color {color} must be >= 0 or "
                             "MPI.UNDEFINED")
        mine = self._local.allgather((color, key))
        theirs = self._theirs(mine, "Split")
        core = _inter.split(self._core, mine, theirs, color, key)
        return MPI.COMM_NULL if core is None else self._wrap(core, "", type(self))

    def Compare(self, comm) -> int:
        """IDENT (the same), CONGRUENT (the same groups in order), SIMILAR or UNEQUAL."""
        other = getattr(comm, "_core", None)
        if other is self._core:
            return MPI.IDENT
        if not isinstance(other, _inter.InterCore):
            return MPI.UNEQUAL
        mine = (self._core.local_members, self._core.members)
        if (other.local_members, other.members) == mine:
            return MPI.CONGRUENT
        same = set(other.local_members) == set(mine[0]) and set(other.members) == set(mine[1])
        return MPI.SIMILAR if same else MPI.UNEQUAL

    def Merge(self, high: bool = False):
        """The intracommunicator of both groups: the group that gave `high` False first."""
        self._check("Merge")
        core = self._core
        mine = bool(high)
        theirs = self._theirs(mine, "Merge")
        if mine == theirs:
            order = _inter.union_of(core.local_members, core.members)
        else:
            order = core.members + core.local_members if mine else \
                core.local_members + core.members
        return self._wrap(_inter.merge(core, order), "", intracomm_class())

    def Free(self) -> None:
        """Release this intercommunicator (after its pending operations)."""
        if not self._core.freed:
            self._core.free()

    free = Free

    def Disconnect(self) -> None:
        """As Free."""
        self.Free()

    # -- the leaders' messages (Rule 2 of intercore) -------------------------------------
    @property
    def _local(self):
        """The bridged object over the local group's private communicator (made once)."""
        core = self._core
        if core.local_comm is None:
            core.local_comm = intracomm_class()(core.local, "")
        return core.local_comm

    def _send(self, data, dest: int, call: str) -> None:
        e = self._core.engine
        op = e.p2p.isend(self._core.coll, memoryview(data).cast("B"), dest, _T_ROOTED)
        e.wait_for(op.poll)
        if op.error is not None:
            raise op.error

    def _recv(self, source: int, call: str) -> bytes:
        e = self._core.engine
        op = e.p2p.irecv(self._core.coll, None, source, _T_ROOTED, call)
        e.wait_for(op.poll, op.remote)
        if op.error is not None:
            raise op.error
        data = bytes(op.obj)
        op.release()
        return data

    def _swap(self, data, call: str, tag: int = _T_SWAP) -> bytes:
        """What the other leader sent for our `data` (called by the leaders only)."""
        e, coll = self._core.engine, self._core.coll
        send = e.p2p.isend(coll, memoryview(data).cast("B"), 0, tag)
        recv = e.p2p.irecv(coll, None, 0, tag, call)
        e.wait_for(lambda: send.poll() and recv.poll())
        for op in (send, recv):
            if op.error is not None:
                raise op.error
        out = bytes(recv.obj)
        recv.release()
        return out

    def _theirs(self, obj, call: str):
        """The other group's `obj` (its leader's), on every rank of this group.

        Only this group's leader's `obj` goes over.
        """
        theirs = pickle.loads(self._swap(pickle.dumps(obj), call)) \
            if self._core.rank == 0 else None
        return self._local.bcast(theirs, 0)

    def _root(self, root, call: str) -> int:
        root = int(root)
        if root in (ROOT, PROC_NULL) or 0 <= root < self._core.size:
            return root
        raise RootError(f"{call} on rank {self._core.rank}: root {root} is neither MPI.ROOT, "
                        f"MPI.PROC_NULL nor a rank of the remote group of size "
                        f"{self._core.size}")

    def _check(self, call: str, flush: bool = True) -> None:
        core = self._core
        core.engine.check()
        core.check_open(call)  # (a persistent request made before may start)
        if flush and core.pending:  # the leaders' messages of the calls before go first
            core.flush()

    # -- collectives, object forms -------------------------------------------------------
    def barrier(self) -> None:
        """As Barrier."""
        self.Barrier()

    def bcast(self, obj, root=0):
        """`root`'s object to every rank of the other group."""
        self._check("bcast")
        root = self._root(root, "bcast")
        if root == ROOT:
            self._send(pickle.dumps(obj), 0, "bcast")
            return None
        if root == PROC_NULL:
            return None
        got = pickle.loads(self._recv(root, "bcast")) if self._core.rank == 0 else None
        return self._local.bcast(got, 0)

    def gather(self, sendobj, root=0):
        """The other group's objects, in rank order, at `root`."""
        self._check("gather")
        root = self._root(root, "gather")
        if root == ROOT:
            return pickle.loads(self._recv(0, "gather"))
        if root == PROC_NULL:
            return None
        got = self._local.gather(sendobj, 0)
        if got is not None:
            self._send(pickle.dumps(got), root, "gather")
        return None

    def scatter(self, sendobj, root=0):
        """`root`'s objects, one to each rank of the other group."""
        self._check("scatter")
        root = self._root(root, "scatter")
        if root == ROOT:
            objs = list(sendobj) if sendobj is not None else [None] * self._core.size
            if len(objs) != self._core.size:
                raise UsageError(f"scatter on rank {self._core.rank}: {len(objs)} objects "
                                 f"for a remote group of {self._core.size}")
            self._send(pickle.dumps(objs), 0, "scatter")
            return None
        if root == PROC_NULL:
            return None
        objs = pickle.loads(self._recv(root, "scatter")) if self._core.rank == 0 else None
        return self._local.scatter(objs, 0)

    def allgather(self, sendobj):
        """The other group's objects, in rank order, on every rank."""
        self._check("allgather")
        return self._theirs(self._local.gather(sendobj, 0), "allgather")

    def alltoall(self, sendobj):
        """sendobj[j] to rank j of the other group; what its ranks sent here, in order."""
        self._check("alltoall")
        objs = list(sendobj) if sendobj is not None else [None] * self._core.size
        if len(objs) != self._core.size:
            raise UsageError(f"alltoall on rank {self._core.rank}: {len(objs)} objects for a "
                             f"remote group of {self._core.size}")
        got = self._local.gather(objs, 0)
        out = None
        if got is not None:
            theirs = pickle.loads(self._swap(pickle.dumps(got), "alltoall"))
            out = [[row[j] for row in theirs] for j in range(self.Get_size())]
        return self._local.scatter(out, 0)

    def allreduce(self, sendobj, op=MPI.SUM):
        """`op` over the other group's objects, on every rank."""
        self._check("allreduce")
        return self._theirs(self._local.reduce(sendobj, op, 0), "allreduce")

    def reduce(self, sendobj, op=MPI.SUM, root=0):
        """`op` over the other group's objects, at `root`."""
        self._check("reduce")
        root = self._root(root, "reduce")
        if root == ROOT:
            return pickle.loads(self._recv(0, "reduce"))
        if root == PROC_NULL:
            return None
        part = self._local.reduce(sendobj, op, 0)
        if self._core.rank == 0:
            self._send(pickle.dumps(part), root, "reduce")
        return None


def _not_here(name: str):
    def call(self, *args, **kwargs):
        raise NotBridged(f"{name} is not bridged yet on an intercommunicator: mmpi provides "
                         "its point-to-point calls, every buffer collective (blocking, "
                         "non-blocking and persistent), the object forms, Dup, "
                         "Split, Compare and Merge")

    call.__name__ = name
    call.__doc__ = "Not bridged yet on an intercommunicator: raises NotBridged."
    return call


def _stub_intracomm_only() -> None:
    """What a bridged intracommunicator has that this class lacks raises NotBridged."""
    # the duplicates of CommunicatorMethods call this class's Dup
    own = set(vars(Intercomm)) | set(vars(InterCollectiveMethods)) | \
        {"Dup_with_info", "Idup", "Idup_with_info"}
    for mixin in (CollectiveMethods, PersistentMethods, CommunicatorMethods):
        for name, attr in vars(mixin).items():
            if not name.startswith("_") and name not in own and callable(attr) and \
                    "attr" not in name and "keyval" not in name:  # attributes work
                setattr(Intercomm, name, _not_here(name))
    # and every call of mpi4py's Intercomm that no bridged class provides (ULFM, Spawn,
    # ...): on the null native handle it would fail with MPI's raw "invalid communicator"
    mine = set()
    for base in Intercomm.__mro__:
        if base.__module__.startswith("mpi4py"):
            break
        mine |= set(vars(base))
    for name in dir(MPI.Intercomm):
        raw = inspect.getattr_static(MPI.Intercomm, name)
        if not name.startswith("_") and name not in mine and \
                type(raw).__name__ in ("cython_function_or_method", "method_descriptor"):
            setattr(Intercomm, name, _not_here(name))
    for name in ("Split_type", "Create", "Create_group", "Create_intercomm", "Scan", "Exscan"):
        setattr(Intercomm, name, _not_here(name))


_stub_intracomm_only()
add_persistent(Intercomm, skip=("Iscan", "Iexscan"))
for _name in ("Scan_init", "Exscan_init"):
    setattr(Intercomm, _name, _not_here(_name))
del _name

__all__ = ["Intercomm"]
