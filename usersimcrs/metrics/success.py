"""Whether and when a recommendation was accepted or a target shown: success, rounds, reward, hits."""

from __future__ import annotations

import re
from types import MappingProxyType

from usersimcrs.core.dialogue import AGENT, USER, Dialogue, Utterance
from usersimcrs.metrics.base import MetricContext, MetricFamily, Value
from usersimcrs.metrics.options import MetricOptions, RewardConfig
from usersimcrs.metrics.targets import hit_targets, targets_of

_INTENT_PARTS = re.compile(r"[._\-\s]+")


def is_accept_intent(intent: str, accept_parts: list[str]) -> bool:
    """True when a part of the intent (split at . _ -) is an accept word, e.g. NOTE.ACCEPT, ACC."""
    wanted = {p.upper() for p in accept_parts}
    return any(part in wanted for part in _INTENT_PARTS.split(intent.upper()) if part)


def accepts(utterance: Utterance, options: MetricOptions) -> bool:
    """A user utterance that accepts: one of its acts has an accept intent."""
    return utterance.participant == USER and any(
        is_accept_intent(act.intent, options.accept_intents) for act in utterance.dialogue_acts
    )


def recommendation_rounds(dialogue: Dialogue) -> list[int]:
    """Positions (in `utterances`) of system turns that recommended at least one item."""
    return [i for i, u in enumerate(dialogue.utterances) if u.participant == AGENT and u.items]


def has_acceptance_signal(dialogue: Dialogue, options: MetricOptions) -> bool:
    """Whether the dialogue could show an acceptance at all: user acts, utterance feedback or a known end reason.

    LLM users and imported human dialogues carry none of these; their success is unknown, not 0.
    """
    if dialogue.end_reason in options.success_end_reasons or dialogue.end_reason in options.failure_end_reasons:
        return True
    if any(u.dialogue_acts for u in dialogue.user_turns):
        return True
    return any(u.feedback is not None for u in dialogue.utterances)


def accepted_rounds(dialogue: Dialogue, options: MetricOptions) -> list[int] | None:
    """Recommendation rounds the user accepted: positive feedback on it, or an accept in the reply.

    When the run ended with a success reason but no round shows it (no acts, no feedback), the last
    recommendation round counts as the accepted one. None when the dialogue has no acceptance signal.
    """
    if not has_acceptance_signal(dialogue, options):
        return None
    utterances = dialogue.utterances
    accepted = []
    for position in recommendation_rounds(dialogue):
        reply = next((u for u in utterances[position + 1 :] if u.participant == USER), None)
        if utterances[position].feedback == 1 or (reply is not None and accepts(reply, options)):
            accepted.append(position)
    rounds = recommendation_rounds(dialogue)
    if not accepted and rounds and dialogue.end_reason in options.success_end_reasons:
        accepted.append(rounds[-1])
    return accepted


def is_success(dialogue: Dialogue, options: MetricOptions) -> bool | None:
    """A recommendation was accepted: an accept act, positive feedback, or a success end reason.

    None (not measured) when the dialogue has no acceptance signal (see `has_acceptance_signal`).
    """
    if not has_acceptance_signal(dialogue, options):
        return None
    if dialogue.end_reason in options.success_end_reasons:
        return True
    if any(accepts(u, options) for u in dialogue.utterances):
        return True
    return any(u.participant == AGENT and u.feedback == 1 for u in dialogue.utterances)


def hit_within(dialogue: Dialogue, turns: int, k: int | None) -> float | None:
    """1 when a target is in some list of the first `turns` system turns, else 0; None without targets."""
    targets = targets_of(dialogue)
    if not targets:
        return None
    lists = dialogue.recommendation_lists()[:turns]
    return float(any(hit_targets(items, targets, k) for items in lists))


def agent_repeats(dialogue: Dialogue) -> int:
    """System turns whose text repeats the previous system turn word for word."""
    texts = [u.text.strip().lower() for u in dialogue.agent_turns]
    return sum(1 for a, b in zip(texts, texts[1:]) if a and a == b)


def reward(dialogue: Dialogue, config: RewardConfig) -> float | None:
    """DialogueKit's reward for one dialogue: full points minus missing-intent penalties, repeats, turn cost.

    DialogueKit looks for the intents over the whole set of dialogues; here each dialogue is scored
    on its own user intents (the base intent before a dot, as DialogueKit compares them). With an
    intent table but no user acts at all the penalties cannot be told apart from missing annotation,
    so the reward is None (not measured).
    """
    if config.intents and not any(u.dialogue_acts for u in dialogue.user_turns):
        return None
    seen = {act.intent.split(".")[0].upper() for u in dialogue.user_turns for act in u.dialogue_acts}
    points = config.full_set_points
    points -= sum(p for intent, p in config.intents.items() if intent.split(".")[0].upper() not in seen)
    points -= config.repeat_penalty * agent_repeats(dialogue)
    points -= config.cost * len(dialogue.user_turns)
    return max(0.0, points)


class SuccessFamily(MetricFamily):
    """success, successful-round ratio, hit within N turns, reward and reward per turn (None when not measured)."""

    name = "success"
    failure_outcomes = MappingProxyType({"success": 0.0})

    def kept_on_failure(self, metric: str) -> bool:
        """success and hit_within_N are outcomes; rounds, ratios and reward describe a conversation."""
        return metric == "success" or metric.startswith("hit_within_")

    def per_conversation(self, dialogue: Dialogue, ctx: MetricContext) -> dict[str, Value]:
        options = ctx.options
        rounds = recommendation_rounds(dialogue)
        accepted = accepted_rounds(dialogue, options)
        turns = len(dialogue.user_turns)
        points = reward(dialogue, options.reward)
        success = is_success(dialogue, options)
        out: dict[str, Value] = {
            "success": None if success is None else float(success),
            "recommendation_rounds": len(rounds),
            "accepted_rounds": None if accepted is None else len(accepted),
            "successful_round_ratio": len(accepted) / len(rounds) if rounds and accepted is not None else None,
            "reward": points,
            "reward_per_turn": points / turns if turns and points is not None else None,
        }
        for n in options.hit_within:
            out[f"hit_within_{n}"] = hit_within(dialogue, n, options.hit_k)
        return out
