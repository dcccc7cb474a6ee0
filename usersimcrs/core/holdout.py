"""A held-out share of a corpus's conversations, decided by each conversation's ID alone.

The corpus NLG leaves the held-out conversations out of its retrieval pool and `fidelity
--human-holdout` compares a run with exactly those, without either side storing the split.
"""

from __future__ import annotations

import hashlib


def held_out(conversation_id: str, share: float) -> bool:
    """Whether a split keeping `share` (0..1) of the conversations apart holds this one out.

    A fixed function of the ID (SHA-256), so the same ID falls on the same side in every process,
    corpus order and run seed.
    """
    if share <= 0.0:
        return False
    digest = hashlib.sha256(f"usersimcrs-holdout:{conversation_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < share
