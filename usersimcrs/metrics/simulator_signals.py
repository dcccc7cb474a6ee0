"""What a simulator recorded about the conversation: iEvaLM persuasiveness and PEPPER's target split.

The target-biased simulator stores its post-dialogue persuasiveness rating in
``metadata["persuasiveness"]`` and, with a selected/residual split of the targets (only the
selected ones are described to the simulated user), the two ID lists in ``metadata["targets"]``.
PEPPER shows that recall on the selected targets is far above recall on the residual ones, i.e. the
CRS follows the simulator's hints rather than the user's taste; the two coverages expose that gap.
"""

from __future__ import annotations

from typing import Any

from usersimcrs.core.dialogue import Dialogue, ItemRef
from usersimcrs.metrics.base import MetricContext, MetricFamily, Value
from usersimcrs.metrics.targets import hit_targets


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def split_coverage(dialogue: Dialogue, ids: list[Any]) -> float | None:
    """Share of the given target IDs shown in any list of the dialogue; None for an empty split."""
    targets = [ItemRef(id=str(i)) for i in ids or []]
    if not targets:
        return None
    shown: set[int] = set()
    for items in dialogue.recommendation_lists():
        shown |= hit_targets(items, targets)
    return len(shown) / len(targets)


class SimulatorSignalsFamily(MetricFamily):
    """persuasiveness, selected_coverage, residual_coverage (None when the simulator did not record them)."""

    name = "simulator"

    def kept_on_failure(self, metric: str) -> bool:
        """The target-split coverages are outcomes; persuasiveness is a rating of a finished conversation."""
        return metric.endswith("_coverage")

    def per_conversation(self, dialogue: Dialogue, ctx: MetricContext) -> dict[str, Value]:
        targets = dialogue.metadata.get("targets")
        split: dict[str, Any] = targets if isinstance(targets, dict) else {}
        return {
            "persuasiveness": _number(dialogue.metadata.get("persuasiveness")),
            "selected_coverage": split_coverage(dialogue, split.get("selected") or []),
            "residual_coverage": split_coverage(dialogue, split.get("residual") or []),
        }
