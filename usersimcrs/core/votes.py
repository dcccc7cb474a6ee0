"""Pairwise human votes between two CRSs (CRS Arena style): one `VoteRecord` per line of votes.jsonl.

A vote says which of two CRSs a person preferred after talking to both, or that it was a tie. Each
side's conversation has the ID ``<crs>_<user_id>`` in CRS Arena's data; `in_corpus_a/b` say whether
that conversation is among the converted dialogues (many voted conversations are not in a slice).
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from usersimcrs.core.jsonl import read_models
from usersimcrs.errors import DataError

VOTES = "votes.jsonl"
CSV_COLUMNS = ("user_id", "crs1", "crs2", "vote")
Outcome = Literal["a", "b", "tie"]


class VoteRecord(BaseModel):
    """One pairwise vote: the two CRSs, the outcome, and the two conversations behind it."""

    model_config = ConfigDict(extra="forbid")

    vote_id: str
    user_id: str
    crs_a: str
    crs_b: str
    outcome: Outcome
    winner: str | None = None
    conversation_a: str
    conversation_b: str
    in_corpus_a: bool | None = None
    in_corpus_b: bool | None = None
    session_id: str | None = None
    feedback: str | None = None


def arena_conversation_id(crs: str, user_id: str) -> str:
    """CRS Arena's conversation ID for a user's conversation with `crs`."""
    return f"{crs}_{user_id}"


def vote_from_row(row: dict[str, str], vote_id: str) -> VoteRecord:
    """A CRS Arena CSV row (session_id,user_id,crs1,crs2,vote,feedback) -> VoteRecord; bad rows raise DataError."""
    user, crs_a, crs_b = (row.get(k, "").strip() for k in ("user_id", "crs1", "crs2"))
    vote = (row.get("vote") or "").strip()
    if not user or not crs_a or not crs_b:
        raise DataError("empty user_id, crs1 or crs2")
    if crs_a == crs_b:
        raise DataError(f"crs1 and crs2 are the same CRS ({crs_a!r})")
    if vote == "tie":
        outcome: Outcome = "tie"
    elif vote == crs_a:
        outcome = "a"
    elif vote == crs_b:
        outcome = "b"
    else:
        raise DataError(f"vote {vote!r} is neither crs1 ({crs_a}), crs2 ({crs_b}) nor 'tie'")
    return VoteRecord(
        vote_id=vote_id,
        user_id=user,
        crs_a=crs_a,
        crs_b=crs_b,
        outcome=outcome,
        winner=None if outcome == "tie" else vote,
        conversation_a=arena_conversation_id(crs_a, user),
        conversation_b=arena_conversation_id(crs_b, user),
        session_id=(row.get("session_id") or "").strip() or None,
        feedback=(row.get("feedback") or "").strip() or None,
    )


def read_votes(path: str | Path) -> list[VoteRecord]:
    """Votes from votes.jsonl (our format) or a CRS Arena votes CSV; errors name the file and line."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such votes file")
    if path.suffix == ".jsonl":
        return read_models(path, VoteRecord)
    try:
        return _read_votes_csv(path)
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def _read_votes_csv(path: Path) -> list[VoteRecord]:
    with path.open(encoding="utf-8-sig", newline="") as handle:
        reader = csv.DictReader(handle)
        missing = [c for c in CSV_COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise DataError(f"{path}: missing column(s) {', '.join(missing)} (expected {','.join(CSV_COLUMNS)})")
        votes = []
        for line, row in enumerate(reader, start=2):
            try:
                votes.append(vote_from_row(row, f"{path.name}:{line}"))
            except DataError as exc:
                raise DataError(f"{path}:{line}: {exc}") from None
        return votes
