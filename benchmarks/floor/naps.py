"""Why mmpi never naps for less than 20 us: a relayed ping-pong with no MPI at all.

Three processes share a page of /dev/shm: A sets a counter, the relay F copies it on to B,
B answers through F, and A times the round. The two ends wait by napping (`time.sleep(NAP)`,
with the thread's timer slack set to 1 us as mmpi's back-off does); the relay polls with
`sched_yield` as mmpi's forwarder does. On the 2-vCPU VM of benchmarks/RESULTS.md, naps below
about 10 us made every hop take a whole 4 ms kernel tick, while 20 us naps did not:

    python benchmarks/floor/naps.py            # NAP values 2e-6 ... 2.5e-4, one line each

prints the one-way time for each nap length (an end that yields instead of napping: ~3 us).
"""

import ctypes
import mmap
import os
import statistics
import struct
import subprocess
import sys
import time

PATH = f"/dev/shm/mmpi-naps-{os.getpid() if len(sys.argv) < 3 else sys.argv[3]}"
ROUNDS = 300
# Offsets in the page: A->F, F->B, B->F, F->A.
A_F, F_B, B_F, F_A = 0, 8, 16, 24


def _page() -> mmap.mmap:
    fd = os.open(PATH, os.O_RDWR)
    try:
        return mmap.mmap(fd, 4096)
    finally:
        os.close(fd)


def _get(m, off: int) -> int:
    return struct.unpack_from("q", m, off)[0]


def _put(m, off: int, value: int) -> None:
    struct.pack_into("q", m, off, value)


def _role(role: str, nap: float) -> None:
    try:
        ctypes.CDLL(None).prctl(29, 1000, 0, 0, 0)  # PR_SET_TIMERSLACK, 1 us (as mmpi)
    except (OSError, AttributeError):
        pass
    m = _page()
    wait = os.sched_yield if nap == 0 else (lambda: time.sleep(nap))
    if role == "relay":
        a = b = 0
        deadline = time.monotonic() + 60
        while (a < ROUNDS or b < ROUNDS) and time.monotonic() < deadline:
            if _get(m, A_F) > a:
                a = _get(m, A_F)
                _put(m, F_B, a)
            elif _get(m, B_F) > b:
                b = _get(m, B_F)
                _put(m, F_A, b)
            else:
                os.sched_yield()
    elif role == "b":
        for i in range(1, ROUNDS + 1):
            while _get(m, F_B) < i:
                wait()
            _put(m, B_F, i)
    else:
        times = []
        for i in range(1, ROUNDS + 1):
            t = time.perf_counter()
            _put(m, A_F, i)
            while _get(m, F_A) < i:
                wait()
            times.append((time.perf_counter() - t) / 2)
        print(f"{statistics.median(times) * 1e6:.0f}", flush=True)


def _measure(nap: float) -> str:
    with open(PATH, "wb") as f:
        f.write(bytes(4096))
    me = [sys.executable, __file__]
    tag = str(os.getpid())
    others = [subprocess.Popen(me + [r, str(nap), tag]) for r in ("relay", "b")]
    try:
        out = subprocess.run(me + ["a", str(nap), tag], capture_output=True, text=True,
                             timeout=120).stdout.strip()
    finally:
        for p in others:
            p.wait(timeout=60)
    return out


if __name__ == "__main__":
    if len(sys.argv) > 1:
        _role(sys.argv[1], float(sys.argv[2]))
    else:
        try:
            for nap in (0, 2e-6, 5e-6, 1e-5, 2e-5, 4e-5, 1e-4, 2.5e-4):
                what = "yield" if nap == 0 else f"nap {nap * 1e6:g} us"
                print(f"ends {what:>12}: one way {_measure(nap)} us", flush=True)
        finally:
            os.unlink(PATH)
