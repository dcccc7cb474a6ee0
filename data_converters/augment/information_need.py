"""LLM information-need extraction: one dialogue -> constraints, requests and target items."""

from __future__ import annotations

from typing import Any

from data_converters.augment.base import AnnotationTask, Provenance, Unit
from data_converters.augment.dialogue_acts import PROVENANCE_KEY
from data_converters.augment.folder import ConvertedFolder
from usersimcrs.core.dialogue import Dialogue, ItemRef
from usersimcrs.core.json_types import JSON, JSONSchema
from usersimcrs.core.jsonl import JsonlWriter
from usersimcrs.core.profile import InformationNeed
from usersimcrs.llm.base import Message

NEED_KEY = "information_need"
NEEDS_FILE = "information_needs.llm.jsonl"


def need_schema(
    slots: list[str], *, max_constraints: int, max_requests: int, max_targets: int, max_chars: int
) -> JSONSchema:
    """`{"constraints": [{"slot", "value"}], "requests": [slot], "targets": [title]}` with small bounds."""
    text = {"type": "string", "maxLength": max_chars}
    return {
        "type": "object",
        "properties": {
            "constraints": {
                "type": "array",
                "maxItems": max_constraints,
                "items": {
                    "type": "object",
                    "properties": {"slot": {"type": "string", "enum": slots}, "value": text},
                    "required": ["slot", "value"],
                },
            },
            "requests": {"type": "array", "maxItems": max_requests, "items": {"type": "string", "enum": slots}},
            "targets": {"type": "array", "maxItems": max_targets, "items": text},
        },
        "required": ["constraints", "requests", "targets"],
    }


class InformationNeedTask(AnnotationTask):
    """Reads each dialogue's need; stored in metadata['information_need'] and information_needs.llm.jsonl."""

    name = "information-need"
    default_prompt = "information_need"

    def units(self, dialogue: Dialogue, overwrite: bool) -> list[Unit]:
        if NEED_KEY in dialogue.metadata and not overwrite:
            return []
        return [Unit(key=dialogue.conversation_id, conversation_id=dialogue.conversation_id)]

    def messages(self, dialogue: Dialogue, unit: Unit) -> list[Message]:
        limit = int(self.prompt.option("max_chars", 4000))
        conversation = "\n".join(f"{u.participant}: {u.text}" for u in dialogue.utterances)
        if len(conversation) > limit:
            conversation = conversation[:limit] + "\n(...)"
        user = self.prompt.render_user(slots=", ".join(self.prompt.slots), conversation=conversation)
        return [Message(role="system", content=self.prompt.system.strip()), Message(role="user", content=user)]

    def schema(self, dialogue: Dialogue, unit: Unit) -> JSONSchema:
        return need_schema(
            list(self.prompt.slots),
            max_constraints=int(self.prompt.option("max_constraints", 4)),
            max_requests=int(self.prompt.option("max_requests", 3)),
            max_targets=int(self.prompt.option("max_targets", 3)),
            max_chars=int(self.prompt.option("max_value_chars", 60)),
        )

    def parse(self, parsed: JSON, dialogue: Dialogue, unit: Unit) -> dict[str, Any]:
        if not isinstance(parsed, dict):
            raise ValueError("reply is not a JSON object")
        slots = set(self.prompt.slots)
        constraints: dict[str, str] = {}
        for c in parsed.get("constraints") or []:
            if isinstance(c, dict) and c.get("slot") in slots and str(c.get("value") or "").strip():
                constraints.setdefault(c["slot"], str(c["value"]).strip())
        requests = list(dict.fromkeys(r for r in parsed.get("requests") or [] if r in slots))
        targets = [self._target(str(t)) for t in parsed.get("targets") or [] if str(t).strip()]
        need = InformationNeed(constraints=constraints, requests=requests, targets=targets)
        return {"need": need.model_dump(mode="json")}

    def _target(self, title: str) -> ItemRef:
        ref = ItemRef(title=title.strip())
        return self.items.resolve(ref) if self.items is not None else ref

    def apply(self, dialogue: Dialogue, unit: Unit, result: dict[str, Any], provenance: Provenance) -> None:
        dialogue.metadata[NEED_KEY] = result["need"]
        dialogue.metadata[PROVENANCE_KEY] = provenance.model_dump()

    def finish(self, folder: ConvertedFolder, dialogues: list[Dialogue]) -> list[str]:
        path = folder.path / NEEDS_FILE
        path.unlink(missing_ok=True)
        with JsonlWriter(path) as writer:
            for dialogue in dialogues:
                if NEED_KEY in dialogue.metadata:
                    writer.write(
                        {
                            "conversation_id": dialogue.conversation_id,
                            "need": dialogue.metadata[NEED_KEY],
                            "provenance": dialogue.metadata.get(PROVENANCE_KEY),
                        }
                    )
        return [NEEDS_FILE]
