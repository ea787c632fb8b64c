"""IS: the NPB 3.4 integer sort — bucketed key ranking with an all-to-all key exchange."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mmpi import MPI

from . import _npb
from ._npb import Check, Result, Timer, World

MAX_ITERATIONS = 10
TEST_ARRAY_SIZE = 5
SEED = 314159265
TAG_FULL_VERIFY = 1000


@dataclass(frozen=True)
class ISClass:
    """Sizes (as log2) and the partial-verification keys of one NPB class.

    `adjust[i]` = (sign, offset): in iteration `it` the expected rank of test key i is
    ``test_rank[i] + sign * (it + offset)`` — NPB's per-class switch, written as data.
    """

    total_keys_log2: int
    max_key_log2: int
    buckets_log2: int
    test_index: tuple[int, ...]
    test_rank: tuple[int, ...]
    adjust: tuple[tuple[int, int], ...]
    max_procs: int = 1024


_UP, _DOWN = (1, 0), (-1, 0)
# NPB 3.4 sizes and partial-verification keys (is.c).
# fmt: off
CLASSES = {
    "S": ISClass(total_keys_log2=16, max_key_log2=11, buckets_log2=9,
                 test_index=(48427, 17148, 23627, 62548, 4431),
                 test_rank=(0, 18, 346, 64917, 65463),
                 adjust=(_UP, _UP, _UP, _DOWN, _DOWN), max_procs=128),
    "W": ISClass(total_keys_log2=20, max_key_log2=16, buckets_log2=10,
                 test_index=(357773, 934767, 875723, 898999, 404505),
                 test_rank=(1249, 11698, 1039987, 1043896, 1048018),
                 adjust=((1, -2), (1, -2), _DOWN, _DOWN, _DOWN)),
    "A": ISClass(total_keys_log2=23, max_key_log2=19, buckets_log2=10,
                 test_index=(2112377, 662041, 5336171, 3642833, 4250760),
                 test_rank=(104, 17523, 123928, 8288932, 8388264),
                 adjust=((1, -1), (1, -1), (1, -1), (-1, -1), (-1, -1))),
    "B": ISClass(total_keys_log2=25, max_key_log2=21, buckets_log2=10,
                 test_index=(41869, 812306, 5102857, 18232239, 26860214),
                 test_rank=(33422937, 10244, 59149, 33135281, 99),
                 adjust=(_DOWN, _UP, _UP, _DOWN, _UP)),
    "C": ISClass(total_keys_log2=27, max_key_log2=23, buckets_log2=10,
                 test_index=(44172927, 72999161, 74326391, 129606274, 21736814),
                 test_rank=(61147, 882988, 266290, 133997595, 133525895),
                 adjust=(_UP, _UP, _UP, _DOWN, _DOWN)),
}
# fmt: on


@dataclass
class State:
    """One rank's keys and the bookkeeping NPB keeps between rank() and full_verify()."""

    cls: ISClass
    num_keys: int
    shift: int
    keys: np.ndarray  # this rank's key_array
    passed: int = 0
    # Left by the last ranked iteration for full_verify:
    received: np.ndarray | None = None
    ranks_of_values: np.ndarray | None = None
    min_key: int = 0


