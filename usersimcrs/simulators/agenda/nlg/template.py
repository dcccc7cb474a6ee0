"""Template NLG: mined templates for a whole multi-act turn when one fits, else built-in ones per act."""

from __future__ import annotations

import random
import re

from usersimcrs.core.dialogue import Dialogue, DialogueAct
from usersimcrs.core.items import display_title, split_year
from usersimcrs.simulators.agenda.nlg.base import NLG, NLGResult
from usersimcrs.simulators.agenda.nlg.templates import act_signature, acts_signature
from usersimcrs.simulators.agenda.policy.domain import canonical_slot

_PARENTHESES = re.compile(r"\s*\([^()]*\)\s*$")


def short_title(value: str) -> str:
    """A title as people type it: no year, no alternative name ("Men in Black (a.k.a. MIB) (1997)" -> "Men in Black")."""
    name = split_year(display_title(value))[0]
    while True:
        shorter = _PARENTHESES.sub("", name).strip()
        if shorter == name or not shorter:
            return name
        name = shorter


def slot_label(slot: str) -> str:
    """A readable slot name for templates: ``ACTORS`` -> "actors", ``RELEASE_DATE`` -> "release date"."""
    return canonical_slot(slot).lower().replace("_", " ")


class TemplateNLG(NLG):
    """Fills templates with the acts' slot values; variants are chosen with the conversation's rng."""

    async def generate(
        self, acts: list[DialogueAct], dialogue: Dialogue, *, rng: random.Random, seed: int, ending: str | None = None
    ) -> NLGResult:
        return self.realise(acts, rng, ending)

    def realise(self, acts: list[DialogueAct], rng: random.Random, ending: str | None = None) -> NLGResult:
        whole = self.settings.mined.get(acts_signature(acts)) if acts else None
        if whole and not any(self.ending_key(act, ending) for act in acts):
            return NLGResult(text=self._fill_mined(rng.choice(whole), acts), source="mined")
        return NLGResult(text=join_parts([self.realise_act(act, rng, ending) for act in acts]), source="template")

    def ending_key(self, act: DialogueAct, ending: str | None) -> str | None:
        """The built-in key `SIGNATURE:ending` (e.g. `COMPLETE:user_gave_up`) when the template file has one."""
        key = f"{act_signature(act)}:{ending}" if ending else None
        return key if key in self.settings.defaults else None

    def realise_act(self, act: DialogueAct, rng: random.Random, ending: str | None = None) -> str:
        """One act: the built-in variants for how the conversation ends (when the file has them for this act),
        else a mined template for its signature, else the most specific built-in one."""
        signature = act_signature(act)
        mined = self.settings.mined.get(signature)
        closing = self.ending_key(act, ending)
        if mined and closing is None:
            return self._fill_mined(rng.choice(mined), [act])
        defaults = self.settings.defaults
        slot = act.slot_values[0] if act.slot_values else None
        keys = [*([closing] if closing else []), signature]
        if slot is not None:
            keys.append(f"{act.intent}(*{'=' if slot.value else ''})")
        keys.append(act.intent)
        for key in keys:
            if key in defaults:
                value = (slot.value or "") if slot else ""
                values = {
                    "slot": slot_label(slot.slot) if slot else "",
                    "value": value,
                    "value_lower": value.lower(),
                    "title": short_title(value),
                }
                return rng.choice(defaults[key]).format(**values)
        return _plain(act)

    @staticmethod
    def _fill_mined(template: str, acts: list[DialogueAct]) -> str:
        values = {canonical_slot(sv.slot): sv.value for act in acts for sv in act.slot_values if sv.value}
        try:
            return template.format(**values)
        except (KeyError, IndexError, ValueError):
            return template


def join_parts(parts: list[str]) -> str:
    """The texts of one turn's acts, one after another: a full stop between them where the first has no mark."""
    out = ""
    for part in (p.strip() for p in parts if p and p.strip()):
        if out and out[-1].isalnum():
            out += "."
        out = f"{out} {part}" if out else part
    return out


def _plain(act: DialogueAct) -> str:
    """Last resort for an intent without any template: its slot values, readably."""
    values = [sv.value or slot_label(sv.slot) for sv in act.slot_values]
    return ", ".join(values) if values else act.intent.lower().replace(".", " ").replace("_", " ")
