"""A conversation people held, as the toolkit's `Dialogue`: what the CRS saw, and what the export writes.

Failed CRS calls are not turns: the CRS said nothing there. They are kept in
``metadata["crs_failures"]`` (user text, error, time), and a conversation whose last call failed,
or where the CRS never answered, is ``status: failed`` with that error, so a CRS's failures count
against it. The participant's own label becomes ``metadata["reference"]`` in the shape of a
converted CRSArena-Dial corpus (``satisfaction_label``, ``satisfied`` 1/0) plus the rubric aspects
they rated.
"""

from __future__ import annotations

from typing import Any

from usersimcrs.core.dialogue import AGENT, USER, Dialogue, Utterance
from usersimcrs.studio.state import Conversation

SOURCE = "studio"
SATISFIED = {"satisfied": 1, "frustrated": 0}


def history(conversation: Conversation) -> Dialogue:
    """The turns the CRS has answered so far (what its connector gets as history)."""
    dialogue = Dialogue(
        conversation_id=conversation.conversation_id,
        agent_id=conversation.crs,
        user_id=conversation.participant_id,
    )
    for exchange in conversation.exchanges:
        if exchange.error is not None:
            continue
        if exchange.user_text is not None:
            dialogue.add(Utterance(participant=USER, text=exchange.user_text))
        dialogue.add(
            Utterance(
                participant=AGENT,
                text=exchange.reply_text or "",
                items=list(exchange.items),
                latency_s=exchange.latency_s,
                metadata={"items_from_text": True} if exchange.items_from_text else {},
            )
        )
    return dialogue


def reference(conversation: Conversation) -> dict[str, Any] | None:
    """The participant's label and ratings as a reference record (None when unlabelled)."""
    label = conversation.label
    if label is None:
        return None
    return {"satisfaction_label": label.satisfaction, "satisfied": SATISFIED[label.satisfaction], **label.ratings}


def held_dialogue(conversation: Conversation, *, study: str, task: str, side: str | None = None) -> Dialogue:
    """The stored form of a finished conversation (export)."""
    dialogue = history(conversation)
    failures = [
        {"turn": e.turn, "user_text": e.user_text, "error": e.error, "at": e.at}
        for e in conversation.exchanges
        if e.error is not None
    ]
    metadata: dict[str, Any] = {
        "source": SOURCE,
        "study": study,
        "task": task,
        "assignment_id": conversation.assignment_id,
        "crs": conversation.crs,
    }
    if side is not None:
        metadata["side"] = side
    if conversation.label is not None:
        metadata["sentiment"] = conversation.label.satisfaction
        metadata["reference"] = reference(conversation)
    if failures:
        metadata["crs_failures"] = failures
    dialogue.metadata = metadata
    last = conversation.exchanges[-1] if conversation.exchanges else None
    if last is not None and last.error is not None:
        dialogue.status, dialogue.error, dialogue.end_reason = "failed", last.error, "error"
    elif conversation.exchanges and not conversation.opened:
        dialogue.status, dialogue.error, dialogue.end_reason = "failed", "the CRS never answered", "error"
    else:
        dialogue.end_reason = conversation.end.reason if conversation.end else None
    if conversation.exchanges:
        dialogue.timings = {"crs_s": round(sum(e.latency_s or 0.0 for e in conversation.exchanges), 6)}
    return dialogue