def create_keys(world: World, cls: ISClass) -> np.ndarray:
    """Generate this rank's keys: each is MAX_KEY/4 times the sum of four uniform numbers."""
    num_keys = (1 << cls.total_keys_log2) // world.size
    # Rank r owns numbers 4*num_keys*r onwards of the one NPB stream (find_my_seed).
    seed = (SEED * _npb.pow46(_npb.A_DEFAULT, 4 * num_keys * world.rank)) & _npb.MASK46
    k = float((1 << cls.max_key_log2) // 4)
    keys = np.empty(num_keys, dtype=np.int32)
    chunk = min(num_keys, 1 << 18)
    stream = _npb.Stream(4 * chunk)
    for start in range(0, num_keys, chunk):
        seed, r = stream.fill(seed)
        r = r.reshape(chunk, 4)
        # Same summation order as NPB: ((x1 + x2) + x3) + x4, then truncate k*x.
        x = r[:, 0] + r[:, 1]
        x += r[:, 2]
        x += r[:, 3]
        x *= k
        keys[start : start + chunk] = x.astype(np.int32)
    return keys


def _redistribution(totals: np.ndarray, local: np.ndarray, num_keys: int, size: int):
    """NPB's bucket-to-rank assignment: fill ranks in order until each passes num_keys keys.

    Returns (send_count, first_bucket, last_bucket) per destination rank.
    """
    cum_total = np.cumsum(totals, dtype=np.int64)
    cum_local = np.concatenate(([0], np.cumsum(local, dtype=np.int64)))
    send_count = np.zeros(size, dtype=np.int32)
    first = np.ones(size, dtype=np.int64)  # NPB marks idle ranks with first=1 > last=0
    last = np.zeros(size, dtype=np.int64)
    prev = -1
    nbuckets = len(totals)
    for j in range(size):
        # The bucket where the running total first reaches (j+1)*num_keys, after the last one.
        i = max(int(np.searchsorted(cum_total, (j + 1) * num_keys, side="left")), prev + 1)
        if i >= nbuckets:
            break
        first[j] = prev + 1
        last[j] = i
        send_count[j] = cum_local[i + 1] - cum_local[prev + 1]
        prev = i
    return send_count, first, last


def rank(world: World, st: State, iteration: int) -> None:
    """One NPB ranking pass over all ranks' keys (timed in the main loop)."""
    cls = st.cls
    comm = world.comm
    nbuckets = 1 << cls.buckets_log2
    keys = st.keys
    if world.rank == 0:
        keys[iteration] = iteration
        keys[iteration + MAX_ITERATIONS] = (1 << cls.max_key_log2) - iteration

    bucket_size = np.zeros(nbuckets + TEST_ARRAY_SIZE, dtype=np.int32)
    # The test keys ride along in the reduction, hidden above the real buckets.
    for i, index in enumerate(cls.test_index):
        if index // st.num_keys == world.rank:
            bucket_size[nbuckets + i] = keys[index % st.num_keys]

    bucket_size[:nbuckets] = np.bincount(keys >> st.shift, minlength=nbuckets)
    if world.size == 1:
        # Everything goes to ourselves: the bucket sort would only reorder one local copy.
        outgoing = keys
    else:
        # NPB bucket-sorts before sending; sorting by value yields the same buckets in the
        # same order, so every destination gets the same keys as one contiguous piece (only the
        # order inside a bucket differs: value order instead of arrival order).
        outgoing = np.sort(keys)

    totals = np.empty_like(bucket_size)
    comm.Allreduce([bucket_size, MPI.INT], [totals, MPI.INT], op=MPI.SUM)

    send_count, first, last = _redistribution(
        totals[:nbuckets], bucket_size[:nbuckets], st.num_keys, world.size
    )
    recv_count = np.empty(world.size, dtype=np.int32)
    comm.Alltoall([send_count, MPI.INT], [recv_count, MPI.INT])
    send_displ = np.concatenate(([0], np.cumsum(send_count[:-1]))).astype(np.int32)
    recv_displ = np.concatenate(([0], np.cumsum(recv_count[:-1]))).astype(np.int32)
    received = np.empty(int(recv_count.sum()), dtype=np.int32)
    comm.Alltoallv(
        [outgoing, (send_count, send_displ), MPI.INT],
        [received, (recv_count, recv_displ), MPI.INT],
    )

    me = world.rank
    min_key = int(first[me]) << st.shift
    max_key = ((int(last[me]) + 1) << st.shift) - 1
    # Keys held by lower ranks: they are "lesser" than all of ours.
    lesser = int(sum(int(totals[first[k] : last[k] + 1].sum()) for k in range(me)))
    # The keys are their own indexes: population per value, then a running sum = ranks.
    span = max(max_key - min_key + 1, 0)
    offsets = received - min_key if min_key else received
    ranks = np.cumsum(np.bincount(offsets, minlength=span)[:span])

    for i in range(TEST_ARRAY_SIZE):
        k = int(totals[nbuckets + i])
        if min_key <= k <= max_key:
            key_rank = (int(ranks[k - 1 - min_key]) if k - 1 >= min_key else 0) + lesser
            sign, offset = cls.adjust[i]
            expected = cls.test_rank[i] + sign * (iteration + offset)
            if key_rank == expected:
                st.passed += 1
            else:
                print(
                    f"Failed partial verification: iteration {iteration}, processor {me}, "
                    f"test key {i}, key rank {key_rank}",
                    flush=True,
                )

    if iteration == MAX_ITERATIONS:
        st.received = received
        st.ranks_of_values = ranks
        st.min_key = min_key


def full_verify(world: World, st: State) -> None:
    """Place every received key by its computed rank, then check the result is in order."""
    assert st.received is not None and st.ranks_of_values is not None
    comm = world.comm
    keys = st.received
    n = len(keys)
    # NPB: key_array[--rank[key]] = key, over the keys in arrival order.  The c-th arrival of
    # value v therefore lands at rank[v] - 1 - c.
    order = np.argsort(keys, kind="stable")
    sorted_vals = keys[order]
    group_start = np.searchsorted(sorted_vals, sorted_vals, side="left")
    occurrence = np.arange(n) - group_start
    position = st.ranks_of_values[sorted_vals - st.min_key] - 1 - occurrence
    placed = np.zeros(n, dtype=np.int32)
    placed[position] = sorted_vals

    # The largest key of the rank before must not exceed our smallest.
    prev_last = np.zeros(1, dtype=np.int32)
    req = None
    if world.rank > 0:
        req = comm.Irecv([prev_last, MPI.INT], source=world.rank - 1, tag=TAG_FULL_VERIFY)
    if world.rank < world.size - 1:
        last = placed[n - 1 : n] if n else np.zeros(1, dtype=np.int32)
        comm.Send([np.ascontiguousarray(last), MPI.INT], dest=world.rank + 1, tag=TAG_FULL_VERIFY)
    if req is not None:
        req.Wait()
    bad = 0
    if world.rank > 0 and n > 0 and prev_last[0] > placed[0]:
        bad += 1
    bad += int(np.count_nonzero(placed[:-1] > placed[1:]))
    if bad:
        print(
            f"Processor {world.rank}:  Full_verify: number of keys out of sort: {bad}", flush=True
        )
    else:
        st.passed += 1


def run(world: World, klass: str) -> Result:
    """Run IS of class `klass` on `world`; the result is complete on rank 0."""
    cls = CLASSES[klass]
    if not _npb.is_power_of_two(world.size) or world.size > cls.max_procs:
        raise _npb.unsupported_ranks(
            world, "is", f"a power-of-two number of ranks from 1 to {cls.max_procs}"
        )
    total_keys = 1 << cls.total_keys_log2
    _npb.header(
        world,
        "IS",
        f" Size:  {total_keys}  (class {klass})",
        f" Iterations:   {MAX_ITERATIONS}",
        f" Total number of processes:  {world.size}",
    )
    st = State(
        cls=cls,
        num_keys=total_keys // world.size,
        shift=cls.max_key_log2 - cls.buckets_log2,
        keys=create_keys(world, cls),
    )
    # One untimed pass to touch every page and table, then start counting afresh.
    rank(world, st, 1)
    st.passed = 0
    if klass != "S":
        _npb.say(world, "", "   iteration")

    timer = Timer()
    world.comm.Barrier()
    timer.start()
    for iteration in range(1, MAX_ITERATIONS + 1):
        if klass != "S":
            _npb.say(world, f"        {iteration}")
        rank(world, st, iteration)
    elapsed = timer.stop()

    tmax = np.zeros(1)
    world.comm.Reduce([np.array([elapsed]), MPI.DOUBLE], [tmax, MPI.DOUBLE], op=MPI.MAX, root=0)
    full_verify(world, st)
    passed = np.zeros(1, dtype=np.int32)
    world.comm.Reduce(
        [np.array([st.passed], dtype=np.int32), MPI.INT], [passed, MPI.INT], op=MPI.SUM, root=0
    )

    seconds = float(tmax[0])
    expected = TEST_ARRAY_SIZE * MAX_ITERATIONS + world.size
    checks = [Check("verification passes", float(passed[0]), float(expected), 0.0)]
    return Result(
        name="IS",
        klass=klass,
        size=str(total_keys),
        iterations=MAX_ITERATIONS,
        seconds=seconds,
        mops=MAX_ITERATIONS * total_keys / seconds / 1e6 if seconds > 0 else 0.0,
        optype="keys ranked",
        checks=checks,
        active=world.size,
        notes=[
            f"(partial verification: {TEST_ARRAY_SIZE} test keys x {MAX_ITERATIONS} iterations;"
            f" full verification: 1 per rank)"
        ],
    )
