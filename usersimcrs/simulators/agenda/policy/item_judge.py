"""How the simulated user judges a recommended item: target, seen, liked, disliked, neutral or unknown.

Judgements come from the profile only (targets, seen items with ratings, item and slot
preferences in [-1, 1]) and never from chance, so the same item gets the same verdict in every run.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from pydantic import BaseModel, ConfigDict

from usersimcrs.core.dialogue import ItemRef
from usersimcrs.core.items import Item, ItemCollection, display_title, normalize_title, split_year
from usersimcrs.core.profile import Ratings, UserProfile
from usersimcrs.simulators.agenda.policy.domain import canonical_slot

Verdict = Literal["target", "seen", "like", "dislike", "neutral", "unknown"]


class Judgement(BaseModel):
    """The verdict on one item, the score behind it and the item's display title."""

    model_config = ConfigDict(extra="forbid")

    verdict: Verdict
    score: float | None = None
    title: str
    item_id: str | None = None
    seen_rating: float | None = None


class ItemJudge:
    """Scores items against one user's profile."""

    def __init__(
        self,
        profile: UserProfile,
        items: ItemCollection | None,
        *,
        accept_threshold: float = 0.5,
        dislike_threshold: float = -0.3,
        rating_scale: tuple[float, float] = (0.5, 5.0),
    ) -> None:
        self.profile = profile
        self.items = items
        self.accept_threshold = accept_threshold
        self.dislike_threshold = dislike_threshold
        self.ratings = Ratings(rating_scale)
        self._targets = _index((t, None) for t in profile.need.targets)
        self._seen = _index((s.item, s.rating) for s in profile.seen_items)

    def resolve(self, ref: ItemRef) -> tuple[ItemRef, Item | None]:
        """The reference with its collection ID filled in when possible, and the item."""
        if self.items is None:
            return ref, None
        resolved = self.items.resolve(ref)
        return resolved, self.items.get(resolved.id) if resolved.id else None

    def is_target(self, ref: ItemRef) -> bool:
        return _lookup(self._targets, ref)[0]

    def judge(self, ref: ItemRef) -> Judgement:
        """Target first; then seen (consumed); then unknown (a title neither the collection nor the profile knows:
        the user cannot judge it); then preference-based like/dislike/neutral."""
        ref, item = self.resolve(ref)
        title = _display(ref, item)
        if self.is_target(ref):
            return Judgement(verdict="target", score=1.0, title=title, item_id=ref.id)
        seen, rating = _lookup(self._seen, ref)
        if seen:
            score = self.ratings.normalized(rating) if rating is not None else None
            return Judgement(verdict="seen", score=score, title=title, item_id=ref.id, seen_rating=rating)
        score = self.score(ref, item)
        if item is None and score is None:  # a title the collection cannot resolve and the profile never rated
            return Judgement(verdict="unknown", score=None, title=title, item_id=ref.id)
        if not self.satisfies_constraints(item):
            return Judgement(verdict="dislike", score=score, title=title, item_id=ref.id)
        if score is not None and score <= self.dislike_threshold:
            return Judgement(verdict="dislike", score=score, title=title, item_id=ref.id)
        if score is not None and score >= self.accept_threshold:
            return Judgement(verdict="like", score=score, title=title, item_id=ref.id)
        return Judgement(verdict="neutral", score=score, title=title, item_id=ref.id)

    def score(self, ref: ItemRef, item: Item | None) -> float | None:
        """The item preference when known, else the mean preference of the item's slot values."""
        known = self.profile.preferences.item_preference(ref.id)
        if known is not None:
            return known
        if item is None:
            return None
        prefs = []
        for attribute, values in item.attributes.items():
            slot_prefs = _slot_prefs(self.profile, attribute)
            prefs += [slot_prefs[v.lower()] for v in values if v.lower() in slot_prefs]
        return sum(prefs) / len(prefs) if prefs else None

    def satisfies_constraints(self, item: Item | None) -> bool:
        """Every constraint of the need holds for the item (unknown items are given the benefit of doubt)."""
        if item is None:
            return True
        for slot, wanted in self.profile.need.constraints.items():
            values = _values(item, slot)
            if values is None:
                continue
            if not any(_same_value(wanted, value) for value in values):
                return False
        return True


def _index(pairs: Iterable[tuple[ItemRef, float | None]]) -> dict[str, float | None]:
    """Key -> value for item references, by ID and by normalised title (with and without year)."""
    index: dict[str, float | None] = {}
    for ref, value in pairs:
        for key in (_key(ref), *_title_keys(ref)):
            if key:
                index.setdefault(key, value)
    return index


def _lookup(index: dict[str, float | None], ref: ItemRef) -> tuple[bool, float | None]:
    """Match by ID when the reference has one that the index knows; otherwise by title."""
    key = _key(ref)
    if key and key in index:
        return True, index[key]
    for title in _title_keys(ref, lookup=True):
        if title in index:
            return True, index[title]
    return False, None


def _values(item: Item, slot: str) -> list[str] | None:
    wanted = canonical_slot(slot)
    if wanted == "YEAR" and item.year is not None:
        return [str(item.year)]
    for attribute, values in item.attributes.items():
        if canonical_slot(attribute) == wanted:
            return values
    return None


def _slot_prefs(profile: UserProfile, attribute: str) -> dict[str, float]:
    wanted = canonical_slot(attribute)
    merged: dict[str, float] = {}
    for slot, prefs in profile.preferences.slots.items():
        if canonical_slot(slot) == wanted:
            merged.update({value.lower(): score for value, score in prefs.items()})
    return merged


def _same_value(wanted: str, value: str) -> bool:
    a, b = wanted.strip().lower(), value.strip().lower()
    return a == b or a.rstrip("s") == b.rstrip("s") or (len(a) >= 4 and a in b)


def _key(ref: ItemRef) -> str | None:
    return f"id:{ref.id}" if ref.id is not None else None


def _title_keys(ref: ItemRef, *, lookup: bool = False) -> list[str]:
    """Title keys: a dated title matches the same year or an undated entry; an undated one any year."""
    title = ref.title or ref.raw
    if not title:
        return []
    base = f"title:{normalize_title(title)}"
    _, year = split_year(title.strip())
    if lookup:
        return [f"{base}|{year}", f"{base}|?"] if year is not None else [f"{base}|*"]
    return [f"{base}|{year if year is not None else '?'}", f"{base}|*"]


def _display(ref: ItemRef, item: Item | None) -> str:
    return display_title(item.title if item else (ref.title or ref.raw or "that movie"))
