"""Template NLG: mined templates for a whole multi-act turn when one fits, else built-in ones per act."""

from __future__ import annotations

import random

from usersimcrs.core.dialogue import Dialogue, DialogueAct
from usersimcrs.simulators.agenda.nlg.base import NLG, NLGResult
from usersimcrs.simulators.agenda.nlg.templates import act_signature, acts_signature
from usersimcrs.simulators.agenda.policy.domain import canonical_slot


def slot_label(slot: str) -> str:
    """A readable slot name for templates: ``ACTORS`` -> "actors", ``RELEASE_DATE`` -> "release date"."""
    return canonical_slot(slot).lower().replace("_", " ")


class TemplateNLG(NLG):
    """Fills templates with the acts' slot values; variants are chosen with the conversation's rng."""

    async def generate(
        self, acts: list[DialogueAct], dialogue: Dialogue, *, rng: random.Random, seed: int
    ) -> NLGResult:
        return self.realise(acts, rng)

    def realise(self, acts: list[DialogueAct], rng: random.Random) -> NLGResult:
        whole = self.settings.mined.get(acts_signature(acts)) if acts else None
        if whole:
            return NLGResult(text=self._fill_mined(rng.choice(whole), acts), source="mined")
        parts = [self.realise_act(act, rng) for act in acts]
        return NLGResult(text=" ".join(p for p in parts if p), source="template")

    def realise_act(self, act: DialogueAct, rng: random.Random) -> str:
        """One act: a mined template for its signature, else the most specific built-in one."""
        signature = act_signature(act)
        mined = self.settings.mined.get(signature)
        if mined:
            return self._fill_mined(rng.choice(mined), [act])
        defaults = self.settings.defaults
        slot = act.slot_values[0] if act.slot_values else None
        keys = [signature]
        if slot is not None:
            keys.append(f"{act.intent}(*{'=' if slot.value else ''})")
        keys.append(act.intent)
        for key in keys:
            if key in defaults:
                value = (slot.value or "") if slot else ""
                values = {"slot": slot_label(slot.slot) if slot else "", "value": value, "value_lower": value.lower()}
                return rng.choice(defaults[key]).format(**values)
        return _plain(act)

    @staticmethod
    def _fill_mined(template: str, acts: list[DialogueAct]) -> str:
        values = {canonical_slot(sv.slot): sv.value for act in acts for sv in act.slot_values if sv.value}
        try:
            return template.format(**values)
        except (KeyError, IndexError, ValueError):
            return template


def _plain(act: DialogueAct) -> str:
    """Last resort for an intent without any template: its slot values, readably."""
    values = [sv.value or slot_label(sv.slot) for sv in act.slot_values]
    return ", ".join(values) if values else act.intent.lower().replace(".", " ").replace("_", " ")
