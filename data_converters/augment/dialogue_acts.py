"""LLM dialogue-act labelling: one utterance -> intents with slot values, as schema-constrained JSON."""

from __future__ import annotations

from typing import Any

from data_converters.augment.base import AnnotationTask, Provenance, Unit
from usersimcrs.core.dialogue import Dialogue, DialogueAct, SlotValue
from usersimcrs.core.json_types import JSON, JSONSchema
from usersimcrs.llm.base import Message

PROVENANCE_KEY = "annotation_provenance"


def act_schema(intents: list[str], slots: list[str], *, max_acts: int, max_slots: int, max_chars: int) -> JSONSchema:
    """`{"acts": [{"intent": <enum>, "slots": [{"slot": <enum>, "value": str}]}]}` with small bounds."""
    slot = {
        "type": "object",
        "properties": {"slot": {"type": "string", "enum": slots}, "value": {"type": "string", "maxLength": max_chars}},
        "required": ["slot", "value"],
    }
    act = {
        "type": "object",
        "properties": {
            "intent": {"type": "string", "enum": intents},
            "slots": {"type": "array", "items": slot, "maxItems": max_slots},
        },
        "required": ["intent", "slots"],
    }
    return {
        "type": "object",
        "properties": {"acts": {"type": "array", "items": act, "minItems": 1, "maxItems": max_acts}},
        "required": ["acts"],
    }


def span(text: str, value: str) -> tuple[int | None, int | None]:
    """Where `value` occurs in `text` (case-insensitive), or (None, None)."""
    start = text.lower().find(value.lower()) if value else -1
    return (start, start + len(value)) if start >= 0 else (None, None)


class DialogueActTask(AnnotationTask):
    """Labels each utterance without dialogue acts; provenance goes to metadata['annotation_provenance'].

    Turns of a participant with no intents in the prompt (e.g. an intent file for users only) are left alone.
    """

    name = "dialogue-acts"
    default_prompt = "dialogue_acts"

    def units(self, dialogue: Dialogue, overwrite: bool) -> list[Unit]:
        return [
            Unit(
                key=f"{dialogue.conversation_id}\t{utt.utterance_id or i}",
                conversation_id=dialogue.conversation_id,
                utterance_index=i,
            )
            for i, utt in enumerate(dialogue.utterances)
            if (overwrite or not utt.dialogue_acts) and self._intents(utt.participant)
        ]

    def _intents(self, participant: str) -> dict[str, str]:
        return self.prompt.intents.get(participant) or {}

    def messages(self, dialogue: Dialogue, unit: Unit) -> list[Message]:
        index = unit.utterance_index or 0
        utt = dialogue.utterances[index]
        turns = int(self.prompt.option("context_turns", 2))
        context = dialogue.utterances[max(0, index - turns) : index]
        intents = self._intents(utt.participant)
        user = self.prompt.render_user(
            participant=utt.participant,
            intents="\n".join(f"- {name}: {desc}" if desc else f"- {name}" for name, desc in intents.items()),
            slots=", ".join(self.prompt.slots),
            context="\n".join(f"{u.participant}: {u.text}" for u in context) or "(start of the conversation)",
            text=utt.text,
        )
        return [Message(role="system", content=self.prompt.system.strip()), Message(role="user", content=user)]

    def schema(self, dialogue: Dialogue, unit: Unit) -> JSONSchema:
        utt = dialogue.utterances[unit.utterance_index or 0]
        return act_schema(
            list(self._intents(utt.participant)),
            list(self.prompt.slots),
            max_acts=int(self.prompt.option("max_acts", 3)),
            max_slots=int(self.prompt.option("max_slots", 3)),
            max_chars=int(self.prompt.option("max_value_chars", 60)),
        )

    def parse(self, parsed: JSON, dialogue: Dialogue, unit: Unit) -> dict[str, Any]:
        utt = dialogue.utterances[unit.utterance_index or 0]
        allowed, slots = set(self._intents(utt.participant)), set(self.prompt.slots)
        acts = []
        for raw in (parsed or {}).get("acts") or []:
            if not isinstance(raw, dict) or raw.get("intent") not in allowed:
                continue
            values = []
            for sv in raw.get("slots") or []:
                if isinstance(sv, dict) and sv.get("slot") in slots:
                    value = str(sv.get("value") or "").strip() or None
                    start, end = span(utt.text, value or "")
                    if start is None:
                        value = None  # a value not found in the turn is a guess: keep only the slot
                    values.append([sv["slot"], value, start, end])
            acts.append({"intent": raw["intent"], "slot_values": values})
        if not acts:
            raise ValueError("no usable dialogue act in the reply")
        return {"acts": acts}

    def apply(self, dialogue: Dialogue, unit: Unit, result: dict[str, Any], provenance: Provenance) -> None:
        utt = dialogue.utterances[unit.utterance_index or 0]
        utt.dialogue_acts = [
            DialogueAct(
                intent=act["intent"],
                slot_values=[SlotValue(slot=s, value=v, start=a, end=b) for s, v, a, b in act["slot_values"]],
            )
            for act in result["acts"]
        ]
        utt.metadata[PROVENANCE_KEY] = provenance.model_dump()
