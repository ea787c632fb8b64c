"""The back-off policy of every polling loop (mmpi/wire/backoff.py): yield first, then nap."""

import time

from mmpi.wire.backoff import Backoff


def test_napping_only_after_the_yield_phase():
    b = Backoff(spin=0.0, yield_=0.002, max_sleep=0.0001)
    assert not b.napping()  # nothing waited yet
    b.idle()  # the first idle call starts the quiet period
    assert not b.napping()
    time.sleep(0.003)
    assert b.napping()
    b.reset()  # something happened: eager polling again
    assert not b.napping()


def test_idle_naps_grow_to_the_cap():
    b = Backoff(spin=0.0, yield_=0.0, max_sleep=0.0004)
    b.idle()
    for _ in range(6):
        b.idle()
    assert b._nap == 0.0004
    b.reset()
    assert b._nap < 0.0004
