"""`popularity`: asks for a genre, then recommends the most-rated items of that genre."""

from __future__ import annotations

from typing import TYPE_CHECKING

from crs_connectors.baselines.rule_based import BaselineConfig, DialogueState, RuleBasedCRS

if TYPE_CHECKING:  # pragma: no cover
    from usersimcrs.runtime.context import RunContext


class PopularityCRS(RuleBasedCRS):
    """Ranks by number of ratings (collection order without ratings), filtered by stated genres."""

    Config = BaselineConfig
    config: BaselineConfig

    def __init__(self, config: BaselineConfig, context: RunContext) -> None:
        super().__init__(config, context)
        self.order: list[str] = context.shared(f"popularity.order:{id(self.items)}", self._popularity_order)

    def _popularity_order(self) -> list[str]:
        """Item IDs by rating count, most-rated first; ties (and no ratings) keep collection order."""
        ids = self.items.ids()
        counts = self.context.ratings.count_by_item() if self.context.ratings is not None else {}
        position = {item_id: i for i, item_id in enumerate(ids)}
        return sorted(ids, key=lambda i: (-counts.get(i, 0), position[i]))

    def rank(self, state: DialogueState, exclude: set[str]) -> list[str]:
        slot = self.config.genre_slot
        wanted, disliked = set(state.genres), set(state.disliked_genres)
        tiers: list[list[str]] = [[], [], []]
        for item_id in self.order:
            if item_id in exclude:
                continue
            genres = set(self.items.require(item_id).values(slot))
            if genres & disliked:
                continue
            tier = 0 if wanted <= genres else (1 if genres & wanted else 2)
            tiers[tier].append(item_id)
            if len(tiers[0]) >= self.config.k * 4:
                break
        return (tiers[0] + tiers[1]) or tiers[2]
