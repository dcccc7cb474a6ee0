"""How long conversations ran and why they ended."""

from __future__ import annotations

from usersimcrs.core.dialogue import Dialogue
from usersimcrs.metrics.base import MetricContext, MetricFamily, Value


def exchanges(dialogue: Dialogue) -> float:
    """DialogueKit's AvgTurns count for one dialogue: speaker changes / 2 (user-system pairs)."""
    changes = sum(1 for a, b in zip(dialogue.utterances, dialogue.utterances[1:]) if a.participant != b.participant)
    return changes / 2


class LengthFamily(MetricFamily):
    """turns (system turns), user_turns, utterances, exchanges, and the end reason as text."""

    name = "length"

    def kept_on_failure(self, metric: str) -> bool:
        """Only the end reason: a conversation that failed has no length."""
        return metric == "end_reason"

    def kept_without_system_turn(self, metric: str) -> bool:
        """All: a conversation that ended after one user utterance has 1 utterance and 0 system turns."""
        return True

    def per_conversation(self, dialogue: Dialogue, ctx: MetricContext) -> dict[str, Value]:
        return {
            "turns": len(dialogue.agent_turns),
            "user_turns": len(dialogue.user_turns),
            "utterances": len(dialogue.utterances),
            "exchanges": exchanges(dialogue),
            "end_reason": dialogue.end_reason or ("error" if dialogue.status == "failed" else "unknown"),
        }
