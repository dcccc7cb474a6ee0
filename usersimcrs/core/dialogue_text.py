"""A stored dialogue's text only: IDs, status, speakers, texts, item titles, act intents, turn indices.

Scoring a large run reads each conversation once and needs none of the rest (annotations, profiles,
latencies, references). `DialogueText` is that subset, decoded straight from a dialogue line with
msgspec, which skips every other field without building it: several times faster than parsing the
whole line and validating a `Dialogue`. A line whose fields do not fit (a wrong type, a missing
text) is validated as a full `Dialogue` instead, so it reads the same as everywhere else or fails
with the same one-line error.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec

from usersimcrs.core.dialogue import Dialogue, Participant
from usersimcrs.core.validation import validate
from usersimcrs.errors import DataError


class ItemText(msgspec.Struct, gc=False):
    """An item reference: its ID and title (either may be missing)."""

    id: str | None = None
    title: str | None = None


class ActText(msgspec.Struct, gc=False):
    """A dialogue act's intent."""

    intent: str


class UtteranceMetadata(msgspec.Struct, gc=False):
    """The one metadata field read: the utterance's turn index in its source corpus, if any."""

    turn_ind: Any = None


class UtteranceText(msgspec.Struct, gc=False):
    """One utterance: who speaks, what they say, the items named and the acts annotated."""

    participant: Participant
    text: str
    items: list[ItemText] = []
    dialogue_acts: list[ActText] = []
    metadata: UtteranceMetadata | None = None

    @property
    def turn_ind(self) -> Any:
        return self.metadata.turn_ind if self.metadata is not None else None


class DialogueText(msgspec.Struct, gc=False):
    """One stored conversation's ID, status and utterances (nothing else)."""

    conversation_id: str
    utterances: list[UtteranceText] = []
    status: str = "ok"


_DECODER = msgspec.json.Decoder(DialogueText)


def dialogue_text(dialogue: Dialogue) -> DialogueText:
    """The text subset of a full dialogue (what `decode_line` gives for its stored line)."""
    return DialogueText(
        conversation_id=dialogue.conversation_id,
        status=dialogue.status,
        utterances=[
            UtteranceText(
                participant=u.participant,
                text=u.text,
                items=[ItemText(id=i.id, title=i.title) for i in u.items],
                dialogue_acts=[ActText(intent=a.intent) for a in u.dialogue_acts],
                metadata=UtteranceMetadata(turn_ind=u.metadata.get("turn_ind")),
            )
            for u in dialogue.utterances
        ],
    )


def decode_line(raw: bytes, source: str) -> DialogueText:
    """One dialogue line as `DialogueText`. A line msgspec does not take (fields that do not fit, or
    Python's JSON dialect, e.g. NaN) is parsed by the standard library and validated as a `Dialogue`:
    DataError naming `source` and the conversation when it is not one. A line that is not JSON at all
    raises ValueError (json.JSONDecodeError or UnicodeDecodeError)."""
    try:
        return _DECODER.decode(raw)
    except msgspec.DecodeError:
        pass
    record = json.loads(raw)
    if not isinstance(record, dict):
        raise DataError(f"{source}: expected a JSON object, got {type(record).__name__}")
    where = f"{source}: conversation {record.get('conversation_id', '?')}"
    return dialogue_text(validate(Dialogue, record, source=where, error=DataError))
