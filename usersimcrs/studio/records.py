"""What a study stores: one typed record per line of the study log, appended as people act.

Every record carries a `record_id` (the submission ID of the form that made it, or an ID derived
from what it is, e.g. ``assign:P00003:2``), so a retried or double-clicked submission is stored
once. The study's state (who has which assignment, what they answered) is the replay of the log.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from usersimcrs.core.dialogue import ItemRef

TaskKind = Literal["chat", "battle", "annotate", "turing"]
Truth = Literal["human", "simulated"]


def now_iso() -> str:
    """The current UTC time, ISO 8601 with milliseconds."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_iso(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid")

    record_id: str = Field(min_length=1, max_length=128)
    participant_id: str
    at: str = Field(default_factory=now_iso)


class ParticipantRecord(_Record):
    """A participant joined (by a link the researcher issued, or by the open link)."""

    kind: Literal["participant"] = "participant"
    index: int
    origin: Literal["link", "open"]
    external_id: str | None = Field(None, description="an ID the platform passed (e.g. PROLIFIC_PID)")


class ShownConversation(BaseModel):
    """A stored conversation in an annotation or Turing assignment."""

    model_config = ConfigDict(extra="forbid")

    conversation_id: str
    source: str = Field(description="the run folder (cell) it comes from; 'gold' for an inline gold conversation")
    gold: int | None = Field(None, description="index of the gold conversation in the study config")
    truth: Truth | None = None


class AssignmentRecord(_Record):
    """Step `step` of a participant's plan, with what the balancing chose for it."""

    kind: Literal["assignment"] = "assignment"
    assignment_id: str
    step: int
    task: TaskKind
    crs: list[str] = Field(default_factory=list, description="chat: [crs]; battle: [crs A, crs B]")
    conversation_ids: list[str] = Field(default_factory=list, description="the conversations the participant holds")
    shown: list[ShownConversation] = Field(default_factory=list, description="annotate/turing: what to rate")


class ExchangeRecord(_Record):
    """One user turn and the CRS's answer, or the failure in its place (then `error` is set)."""

    kind: Literal["exchange"] = "exchange"
    assignment_id: str
    conversation_id: str
    turn: int = Field(ge=0, description="exchanges recorded before this one, failed ones included")
    user_text: str | None = Field(None, description="None when the CRS opens the conversation")
    reply_text: str | None = None
    items: list[ItemRef] = Field(default_factory=list)
    items_from_text: bool = False
    error: str | None = None
    latency_s: float | None = None


class ChatEndRecord(_Record):
    """The participant ended a conversation (or reached the turn limit)."""

    kind: Literal["chat_end"] = "chat_end"
    assignment_id: str
    conversation_id: str
    reason: Literal["user_stop", "max_turns"]


class LabelRecord(_Record):
    """The participant's own label of a conversation they held, and their aspect ratings of it."""

    kind: Literal["label"] = "label"
    assignment_id: str
    conversation_id: str
    satisfaction: Literal["satisfied", "frustrated"]
    ratings: dict[str, int] = Field(default_factory=dict)


class VoteRecordEvent(_Record):
    """The participant's vote after a battle."""

    kind: Literal["vote"] = "vote"
    assignment_id: str
    outcome: Literal["a", "b", "tie"]
    feedback: str | None = None


class AnnotationRecord(_Record):
    """Ratings of one shown conversation: per conversation, and per system turn (by utterance index)."""

    kind: Literal["annotation"] = "annotation"
    assignment_id: str
    position: int = Field(ge=0, description="index in the assignment's `shown` list")
    conversation_id: str
    ratings: dict[str, int] = Field(default_factory=dict)
    turn_ratings: dict[int, dict[str, int]] = Field(default_factory=dict)
    gold: int | None = None
    gold_passed: bool | None = None


class TuringRecord(_Record):
    """The participant's guess whether a conversation's user was a person or a simulator."""

    kind: Literal["turing"] = "turing"
    assignment_id: str
    position: int = Field(ge=0)
    conversation_id: str
    answer: Truth
    truth: Truth
    confidence: int | None = Field(None, ge=1, le=3)


class CompletionRecord(_Record):
    """The participant finished every step."""

    kind: Literal["completion"] = "completion"


StudyRecord = Annotated[
    Union[
        ParticipantRecord,
        AssignmentRecord,
        ExchangeRecord,
        ChatEndRecord,
        LabelRecord,
        VoteRecordEvent,
        AnnotationRecord,
        TuringRecord,
        CompletionRecord,
    ],
    Field(discriminator="kind"),
]
RECORD_ADAPTER: TypeAdapter[StudyRecord] = TypeAdapter(StudyRecord)
