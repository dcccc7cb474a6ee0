"""A user's target items and matching recommended items against them (by ID, else by title)."""

from __future__ import annotations

from typing import Iterable

from usersimcrs.core.dialogue import Dialogue, ItemRef
from usersimcrs.core.items import normalize_title


def targets_of(dialogue: Dialogue) -> list[ItemRef]:
    """The target items Y(u) of the dialogue's user (profile.need.targets); empty when unknown."""
    return list(dialogue.profile.need.targets) if dialogue.profile is not None else []


def _title_key(ref: ItemRef) -> str:
    return normalize_title(ref.title or ref.raw or "")


def matches(item: ItemRef, target: ItemRef) -> bool:
    """Same item: equal IDs when both have one, else equal normalised titles."""
    if item.id is not None and target.id is not None:
        return str(item.id) == str(target.id)
    key = _title_key(item)
    return bool(key) and key == _title_key(target)


def item_key(item: ItemRef) -> str:
    """An identity for set comparisons between lists (ID when resolved, else normalised title)."""
    return f"id:{item.id}" if item.id is not None else f"title:{_title_key(item)}"


def hit_targets(items: Iterable[ItemRef], targets: list[ItemRef], k: int | None = None) -> set[int]:
    """Indices of the targets found among the first `k` items (all items when k is None)."""
    ranked = list(items)
    if k is not None:
        ranked = ranked[:k]
    found: set[int] = set()
    for index, target in enumerate(targets):
        if any(matches(item, target) for item in ranked):
            found.add(index)
    return found
