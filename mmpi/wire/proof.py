"""Proof of membership in a job: an HMAC of a fresh challenge under the job secret.

The secret (the file `secret` in the private rendezvous directory) never travels. Whoever
checks a claim sends a random nonce; the claimant answers ``prove(secret, PURPOSE, nonce,
*claims)`` and the checker recomputes it (`check`, a constant-time comparison).

Rule: a proof binds the secret to the checker's fresh nonce, to what is claimed (which
cluster at which forwarder; which rank with which pid) and to a purpose label, so an answer
can be neither replayed nor reused for another claim, another forwarder or another purpose.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

ADMIT = "mmpi-admit"  # a cluster's rank 0 to a forwarder: (cluster, forwarder index)
WATCH = "mmpi-watch"  # a rank to mmpi-run's rank watch: (cluster, local rank, pid)


def nonce() -> str:
    """A fresh random challenge (hex)."""
    return secrets.token_hex(16)


def prove(secret: str, purpose: str, challenge: str, *claims: object) -> str:
    """HMAC-SHA256 of the challenge, the purpose and the claims under `secret` (hex)."""
    text = "\0".join([purpose, challenge, *(str(c) for c in claims)])
    return hmac.new(secret.encode(), text.encode(), hashlib.sha256).hexdigest()


def check(secret: str, answer: object, purpose: str, challenge: str, *claims: object) -> bool:
    """Whether `answer` proves the claims for this challenge (False for anything malformed)."""
    if not isinstance(answer, str):
        return False
    expected = prove(secret, purpose, challenge, *claims)
    return hmac.compare_digest(expected.encode(), answer.encode("utf-8", "replace"))
