"""What a command read but did not use, and why: counted, printed and written, never dropped in silence.

meta-eval and fidelity compare completed conversations only; a failed one (status failed) or one
without a single utterance describes no conversation anyone had. Each input they read (a run, a
matrix cell, the human corpus) reports how many it held and how many were left out for each
reason, so "3089 of 3089" can no longer hide 1,111 failed conversations.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

import pandas as pd
from pydantic import BaseModel

from usersimcrs.core.dialogue import Dialogue

LEFT_OUT_CSV = "left_out.csv"
FAILED = "failed (status failed: an error ended it)"
EMPTY = "no utterances"


class LeftOut(BaseModel):
    """Conversations of one input left out for one reason, out of the conversations it held."""

    source: str
    reason: str
    conversations: int
    of: int


def completed(dialogues: Iterable[Dialogue], source: str) -> tuple[list[Dialogue], list[LeftOut]]:
    """The conversations that ran (status ok, at least one utterance) and the counts of the rest by reason."""
    kept: list[Dialogue] = []
    reasons: Counter[str] = Counter()
    total = 0
    for dialogue in dialogues:
        total += 1
        if dialogue.status != "ok":
            reasons[FAILED] += 1
        elif not dialogue.utterances:
            reasons[EMPTY] += 1
        else:
            kept.append(dialogue)
    return kept, [LeftOut(source=source, reason=r, conversations=n, of=total) for r, n in reasons.items()]


def left_out_line(left_out: Sequence[LeftOut]) -> str | None:
    """'left out 1111 of 4200 conversations: human: 1111 failed (...)' (None when nothing was left out)."""
    if not left_out:
        return None
    totals = {item.source: item.of for item in left_out}
    parts = [f"{item.source}: {item.conversations} of {item.of} {item.reason}" for item in left_out]
    return f"left out {sum(i.conversations for i in left_out)} of {sum(totals.values())} conversations: " + "; ".join(
        parts
    )


def left_out_sentence(left_out: Sequence[LeftOut]) -> str | None:
    """`left_out_line` as a report's sentence ('Left out ... .'), None when nothing was left out."""
    line = left_out_line(left_out)
    return None if line is None else line[0].upper() + line[1:] + "."


def left_out_table(left_out: Sequence[LeftOut]) -> pd.DataFrame:
    """One row per input and reason (the file `left_out.csv` beside a command's results)."""
    return pd.DataFrame([item.model_dump() for item in left_out], columns=list(LeftOut.model_fields))
