"""Recall@(t, k): the share of the user's targets in the list shown at system turn t (PEPPER §3)."""

from __future__ import annotations

from usersimcrs.core.dialogue import Dialogue, ItemRef
from usersimcrs.metrics.base import MetricContext, MetricFamily, Value, mean_or_none
from usersimcrs.metrics.targets import hit_targets, targets_of


def recall_at(items: list[ItemRef], targets: list[ItemRef], k: int) -> float | None:
    """|top-k ∩ Y| / |Y|, or None when the user has no targets."""
    if not targets:
        return None
    return len(hit_targets(items, targets, k)) / len(targets)


def recall_per_turn(dialogue: Dialogue, k: int) -> list[float] | None:
    """Recall@(t, k) for each system turn of the dialogue; None when it has no targets."""
    targets = targets_of(dialogue)
    if not targets:
        return None
    return [recall_at(items, targets, k) or 0.0 for items in dialogue.recommendation_lists()]


class RecallFamily(MetricFamily):
    """recall@k (mean over the dialogue's system turns, PEPPER's Avg. Recall) and hit@k (any turn)."""

    name = "recall"

    def kept_on_failure(self, metric: str) -> bool:
        """hit@k (was a target ever shown) is an outcome; recall@k averages the lists of turns that happened."""
        return metric.startswith("hit@")

    def per_conversation(self, dialogue: Dialogue, ctx: MetricContext) -> dict[str, Value]:
        out: dict[str, Value] = {}
        for k in ctx.options.recall_ks:
            curve = recall_per_turn(dialogue, k)
            out[f"recall@{k}"] = None if curve is None else mean_or_none(list(curve))
            out[f"hit@{k}"] = None if curve is None else float(any(v > 0 for v in curve))
        return out

    def per_turn(self, dialogue: Dialogue, ctx: MetricContext) -> dict[str, list[float | None]]:
        out: dict[str, list[float | None]] = {}
        for k in ctx.options.recall_ks:
            curve = recall_per_turn(dialogue, k)
            if curve is None:
                continue
            padded: list[float | None] = list(curve[: ctx.horizon])
            padded += [None] * (ctx.horizon - len(padded))
            out[f"recall@{k}"] = padded
        return out
