"""A tolerant parser for dialogue acts written as ``intent1(slot="value",slot)|intent2()``.

Where the anchor's parser is brittle this one is lenient: dotted intents (``INQUIRE.ELICIT``),
single or double quotes, commas inside quoted values, unquoted values, prose before or after the
acts and a bare ``None``. Intents and slots outside the allowed vocabulary are dropped and listed,
so a caller can count them.
"""

from __future__ import annotations

import re
from typing import Iterable

from pydantic import BaseModel, ConfigDict, Field

from usersimcrs.core.dialogue import DialogueAct, SlotValue
from usersimcrs.simulators.agenda.policy.domain import canonical_slot

_ACT_START = re.compile(r"([A-Za-z][\w\-]*(?:\.[\w\-]+)*)\s*\(")
_NONE = re.compile(r"^\W*none\W*$", re.I)
_BARE_INTENT = re.compile(r"[A-Za-z][\w\-]*(?:\.[\w\-]+)*")


class ParseResult(BaseModel):
    """Acts understood, plus what was dropped (``intent:X`` / ``slot:INTENT.X``) and the raw text."""

    model_config = ConfigDict(extra="forbid")

    acts: list[DialogueAct] = Field(default_factory=list)
    dropped: list[str] = Field(default_factory=list)
    raw: str = ""
    note: str | None = None


class Vocabulary:
    """Allowed intents and slots, matched case-insensitively; slots through their canonical names."""

    def __init__(self, intents: Iterable[str], slots: Iterable[str]) -> None:
        self._intents = {i.upper(): i for i in intents}
        self._slots = {canonical_slot(s): canonical_slot(s) for s in slots}

    def intent(self, name: str) -> str | None:
        return self._intents.get(name.strip().upper())

    def slot(self, name: str) -> str | None:
        return self._slots.get(canonical_slot(name))


def _split_args(body: str) -> list[str]:
    """Split an argument list at commas outside quotes."""
    parts: list[str] = []
    current: list[str] = []
    quote: str | None = None
    for char in body:
        if quote:
            current.append(char)
            if char == quote:
                quote = None
        elif char in "\"'" and not (char == "'" and current and current[-1].isalnum()):
            quote = char
            current.append(char)
        elif char == ",":
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return [p.strip() for p in parts if p.strip()]


def _find_close(text: str, start: int) -> int:
    """Index of the ``)`` closing an argument list that begins at `start` (quotes respected)."""
    quote = None
    for index in range(start, len(text)):
        char = text[index]
        if quote:
            if char == quote:
                quote = None
        elif char in "\"'":
            # an apostrophe inside a word (don't) is not a quote
            prev = text[index - 1] if index > start else " "
            if char == "'" and prev.isalnum():
                continue
            quote = char
        elif char == ")":
            return index
    return len(text)


def _unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


def _slot_values(intent: str, body: str, vocab: Vocabulary, dropped: list[str]) -> list[SlotValue]:
    values = []
    for arg in _split_args(body):
        name, sep, raw_value = arg.partition("=")
        slot = vocab.slot(_unquote(name))
        if slot is None:
            dropped.append(f"slot:{intent}.{_unquote(name)}")
            continue
        value = _unquote(raw_value) if sep else None
        values.append(SlotValue(slot=slot, value=value or None))
    return values


def parse_acts(text: str | None, vocab: Vocabulary) -> ParseResult:
    """Parse the acts in `text`; unknown intents and slots are dropped and listed."""
    raw = text or ""
    if not raw.strip() or _NONE.match(raw):
        return ParseResult(raw=raw)
    acts: list[DialogueAct] = []
    dropped: list[str] = []
    position = 0
    found_call = False
    while True:
        match = _ACT_START.search(raw, position)
        if match is None:
            break
        found_call = True
        close = _find_close(raw, match.end())
        body = raw[match.end() : close]
        position = close + 1
        intent = vocab.intent(match.group(1))
        if intent is None:
            dropped.append(f"intent:{match.group(1)}")
            continue
        acts.append(DialogueAct(intent=intent, slot_values=_slot_values(intent, body, vocab, dropped)))
    if not found_call:
        # intents written without parentheses, e.g. "REVEAL|INQUIRE.NEXT"
        for token in re.split(r"[|,;\s]+", raw.strip()):
            token = token.strip(".:;!?\"'`*")
            if not _BARE_INTENT.fullmatch(token):
                continue
            intent = vocab.intent(token)
            if intent is not None:
                acts.append(DialogueAct(intent=intent))
            elif token.isupper() and len(token) > 1:
                dropped.append(f"intent:{token}")
    return ParseResult(acts=acts, dropped=dropped, raw=raw)


def acts_from_json(data: object, vocab: Vocabulary) -> ParseResult:
    """Acts from the structured-output form ``{"acts": [{"intent": ..., "slots": [{"slot","value"}]}]}``."""
    dropped: list[str] = []
    acts: list[DialogueAct] = []
    items = data.get("acts", []) if isinstance(data, dict) else data if isinstance(data, list) else []
    for entry in items if isinstance(items, list) else []:
        if not isinstance(entry, dict):
            continue
        name = str(entry.get("intent", ""))
        intent = vocab.intent(name)
        if intent is None:
            if name and name.upper() != "NONE":
                dropped.append(f"intent:{name}")
            continue
        values = []
        for slot_entry in entry.get("slots") or []:
            if not isinstance(slot_entry, dict):
                continue
            slot = vocab.slot(str(slot_entry.get("slot", "")))
            if slot is None:
                dropped.append(f"slot:{intent}.{slot_entry.get('slot')}")
                continue
            value = slot_entry.get("value")
            values.append(SlotValue(slot=slot, value=str(value) if value not in (None, "") else None))
        acts.append(DialogueAct(intent=intent, slot_values=values))
    return ParseResult(acts=acts, dropped=dropped, raw=str(data))


def act_schema(intents: list[str], slots: list[str]) -> dict:
    """The JSON schema of the structured-output mode (intents and slots as enums)."""
    return {
        "type": "object",
        "properties": {
            "acts": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "intent": {"type": "string", "enum": [*intents, "None"]},
                        "slots": {
                            "type": "array",
                            "items": {
                                "type": "object",
                                "properties": {
                                    "slot": {"type": "string", "enum": slots},
                                    "value": {"type": "string"},
                                },
                                "required": ["slot", "value"],
                            },
                        },
                    },
                    "required": ["intent", "slots"],
                },
            }
        },
        "required": ["acts"],
    }


def format_acts(acts: Iterable[DialogueAct]) -> str:
    """Render acts in the same ``intent(slot="value")|...`` form the parser reads ("None" if empty)."""
    text = "|".join(str(act) for act in acts)
    return text or "None"
