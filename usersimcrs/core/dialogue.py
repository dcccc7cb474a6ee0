"""Dialogues, utterances and dialogue acts; one `Dialogue` is one line of `dialogues.jsonl`."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from usersimcrs.core.item_ref import ItemRef
from usersimcrs.core.item_ref import Resolution as Resolution  # re-exported from its former home
from usersimcrs.core.json_types import JSON
from usersimcrs.core.profile import UserProfile

USER = "USER"
AGENT = "AGENT"
# metadata key of a failed conversation: whose code was running when it failed ("crs", "simulator"
# or "toolkit"); the engine writes it, the validity gate reads it
FAILURE_SIDE = "failure_side"
Participant = Literal["USER", "AGENT"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=False)


class SlotValue(_Model):
    """One slot of a dialogue act, optionally with its value and character span."""

    slot: str
    value: str | None = None
    start: int | None = None
    end: int | None = None


class DialogueAct(_Model):
    """An intent with optional slot-value pairs, e.g. ``DISCLOSE(GENRE="comedy")``."""

    intent: str
    slot_values: list[SlotValue] = Field(default_factory=list)

    def __str__(self) -> str:
        parts = []
        for sv in self.slot_values:
            parts.append(sv.slot if sv.value is None else f'{sv.slot}="{sv.value}"')
        return f"{self.intent}({','.join(parts)})"

    def slots(self) -> dict[str, str | None]:
        """Slot name -> value (last one wins), a convenience for policies."""
        return {sv.slot: sv.value for sv in self.slot_values}


class Annotation(_Model):
    """A key-value annotation on an utterance (DialogueKit keeps them as pairs)."""

    key: str
    value: JSON = None  # DialogueKit keeps any JSON value here


class Utterance(_Model):
    """One turn of one participant. Agent turns carry their ranked recommendation list in `items`."""

    participant: Participant
    text: str
    utterance_id: str | None = None
    dialogue_acts: list[DialogueAct] = Field(default_factory=list)
    annotations: list[Annotation] = Field(default_factory=list)
    feedback: int | None = None
    items: list[ItemRef] = Field(default_factory=list)
    latency_s: float | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    def annotation(self, key: str, default: Any = None) -> Any:
        """The value of the first annotation named `key`."""
        for ann in self.annotations:
            if ann.key == key:
                return ann.value
        return default


class Dialogue(_Model):
    """A conversation and, for simulated ones, how it ran (status, end reason, seed, profile).

    `profile` is the user the simulator played (simulators read it, never change it). A run stores
    it once in `profiles.jsonl` and each `dialogues.jsonl` line only names it by `profile_id`;
    `Run` attaches the profile again on read (older lines embed it and still read).
    """

    conversation_id: str
    utterances: list[Utterance] = Field(default_factory=list)
    agent_id: str = "CRS"
    user_id: str = "USER"
    metadata: dict[str, Any] = Field(default_factory=dict)
    status: Literal["ok", "failed"] = "ok"
    error: str | None = None
    end_reason: str | None = None
    index: int | None = None
    seed: int | None = None
    profile: UserProfile | None = None
    profile_id: str | None = None
    timings: dict[str, float] = Field(default_factory=dict)

    def add(self, utterance: Utterance) -> Utterance:
        """Append an utterance, giving it a stable ID from the conversation ID and position."""
        if utterance.utterance_id is None:
            utterance.utterance_id = f"{self.conversation_id}:{len(self.utterances)}"
        self.utterances.append(utterance)
        return utterance

    @property
    def user_turns(self) -> list[Utterance]:
        return [u for u in self.utterances if u.participant == USER]

    @property
    def agent_turns(self) -> list[Utterance]:
        return [u for u in self.utterances if u.participant == AGENT]

    def recommendation_lists(self) -> list[list[ItemRef]]:
        """One ranked list per system turn (CoRE's R), empty lists included."""
        return [list(u.items) for u in self.agent_turns]

    def session_list(self) -> list[ItemRef]:
        """The concatenation of all per-turn lists, the list judged for the session."""
        return [item for turn in self.recommendation_lists() for item in turn]
