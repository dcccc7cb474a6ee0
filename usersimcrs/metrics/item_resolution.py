"""How many recommended items the toolkit could match to its item collection (the coverage of item metrics).

Recall, hits and coverage compare recommended items with the user's targets, and targets come from
the item collection. A title the collection does not hold (or holds several times, e.g. remakes)
can never match a target, so an item metric computed mostly over such items measures the
catalogue mismatch, not the CRS. These counts say how much of each list the metrics could read.
"""

from __future__ import annotations

from usersimcrs.core.dialogue import Dialogue, ItemRef
from usersimcrs.metrics.base import MetricContext, MetricFamily, Value

ITEM_COUNTS = ("items_shown", "items_resolved", "items_ambiguous", "items_unresolved")
# metrics computed by comparing recommended items with targets (their prefixes)
ITEM_METRIC_PREFIXES = ("recall@", "hit@", "pc@", "pcir", "hit_within_", "selected_coverage", "residual_coverage")


def resolution_of(item: ItemRef) -> str:
    """'resolved' (has a collection ID), 'ambiguous' (several items share the title) or 'unresolved'."""
    if item.id is not None:
        return "resolved"
    return "ambiguous" if item.resolution == "ambiguous" else "unresolved"


def item_counts(dialogue: Dialogue) -> dict[str, int]:
    """Entries of every recommendation list of the dialogue, by how they resolved."""
    counts = dict.fromkeys(ITEM_COUNTS, 0)
    for items in dialogue.recommendation_lists():
        for item in items:
            counts["items_shown"] += 1
            counts[f"items_{resolution_of(item)}"] += 1
    return counts


def is_item_metric(metric: str) -> bool:
    """Whether a metric compares recommended items with targets (so unresolved items weaken it)."""
    return str(metric).startswith(ITEM_METRIC_PREFIXES)


def unresolved_share(shown: float, ambiguous: float, unresolved: float) -> float | None:
    """Share of shown items the metrics could not match to the collection; None when nothing was shown."""
    return (ambiguous + unresolved) / shown if shown else None


class ItemResolutionFamily(MetricFamily):
    """items_shown / items_resolved / items_ambiguous / items_unresolved per conversation (list entries)."""

    name = "items"

    def kept_on_failure(self, metric: str) -> bool:
        """Kept: the items a failed conversation showed still enter its outcome metrics."""
        return True

    def per_conversation(self, dialogue: Dialogue, ctx: MetricContext) -> dict[str, Value]:
        return dict(item_counts(dialogue))
