"""The agenda-based policy (003 §4.2): pick the user's acts for one turn from the CRS's acts.

Four cases, checked in order over the CRS's acts: recommendation -> feedback on the items;
elicitation -> disclosure (need, else preferences, else don't-know); inquiry -> answer; other ->
the agenda's next act when it fits, else an intent sampled from transition statistics. Acts of one
turn keep their order, the user's acts accumulate in the state, requests are marked fulfilled and
never dropped by cleaning, and every ending is a stop reason, never an exception.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field

from usersimcrs.core.dialogue import DialogueAct, ItemRef, SlotValue
from usersimcrs.core.items import Item, display_title, split_year
from usersimcrs.core.profile import UserProfile
from usersimcrs.simulators.agenda.policy.agenda import Agenda
from usersimcrs.simulators.agenda.policy.domain import Domain, canonical_slot
from usersimcrs.simulators.agenda.policy.interaction_model import InteractionModel
from usersimcrs.simulators.agenda.policy.item_judge import ItemJudge, Judgement
from usersimcrs.simulators.agenda.policy.state import DialogueState, RequestStatus
from usersimcrs.simulators.agenda.policy.transitions import TransitionModel

AGENDA_DONE = "agenda_done"
TARGET_ACCEPTED = "target_accepted"
USER_GAVE_UP = "user_gave_up"
CRS_ENDED = "crs_ended"


@dataclass
class PolicySettings:
    """Knobs of the policy (from the simulator's config)."""

    max_recommendation_rounds: int = 5
    patience: int = 3
    consider_items: int = 5
    max_request_attempts: int = 2


@dataclass
class Decision:
    """The user's acts for this turn, the stop reason when the conversation ends, and why."""

    acts: list[DialogueAct]
    stop: str | None = None
    cases: list[str] = field(default_factory=list)
    judgements: list[Judgement] = field(default_factory=list)


def _act(intent: str, **slots: str | None) -> DialogueAct:
    return DialogueAct(intent=intent, slot_values=[SlotValue(slot=k, value=v) for k, v in slots.items()])


class AgendaPolicy:
    """One user's policy for one conversation; all its state lives on this instance."""

    def __init__(
        self,
        profile: UserProfile,
        model: InteractionModel,
        domain: Domain,
        judge: ItemJudge,
        transitions: TransitionModel,
        rng: random.Random,
        settings: PolicySettings | None = None,
    ) -> None:
        self.profile = profile
        self.model = model
        self.domain = domain
        self.judge = judge
        self.transitions = transitions
        self.rng = rng
        self.settings = settings or PolicySettings()
        self.agenda = Agenda.from_need(profile.need, model)
        self.state = DialogueState(
            requests={canonical_slot(s): RequestStatus(slot=canonical_slot(s)) for s in profile.need.requests}
        )
        self.constraints = {canonical_slot(k): str(v) for k, v in profile.need.constraints.items()}
        # intent roles, resolved once
        m = model
        self.i_start = m.intent("INTENT_START", "DISCLOSE.NON-DISCLOSE")
        self.i_stop = m.intent("INTENT_STOP", "COMPLETE")
        self.i_disclose = m.intent("INTENT_DISCLOSE", "DISCLOSE")
        self.i_inquire = m.intent("INTENT_INQUIRE", "INQUIRE")
        self.i_dont_know = m.intent("INTENT_DONT_KNOW", "DONT-KNOW")
        self.i_seen = m.intent("INTENT_ITEM_CONSUMED", "NOTE.YES")
        self.i_like = m.intent("INTENT_LIKE", "NOTE.LIKE")
        self.i_dislike = m.intent("INTENT_DISLIKE", "NOTE.DISLIKE")
        self.i_neutral = m.intent("INTENT_NEUTRAL", self.i_dislike)
        self.i_yes = m.intent("INTENT_YES", "YES")
        self.i_no = m.intent("INTENT_NO", "NO")
        self.i_accept = m.accept_intent
        self.i_item_info = m.item_info_intent

    # ---- opening -------------------------------------------------------------------------

    def opening(self) -> list[DialogueAct]:
        """A greeting followed by the first disclosure of the agenda, if any."""
        acts = [_act(self.i_start)]
        first = self.agenda.peek()
        if first is not None and first.intent == self.i_disclose:
            acts.append(self._pop_disclosure())
        self._record(acts)
        return acts

    # ---- one turn ------------------------------------------------------------------------

    def decide(self, agent_acts: list[DialogueAct], items: list[ItemRef], agent_text: str = "") -> Decision:
        """The user's reply to one CRS turn (its acts and the items it showed)."""
        self.state.turn += 1
        self.state.agent_acts.append(list(agent_acts))
        intents = [a.intent for a in agent_acts]
        self._mark_fulfilled(agent_acts, agent_text)
        acts: list[DialogueAct] = []
        cases: list[str] = []
        judgements: list[Judgement] = []
        stop: str | None = None

        retrieval = set(self.model.agent_set_retrieval)
        elicit = set(self.model.agent_elicit_intents)
        inquire = set(self.model.agent_inquire_intents) - elicit

        if items:
            cases.append("recommendation")
            feedback, judgements, stop = self._feedback(items, agent_text)
            acts += feedback
        elif any(i in retrieval for i in intents):
            cases.append("recommendation")
            acts += self._no_items()
        if stop is None:
            for act in agent_acts:
                if act.intent in elicit and not items:
                    cases.append("elicitation")
                    acts += self._disclose(act)
                elif act.intent in inquire:
                    cases.append("inquiry")
                    acts += self._answer(act)
            if not acts and any(i in self.model.expected_agent_intents(self.i_stop) for i in intents):
                cases.append("other")
                acts.append(_act(self.i_stop))
                stop = CRS_ENDED
            if not acts:
                cases.append("other")
                acts += self._other(intents)
        acts = _dedupe(acts)
        stop = stop or self._check_stop(acts)
        if stop and not any(a.intent == self.i_stop for a in acts):
            acts.append(_act(self.i_stop))
        self._record(acts)
        return Decision(acts=acts, stop=stop, cases=cases, judgements=judgements)

    # ---- case 1: recommendation ----------------------------------------------------------

    def _feedback(
        self, items: list[ItemRef], agent_text: str = ""
    ) -> tuple[list[DialogueAct], list[Judgement], str | None]:
        shown = looked_at(items, agent_text, self.settings.consider_items)
        judgements = [self.judge.judge(ref) for ref in shown]
        for verdict in ("target", "like"):
            chosen = next((j for j in judgements if j.verdict == verdict), None)
            if chosen is not None:
                return self._accept(chosen), judgements, None
        fresh = [j for j in judgements if _judge_key(j) not in self.state.judged]
        if not fresh:
            self.state.idle_turns += 1
            return [_act(self.i_inquire)], judgements, None
        first = fresh[0]
        self.state.judged[_judge_key(first)] = first.verdict
        self.state.current_item = ItemRef(id=first.item_id, title=first.title)
        if first.verdict == "unknown":  # a title the user cannot place: a question, never a rejection
            self.state.idle_turns += 1
            return [_act(self.i_item_info, TITLE=first.title)], judgements, None
        self.state.rejected_rounds += 1
        self.state.idle_turns = 0
        intent = {"seen": self.i_seen, "dislike": self.i_dislike}.get(first.verdict, self.i_neutral)
        acts = [_act(intent, TITLE=first.title)]
        if self.state.rejected_rounds >= self.settings.max_recommendation_rounds:
            return acts, judgements, USER_GAVE_UP
        acts.append(self._follow_up())
        return acts, judgements, None

    def _accept(self, judgement: Judgement) -> list[DialogueAct]:
        ref = ItemRef(id=judgement.item_id, title=judgement.title)
        self.state.judged[_judge_key(judgement)] = judgement.verdict
        self.state.accepted = ref
        self.state.current_item = ref
        self.state.accepted_target = judgement.verdict == "target"
        self.state.idle_turns = 0
        acts = [_act(self.i_accept, TITLE=judgement.title)]
        request = self._next_request()
        if request is not None:
            acts.append(request)
        return acts

    def _no_items(self) -> list[DialogueAct]:
        """The CRS found nothing: give the next pending constraint, else ask again."""
        self.state.idle_turns += 1
        return [self._follow_up()]

    def _follow_up(self) -> DialogueAct:
        """After a rejection: the next pending disclosure helps the CRS; otherwise ask for another item."""
        if self.agenda.pending(self.i_disclose):
            return self._pop_disclosure()
        return _act(self.i_inquire)

    # ---- case 2: elicitation -------------------------------------------------------------

    def _disclose(self, act: DialogueAct) -> list[DialogueAct]:
        slots = [sv.slot for sv in act.slot_values if self.domain.has(sv.slot)]
        if not slots:
            if self.agenda.pending(self.i_disclose):
                return [self._pop_disclosure()]
            preferred = self._preferred_value()
            if preferred is not None:
                slot, value = preferred
                return [self._disclosure(slot, value)]
            return [_act(self.i_dont_know)]
        return [self._disclose_slot(canonical_slot(slot)) for slot in slots]

    def _disclose_slot(self, slot: str) -> DialogueAct:
        """Value from the need, else from preferences (liked items for TITLE), else don't-know."""
        if slot in self.constraints:
            self.agenda.take(self.i_disclose, slot)
            return self._disclosure(slot, self.constraints[slot])
        disclosed = self.state.disclosed.get(slot)
        if disclosed:
            return self._disclosure(slot, disclosed)
        value = self._preferred_value_for(slot)
        if value is not None:
            return self._disclosure(slot, value)
        return _act(self.i_dont_know, **{slot: None})

    def _disclosure(self, slot: str, value: str) -> DialogueAct:
        self.state.disclosed[slot] = value
        return _act(self.i_disclose, **{slot: value})

    def _pop_disclosure(self) -> DialogueAct:
        act = self.agenda.take(self.i_disclose)
        assert act is not None  # callers check pending() first
        for sv in act.slot_values:
            self.state.disclosed[sv.slot] = sv.value
        return act

    def _preferred_value_for(self, slot: str) -> str | None:
        """The user's best-liked value of `slot` not yet disclosed (the best-rated seen title for TITLE)."""
        if slot == "TITLE":
            rated = [s for s in self.profile.seen_items if s.rating is not None and (s.item.title or s.item.raw)]
            rated.sort(key=lambda s: (-(s.rating or 0.0), s.item.title or ""))
            return (rated[0].item.title or rated[0].item.raw) if rated else None
        candidates: dict[str, float] = {}
        for name, prefs in self.profile.preferences.slots.items():
            if canonical_slot(name) == slot:
                candidates.update({v: p for v, p in prefs.items() if p > 0})
        already = {v for s, v in self.state.disclosed.items() if s == slot}
        ranked = sorted(candidates.items(), key=lambda kv: (-kv[1], kv[0]))
        for value, _ in ranked:
            if value not in already:
                return value
        return ranked[0][0] if ranked else None

    def _preferred_value(self) -> tuple[str, str] | None:
        for slot in self.domain.informable_slots or self.domain.slot_names:
            if slot == "TITLE" or slot in self.state.disclosed:
                continue
            value = self._preferred_value_for(slot)
            if value is not None:
                return slot, value
        return None

    # ---- case 3: inquiry -----------------------------------------------------------------

    def _answer(self, act: DialogueAct) -> list[DialogueAct]:
        """Yes/no to "another one?" and "know more?" questions, following the user's goal."""
        wants_more_info = self.state.current_item is not None and bool(self._pending_request_slots())
        if act.intent.endswith(".MORE"):
            request = self._next_request() if wants_more_info else None
            return [_act(self.i_yes), request] if request else [_act(self.i_no)]
        if self.state.accepted is not None:
            request = self._next_request()
            return [_act(self.i_no), request] if request else [_act(self.i_no)]
        return [_act(self.i_yes), self._follow_up()] if self.agenda.pending(self.i_disclose) else [_act(self.i_yes)]

    # ---- case 4: other -------------------------------------------------------------------

    def _other(self, agent_intents: list[str]) -> list[DialogueAct]:
        """The agenda's next act when it fits the CRS's intents, else a sampled intent."""
        top = self.agenda.peek()
        if self.state.accepted is not None:
            request = self._next_request()
            return [request] if request is not None else [self.agenda.take(self.i_stop) or _act(self.i_stop)]
        if top is not None and top.intent == self.i_disclose and self._coherent(top.intent, agent_intents):
            return [self._pop_disclosure()]
        if top is not None and top.intent == self.i_stop and self._goal_reached():
            return [self.agenda.pop() or _act(self.i_stop)]
        sampled = self.transitions.sample(agent_intents, self.rng, allowed=self._sampleable())
        self.state.idle_turns += 1
        if sampled == self.i_disclose and self.agenda.pending(self.i_disclose):
            return [self._pop_disclosure()]
        if sampled in (self.i_start, self.i_yes, self.i_no):
            return [_act(sampled)]
        if self.agenda.pending(self.i_disclose):
            return [self._pop_disclosure()]
        return [_act(self.i_inquire)]

    def _coherent(self, user_intent: str, agent_intents: list[str]) -> bool:
        expected = self.model.expected_agent_intents(user_intent)
        return not agent_intents or not expected or any(i in expected for i in agent_intents)

    def _sampleable(self) -> set[str]:
        """Intents the policy can fill with content right now."""
        allowed = {self.i_inquire, self.i_start}
        if self.agenda.pending(self.i_disclose):
            allowed.add(self.i_disclose)
        return allowed

    # ---- requests and stopping -----------------------------------------------------------

    def _pending_request_slots(self) -> list[str]:
        return [
            slot
            for slot, status in self.state.requests.items()
            if not status.fulfilled and status.asked < self.settings.max_request_attempts
        ]

    def _next_request(self) -> DialogueAct | None:
        """The next unfulfilled request as an inquiry (re-asked up to the attempt limit)."""
        for slot in sorted(self._pending_request_slots(), key=lambda s: self.state.requests[s].asked):
            self.agenda.take(self.i_item_info, slot)
            self.state.requests[slot].asked += 1
            return _act(self.i_item_info, **{slot: None})
        return None

    def _mark_fulfilled(self, agent_acts: list[DialogueAct], text: str) -> None:
        """A request is fulfilled when the CRS gives a value for its slot, or names the item's value."""
        item = self._current_item()
        lowered = text.lower()
        for slot, status in self.state.requests.items():
            if status.fulfilled:
                continue
            for act in agent_acts:
                for sv in act.slot_values:
                    if canonical_slot(sv.slot) == slot and sv.value:
                        status.fulfilled, status.value = True, sv.value
            if not status.fulfilled and item is not None and status.asked:
                for value in _item_values(item, slot):
                    if value and value.lower() in lowered:
                        status.fulfilled, status.value = True, value
                        break

    def _current_item(self) -> Item | None:
        ref = self.state.current_item
        if ref is None:
            return None
        return self.judge.resolve(ref)[1]

    def _goal_reached(self) -> bool:
        return self.state.accepted is not None

    def _check_stop(self, acts: list[DialogueAct]) -> str | None:
        """Stop after the stop act, after acceptance with no request left, or when out of patience."""
        if any(a.intent == self.i_stop for a in acts):
            return TARGET_ACCEPTED if self.state.accepted_target else AGENDA_DONE
        asked_now = any(a.intent == self.i_item_info for a in acts)
        if self.state.accepted is not None and not self._pending_request_slots() and not asked_now:
            self.agenda.take(self.i_stop)
            return TARGET_ACCEPTED if self.state.accepted_target else AGENDA_DONE
        if self.state.idle_turns >= self.settings.patience:
            return USER_GAVE_UP
        return None

    def _record(self, acts: list[DialogueAct]) -> None:
        """Accumulate this turn's acts (never overwrite earlier turns)."""
        self.state.user_acts.append(list(acts))


def looked_at(items: list[ItemRef], text: str, limit: int) -> list[ItemRef]:
    """The shown items the user looks at: those the CRS's text names (a person reads the reply), else, when the
    text names none of them (an item list beside a generic text), the first `limit` of the list."""
    named = [ref for ref in items if _named(ref, text)] if text else []
    return (named or items)[:limit]


def _named(ref: ItemRef, text: str) -> bool:
    """Whether `text` names the item as whole words: its title with the year (as displayed or as stored, any case),
    or without the year in its own capitals ("Saw", not "I saw it")."""
    title = ref.title or ref.raw
    if not title:
        return False
    display = display_title(title)
    names = [(name, re.I) for name in dict.fromkeys((display, title.strip()))] + [(split_year(display)[0], 0)]
    return any(len(name) >= 2 and re.search(rf"(?<!\w){re.escape(name)}(?!\w)", text, flags) for name, flags in names)


def _item_values(item: Item, slot: str) -> list[str]:
    if slot == "YEAR" and item.year is not None:
        return [str(item.year)]
    for attribute, values in item.attributes.items():
        if canonical_slot(attribute) == slot:
            return values
    return []


def _judge_key(judgement: Judgement) -> str:
    return f"id:{judgement.item_id}" if judgement.item_id else f"title:{judgement.title.lower()}"


def _dedupe(acts: list[DialogueAct]) -> list[DialogueAct]:
    seen: set[str] = set()
    out = []
    for act in acts:
        key = str(act)
        if key not in seen:
            seen.add(key)
            out.append(act)
    return out
