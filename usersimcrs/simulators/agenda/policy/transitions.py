"""Agent-intent -> user-intent transition statistics, learned from annotated dialogues.

Used by the policy's "other" case: when the agenda's next act does not fit what the CRS said,
the user's next intent is sampled from P(user intent | agent intent) with the conversation's
random generator. Without annotated dialogues the interaction model's expected agent intents give
a uniform default.
"""

from __future__ import annotations

import random
from collections import defaultdict

from usersimcrs.core.dialogue import AGENT, USER, Dialogue
from usersimcrs.simulators.agenda.policy.interaction_model import InteractionModel


class TransitionModel:
    """Counts of user intents that followed each agent intent."""

    def __init__(self, counts: dict[str, dict[str, int]] | None = None, source: str = "empty") -> None:
        self.counts: dict[str, dict[str, int]] = {a: dict(u) for a, u in (counts or {}).items()}
        self.source = source

    @classmethod
    def from_dialogues(cls, dialogues: list[Dialogue]) -> TransitionModel:
        """Count (agent intent, user intent) pairs over consecutive AGENT -> USER utterances."""
        counts: dict[str, dict[str, int]] = defaultdict(dict)
        for dialogue in dialogues:
            for previous, current in zip(dialogue.utterances, dialogue.utterances[1:]):
                if previous.participant != AGENT or current.participant != USER:
                    continue
                for agent_act in previous.dialogue_acts:
                    for user_act in current.dialogue_acts:
                        row = counts[agent_act.intent]
                        row[user_act.intent] = row.get(user_act.intent, 0) + 1
        return cls(dict(counts), source="annotated")

    @classmethod
    def from_interaction_model(cls, model: InteractionModel) -> TransitionModel:
        """Uniform counts over the user intents whose expected agent intents include each agent intent."""
        counts: dict[str, dict[str, int]] = defaultdict(dict)
        for user_intent in model.user_intents:
            for agent_intent in model.expected_agent_intents(user_intent):
                counts[agent_intent][user_intent] = 1
        return cls(dict(counts), source="interaction_model")

    def distribution(self, agent_intent: str, allowed: set[str] | None = None) -> dict[str, float]:
        """P(user intent | agent intent), restricted to `allowed` and renormalised."""
        row = {u: c for u, c in self.counts.get(agent_intent, {}).items() if allowed is None or u in allowed}
        total = sum(row.values())
        return {u: c / total for u, c in sorted(row.items())} if total else {}

    def sample(self, agent_intents: list[str], rng: random.Random, allowed: set[str] | None = None) -> str | None:
        """A user intent for the first agent intent that has statistics; None when none has."""
        for agent_intent in agent_intents:
            dist = self.distribution(agent_intent, allowed)
            if dist:
                intents = list(dist)
                return rng.choices(intents, weights=[dist[i] for i in intents], k=1)[0]
        return None
