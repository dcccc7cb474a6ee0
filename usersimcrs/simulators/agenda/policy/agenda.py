"""The user's agenda: a stack of pending user acts built from the information need (003 §4.2)."""

from __future__ import annotations

from usersimcrs.core.dialogue import DialogueAct, SlotValue
from usersimcrs.core.profile import InformationNeed
from usersimcrs.simulators.agenda.policy.domain import canonical_slot
from usersimcrs.simulators.agenda.policy.interaction_model import InteractionModel


class Agenda:
    """Pending acts, top first. Pushing several acts keeps their order; popping an empty agenda gives None."""

    def __init__(self, acts: list[DialogueAct] | None = None, *, stop_intent: str = "COMPLETE") -> None:
        self._stack: list[DialogueAct] = list(acts or [])
        self.stop_intent = stop_intent

    @classmethod
    def from_need(cls, need: InformationNeed, model: InteractionModel) -> Agenda:
        """One disclosure per constraint, one inquiry per request, then the stop act."""
        disclose = model.intent("INTENT_DISCLOSE", "DISCLOSE")
        inquire = model.item_info_intent
        stop = model.intent("INTENT_STOP", "COMPLETE")
        acts = [
            DialogueAct(intent=disclose, slot_values=[SlotValue(slot=canonical_slot(slot), value=str(value))])
            for slot, value in need.constraints.items()
        ]
        acts += [
            DialogueAct(intent=inquire, slot_values=[SlotValue(slot=canonical_slot(slot))]) for slot in need.requests
        ]
        acts.append(DialogueAct(intent=stop))
        return cls(acts, stop_intent=stop)

    def __len__(self) -> int:
        return len(self._stack)

    def acts(self) -> list[DialogueAct]:
        """The pending acts, top first (a copy)."""
        return list(self._stack)

    def peek(self) -> DialogueAct | None:
        return self._stack[0] if self._stack else None

    def pop(self) -> DialogueAct | None:
        """The top act, removed; None when the agenda is empty (never an exception)."""
        return self._stack.pop(0) if self._stack else None

    def push(self, acts: list[DialogueAct]) -> None:
        """Put `acts` on top so that ``acts[0]`` is popped first (order kept, not reversed)."""
        self._stack[0:0] = list(acts)

    def take(self, intent: str, slot: str | None = None) -> DialogueAct | None:
        """Remove and return the first pending act with `intent` (and `slot`, when given)."""
        for index, act in enumerate(self._stack):
            if act.intent == intent and (slot is None or any(sv.slot == slot for sv in act.slot_values)):
                return self._stack.pop(index)
        return None

    def pending(self, intent: str) -> list[DialogueAct]:
        return [act for act in self._stack if act.intent == intent]

    def clean(self, disclosed_slots: set[str], disclose_intent: str) -> None:
        """Drop disclosures of slots the user already gave; inquiries (the user's requests) always stay."""
        self._stack = [
            act
            for act in self._stack
            if not (act.intent == disclose_intent and all(sv.slot in disclosed_slots for sv in act.slot_values))
        ]

    def only_stop_left(self) -> bool:
        return all(act.intent == self.stop_intent for act in self._stack)
