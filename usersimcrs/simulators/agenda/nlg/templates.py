"""Templates for the template NLG: mined from annotated dialogues, plus built-in defaults."""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from usersimcrs.config import read_yaml
from usersimcrs.core.dialogue import USER, Dialogue, DialogueAct
from usersimcrs.simulators.agenda.policy.domain import canonical_slot

DEFAULT_TEMPLATES_PATH = Path(__file__).resolve().parents[1] / "prompts" / "nlg_templates.yaml"
_PLACEHOLDER = re.compile(r"\{([A-Z_]+)\}")


def act_signature(act: DialogueAct) -> str:
    """``INTENT(SLOT=,SLOT2)``: slot names sorted, ``=`` marking slots that carry a value."""
    if not act.slot_values:
        return act.intent
    parts = sorted(f"{canonical_slot(sv.slot)}{'=' if sv.value else ''}" for sv in act.slot_values)
    return f"{act.intent}({','.join(parts)})"


def acts_signature(acts: list[DialogueAct]) -> str:
    return "|".join(act_signature(a) for a in acts)


@lru_cache(maxsize=8)
def load_default_templates(path: str = str(DEFAULT_TEMPLATES_PATH)) -> dict[str, tuple[str, ...]]:
    """Signature -> template variants from the built-in template file (read-only)."""
    data = read_yaml(path)
    return {
        str(key): tuple(str(v) for v in (value if isinstance(value, list) else [value])) for key, value in data.items()
    }


def mine_templates(dialogues: list[Dialogue]) -> dict[str, tuple[str, ...]]:
    """Templates from annotated USER utterances: slot values in the text become ``{SLOT}`` placeholders.

    An utterance is kept only when every valued slot occurs in its text once and no slot repeats,
    so a template always has exactly the placeholders its signature promises.
    """
    mined: dict[str, dict[str, None]] = {}
    for dialogue in dialogues:
        for utterance in dialogue.utterances:
            if utterance.participant != USER or not utterance.dialogue_acts or not utterance.text.strip():
                continue
            template = templatise(utterance.text.strip(), utterance.dialogue_acts)
            if template is not None:
                mined.setdefault(acts_signature(utterance.dialogue_acts), {})[template] = None
    return {key: tuple(values) for key, values in mined.items()}


def templatise(text: str, acts: list[DialogueAct]) -> str | None:
    """`text` with each valued slot's value as ``{SLOT}``; None unless every value occurs once and no slot repeats."""
    seen_slots: set[str] = set()
    template = text.replace("{", "{{").replace("}", "}}")
    for act in acts:
        for sv in act.slot_values:
            slot = canonical_slot(sv.slot)
            if not sv.value:
                continue
            if slot in seen_slots:
                return None
            seen_slots.add(slot)
            pattern = re.compile(re.escape(sv.value), re.I)
            if len(pattern.findall(template)) != 1:
                return None
            template = pattern.sub("{" + slot + "}", template)
    return template
