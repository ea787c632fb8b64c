"""MPI matching rules of the pure matcher: order, wildcards, probe semantics."""

from dataclasses import dataclass

from mmpi._engine.matching import MatchQueues, accepts


@dataclass(eq=False)
class Msg:
    source: int
    tag: int
    label: str = ""


@dataclass(eq=False)
class Recv:
    source: int | None
    tag: int | None


def test_wildcards():
    assert accepts(None, None, 3, 4)
    assert accepts(3, None, 3, 4)
    assert accepts(None, 4, 3, 4)
    assert not accepts(2, None, 3, 4)
    assert not accepts(None, 5, 3, 4)


def test_arrival_order_is_kept_per_receive():
    q = MatchQueues()
    a, b = Msg(1, 7, "a"), Msg(1, 7, "b")
    assert q.arrive(a) is None and q.arrive(b) is None
    assert q.post(Recv(1, 7)) is a
    assert q.post(Recv(None, None)) is b


def test_earliest_posted_receive_wins():
    q = MatchQueues()
    r_any, r_specific = Recv(None, None), Recv(2, 5)
    assert q.post(r_any) is None and q.post(r_specific) is None
    assert q.arrive(Msg(2, 5)) is r_any  # posted first, so it takes the message
    assert q.arrive(Msg(2, 5)) is r_specific


def test_tag_selects_later_message():
    q = MatchQueues()
    first, second = Msg(0, 1), Msg(0, 2)
    q.arrive(first)
    q.arrive(second)
    assert q.post(Recv(0, 2)) is second
    assert q.post(Recv(0, 1)) is first
    assert not q.unexpected


def test_peek_does_not_consume_and_take_does():
    q = MatchQueues()
    m = Msg(4, 9)
    q.arrive(m)
    assert q.peek(None, 9) is m
    assert q.peek(3, None) is None
    q.take(m)
    assert q.peek(None, None) is None


def test_cancel():
    q = MatchQueues()
    r = Recv(1, 1)
    q.post(r)
    assert q.cancel(r)
    assert not q.cancel(r)
    assert q.arrive(Msg(1, 1)) is None
