"""`retrieval`: a BM25 CRS over title, genres and keywords that elicits, then recommends top-k."""

from __future__ import annotations

from typing import Any

import numpy as np
from pydantic import Field

from crs_connectors.baselines.bm25_index import BM25Index, tokenize
from crs_connectors.baselines.rule_based import BaselineConfig, DialogueState, RuleBasedCRS


class RetrievalConfig(BaselineConfig):
    """Options of the BM25 baseline."""

    fields: list[str] = Field(
        default_factory=lambda: ["genres", "keywords"], description="attributes indexed besides the title"
    )
    elicit_turns: int = Field(2, ge=0)
    genre_weight: int = Field(2, ge=0, description="times each stated genre is repeated in the query")


def genre_filter(items_genres: list[set[str]], wanted: list[str], disliked: list[str]) -> np.ndarray:
    """A mask of items that have every wanted genre (or, if none do, any of them) and no disliked one."""
    no_disliked = np.array([not (g & set(disliked)) for g in items_genres], dtype=bool)
    if not wanted:
        return no_disliked
    every = np.array([set(wanted) <= g for g in items_genres], dtype=bool) & no_disliked
    if every.any():
        return every
    some = np.array([bool(g & set(wanted)) for g in items_genres], dtype=bool) & no_disliked
    return some if some.any() else no_disliked


class RetrievalCRS(RuleBasedCRS):
    """Ranks items by BM25 between everything the user said and each item's text."""

    Config = RetrievalConfig
    config: RetrievalConfig

    def __init__(self, config: RetrievalConfig, context: Any) -> None:
        super().__init__(config, context)
        fields = [f for f in config.fields if f in self.slots] or self.slots
        key = f"retrieval.bm25:{id(self.items)}:{','.join(fields)}"
        self.index: BM25Index = context.shared(key, lambda: BM25Index(self.items, fields))
        slot = config.genre_slot
        self.item_genres: list[set[str]] = context.shared(
            f"retrieval.genres:{id(self.items)}:{slot}",
            lambda: [set(self.items.require(i).values(slot)) for i in self.index.ids],
        )
        self.fields = fields

    def query(self, state: DialogueState) -> list[str]:
        """Query tokens: the user's words, stated genres (weighted) and the named items' attributes."""
        tokens: list[str] = []
        for text in state.user_texts:
            tokens.extend(tokenize(text))
        for genre in state.genres:
            tokens.extend(tokenize(genre) * self.config.genre_weight)
        for item_id in state.mentioned:
            item = self.items.get(item_id)
            if item is not None:
                tokens.extend(t for slot in self.fields for v in item.values(slot) for t in tokenize(v))
        disliked = {t for g in state.disliked_genres for t in tokenize(g)}
        return [t for t in tokens if t not in disliked]

    def has_preferences(self, state: DialogueState) -> bool:
        if super().has_preferences(state):
            return True
        return any(self.index.knows(t) for text in state.user_texts for t in tokenize(text))

    def rank(self, state: DialogueState, exclude: set[str]) -> list[str]:
        scores = self.index.scores(self.query(state))
        mask = genre_filter(self.item_genres, state.genres, state.disliked_genres)
        for item_id in exclude:
            position = self.index.position.get(item_id)
            if position is not None:
                mask[position] = False
        candidates = np.flatnonzero(mask)
        order = candidates[np.argsort(-scores[candidates], kind="stable")]
        return [self.index.ids[i] for i in order[: self.config.k * 4]]


__all__ = ["RetrievalCRS", "RetrievalConfig"]
