"""Membership proofs: an HMAC of a fresh challenge, bound to the claim and the purpose."""

from mmpi.wire import proof as Q

SECRET = "ab" * 16


def test_a_proof_checks_only_for_its_secret_challenge_claim_and_purpose():
    nonce = Q.nonce()
    answer = Q.prove(SECRET, Q.ADMIT, nonce, "low", 0)
    assert Q.check(SECRET, answer, Q.ADMIT, nonce, "low", 0)
    assert SECRET not in answer
    assert not Q.check("cd" * 16, answer, Q.ADMIT, nonce, "low", 0)  # another job
    assert not Q.check(SECRET, answer, Q.ADMIT, Q.nonce(), "low", 0)  # replayed
    assert not Q.check(SECRET, answer, Q.ADMIT, nonce, "high", 0)  # another cluster
    assert not Q.check(SECRET, answer, Q.ADMIT, nonce, "low", 1)  # another forwarder
    assert not Q.check(SECRET, answer, Q.WATCH, nonce, "low", 0)  # another purpose


def test_malformed_answers_are_refused_not_raised():
    nonce = Q.nonce()
    for answer in (None, 3, ["x"], "", "é" * 64, Q.prove(SECRET, Q.ADMIT, nonce, "low", 0)[:-1]):
        assert not Q.check(SECRET, answer, Q.ADMIT, nonce, "low", 0)


def test_nonces_are_fresh():
    assert len({Q.nonce() for _ in range(100)}) == 100
