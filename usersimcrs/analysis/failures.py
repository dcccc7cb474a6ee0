"""Why conversations failed: error strings grouped into reasons, counted, with example conversation IDs.

One grouping serves the run summary (`usersimcrs run` prints the top reasons) and the report's
failure-reasons table. Volatile parts (URLs, IDs, paths, quoted values, numbers) are blanked, so
the same fault on another port or after another number of attempts is one reason; HTTP status
codes are kept (`HTTP 500` and `HTTP 404` stay apart).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from pydantic import BaseModel, Field

from usersimcrs.core.dialogue import Dialogue
from usersimcrs.core.jsonl import iter_jsonl

REASON_CHARS = 160
_URL = re.compile(r"\b[a-z][a-z0-9+.\-]*://\S+?(?=[\s)\]'\",]|$)", re.IGNORECASE)
_HEX = re.compile(r"\b(?=[0-9a-f-]*\d)[0-9a-f]{6,}(?:-[0-9a-f]{2,})*\b", re.IGNORECASE)
_PATH = re.compile(r"(?:/[\w.\-]+){2,}")
_QUOTED = re.compile(r"'[^']{0,200}'|\"[^\"]{0,200}\"")
_NUMBER = re.compile(r"(?<!HTTP )(?<![A-Za-z0-9.])\d+(?:\.\d+)?")


def failure_reason(error: str | None) -> str:
    """The reason an error string belongs to (volatile parts blanked; one line, at most 160 characters)."""
    if not error or not str(error).strip():
        return "(no error recorded)"
    text = " ".join(str(error).split())
    for pattern, token in ((_URL, "<url>"), (_HEX, "<id>"), (_PATH, "<path>"), (_QUOTED, "<value>"), (_NUMBER, "<n>")):
        text = pattern.sub(token, text)
    return text if len(text) <= REASON_CHARS else text[: REASON_CHARS - 1] + "…"


class FailureReason(BaseModel):
    """One group of failed conversations: the reason, how many, one full error and the first IDs (by index)."""

    reason: str
    count: int
    example: str
    conversation_ids: list[str] = Field(default_factory=list)


class FailureSummary(BaseModel):
    """The failed conversations of a run, grouped by reason (most frequent first, ties by reason)."""

    total: int = 0
    failed: int = 0
    reasons: list[FailureReason] = Field(default_factory=list)

    @property
    def share(self) -> float | None:
        """Failed conversations over all written ones; None when none were written."""
        return self.failed / self.total if self.total else None

    def top(self, n: int = 5) -> list[FailureReason]:
        return self.reasons[:n]


def summarize_failures(dialogues: Iterable[Dialogue], *, examples: int = 3) -> FailureSummary:
    """Group the failed conversations by `failure_reason`."""
    total = 0
    groups: dict[str, list[Dialogue]] = {}
    for dialogue in dialogues:
        total += 1
        if dialogue.status != "ok":
            groups.setdefault(failure_reason(dialogue.error), []).append(dialogue)
    reasons = []
    for reason, members in groups.items():
        members.sort(key=_position)
        reasons.append(
            FailureReason(
                reason=reason,
                count=len(members),
                example=str(members[0].error or "")[:500],
                conversation_ids=[d.conversation_id for d in members[:examples]],
            )
        )
    reasons.sort(key=lambda r: (-r.count, r.reason))
    return FailureSummary(total=total, failed=sum(r.count for r in reasons), reasons=reasons)


def summarize_failures_file(path: str | Path) -> FailureSummary:
    """`summarize_failures` over a `dialogues.jsonl` file, streamed."""
    return summarize_failures(Dialogue.model_validate(record) for record in iter_jsonl(path))


def _position(dialogue: Dialogue) -> tuple[int, str]:
    return (dialogue.index if dialogue.index is not None else 1 << 30, dialogue.conversation_id)
