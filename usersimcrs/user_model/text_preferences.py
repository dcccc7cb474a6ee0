"""PEPPER-style text preferences: Likes/Dislikes from reviews and a general-preference narrative.

The narrative is built only from the user's *seen* items, so held-out targets never leak into
what the simulator is told (PEPPER, 002 §4).
"""

from __future__ import annotations

import re
from typing import Iterable

from usersimcrs.core.items import ItemCollection, display_title
from usersimcrs.core.profile import Preferences, SeenItem

_SECTION = re.compile(r"^\s*\[(?P<name>like|likes|dislike|dislikes)\]\s*:?\s*(?P<rest>.*)$", re.I)
_BULLET = re.compile(r"^\s*(?:[-*\u2022]|\d+[.)])\s*")


def parse_likes_dislikes(text: str | None) -> tuple[list[str], list[str]]:
    """Split a review abstract of the form ``[Like] ... [Dislike] ...`` into two lists of lines.

    A section whose only content is "None" counts as empty (the IMDB data writes it that way).
    A raw review without section markers gives nothing: turning free text into binary preferences
    needs a model (PEPPER used an LLM), not a line split.
    """
    likes: list[str] = []
    dislikes: list[str] = []
    if not has_sections(text):
        return likes, dislikes
    current = likes
    for raw in (text or "").splitlines():
        match = _SECTION.match(raw)
        if match:
            current = dislikes if match.group("name").lower().startswith("dis") else likes
            raw = match.group("rest")
        line = _BULLET.sub("", raw).strip()
        if line and line.lower().rstrip(".") != "none":
            current.append(line)
    return likes, dislikes


def has_sections(text: str | None) -> bool:
    """Whether a review carries ``[Like]`` / ``[Dislike]`` sections."""
    return any(_SECTION.match(line) for line in (text or "").splitlines())


def _unique(lines: Iterable[str]) -> list[str]:
    seen: dict[str, None] = {}
    for line in lines:
        seen.setdefault(line, None)
    return list(seen)


def preferences_from_reviews(seen: list[SeenItem], base: Preferences | None = None) -> Preferences:
    """Likes/dislikes gathered from the seen items' review abstracts, added to `base`."""
    likes: list[str] = list(base.likes) if base else []
    dislikes: list[str] = list(base.dislikes) if base else []
    for entry in seen:
        item_likes, item_dislikes = parse_likes_dislikes(entry.review)
        likes.extend(item_likes)
        dislikes.extend(item_dislikes)
    data = base.model_dump() if base else {}
    data.update(likes=_unique(likes), dislikes=_unique(dislikes))
    return Preferences.model_validate(data)


def top_slot_values(prefs: Preferences, *, positive: bool, per_slot: int = 3) -> dict[str, list[str]]:
    """The strongest liked (positive) or disliked slot values, per slot."""
    out: dict[str, list[str]] = {}
    for slot, values in prefs.slots.items():
        chosen = [(v, s) for v, s in values.items() if (s > 0) == positive and s != 0]
        chosen.sort(key=lambda vs: (-abs(vs[1]), vs[0]))
        if chosen:
            out[slot] = [v for v, _ in chosen[:per_slot]]
    return out


def general_preference_narrative(
    seen: list[SeenItem],
    prefs: Preferences,
    items: ItemCollection | None = None,
    *,
    like_threshold: float = 0.5,
    dislike_threshold: float = -0.3,
    max_titles: int = 4,
    max_lines: int = 4,
) -> str:
    """A short second-person description of the user's taste, from seen items only."""
    scored = [(s, score) for s in seen if (score := _score(s, prefs)) is not None]
    liked = [s for s, score in scored if score >= like_threshold]
    disliked = [s for s, score in scored if score <= dislike_threshold]
    liked.sort(key=lambda s: (-(_score(s, prefs) or 0), s.item.title or ""))
    disliked.sort(key=lambda s: ((_score(s, prefs) or 0), s.item.title or ""))
    sentences: list[str] = []
    favourite = top_slot_values(prefs, positive=True)
    if favourite:
        parts = [f"{slot}: {', '.join(values)}" for slot, values in favourite.items()]
        sentences.append("You are drawn to " + "; ".join(parts) + ".")
    if liked:
        sentences.append("Titles you enjoyed include " + _titles(liked[:max_titles], items) + ".")
    if disliked:
        sentences.append("You did not enjoy " + _titles(disliked[:max_titles], items) + ".")
    if prefs.likes:
        sentences.append("What you value: " + "; ".join(prefs.likes[:max_lines]) + ".")
    if prefs.dislikes:
        sentences.append("What puts you off: " + "; ".join(prefs.dislikes[:max_lines]) + ".")
    return " ".join(sentences) or "You enjoy a wide range of movies and are open to suggestions."


def _score(entry: SeenItem, prefs: Preferences) -> float | None:
    return prefs.item_preference(entry.item.id)


def _titles(entries: list[SeenItem], items: ItemCollection | None) -> str:
    names = []
    for entry in entries:
        item = items.get(entry.item.id) if items is not None and entry.item.id else None
        names.append(display_title(item.title if item else entry.item.title or entry.item.raw or "?"))
    return ", ".join(names)
