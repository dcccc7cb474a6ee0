"""Recommendations that only exist in a CRS's text: numbered lists, MovieBot offers, title mentions.

Parsing returns raw titles in rank order; `resolve_titles` maps them to item-collection IDs
(fuzzy, year-aware) and keeps unresolved or ambiguous ones as title-only references.
"""

from __future__ import annotations

import math
import re

from crs_connectors.json_paths import first_value
from usersimcrs.core.dialogue import ItemRef
from usersimcrs.core.items import ItemCollection

_LIST_HEADER = re.compile(r"recommend(?:ed)?\s+(?:you\s+)?the\s+following\s+(?:items?|movies?|films?)\s*:?", re.I)
_LIST_LINE = re.compile(r"^\s*(?:\d{1,2}\s*[:.)\-]|[-*\u2022])\s*(?P<title>\S.*?)\s*$")
_NUMBERED_LINE = re.compile(r"^\s*\d{1,2}\s*[:.)]\s*(?P<title>\S.*?)\s*$")
_MOVIEBOT_OFFER = re.compile(
    r"Do you like:\s*(?P<title>.+?)\s+(?P<rating>\d+(?:\.\d+)?)\s+(?P<minutes>\d+)\s*min", re.I
)
_YEAR_MENTION = re.compile(r"\((?:19|20)\d{2}\)")
_WRAPPERS = "\"'*_`\u201c\u201d\u2018\u2019 "


def clean_title(raw: str) -> str:
    """A list entry without quotes, emphasis or a trailing full stop."""
    title = raw.strip().strip(_WRAPPERS).rstrip(".,;").strip(_WRAPPERS)
    return re.sub(r"\s+", " ", title)


def parse_recommendation_list(text: str) -> list[str]:
    """Titles of an "I would recommend the following items:" list (numbered or bulleted).

    Without that header, two or more consecutive numbered lines are taken as the list.
    """
    lines = text.splitlines()
    header = _LIST_HEADER.search(text)
    if header:
        after = text[header.end() :]
        inline_and_rest = after.splitlines()
        titles: list[str] = []
        for index, line in enumerate(inline_and_rest):
            if index == 0 and not line.strip():
                continue
            match = _LIST_LINE.match(line)
            if match:
                titles.append(clean_title(match.group("title")))
            elif line.strip() and titles:
                break
            elif line.strip() and index == 0:
                titles.extend(clean_title(t) for t in re.split(r",\s*|;\s*", line) if t.strip())
                break
        return [t for t in titles if t]
    numbered = [m.group("title") for m in map(_NUMBERED_LINE.match, lines) if m]
    return [clean_title(t) for t in numbered] if len(numbered) >= 2 else []


def parse_moviebot_offers(text: str) -> list[str]:
    """Titles offered as ``Do you like: <Title> <rating> <minutes> min`` (IAI MovieBot v1.0.1)."""
    return [clean_title(m.group("title")) for m in _MOVIEBOT_OFFER.finditer(text)]


def find_year_mentions(text: str, items: ItemCollection) -> list[str]:
    """Titles written as ``Title (Year)`` in free text that exist in the collection."""
    found: list[str] = []
    for match in _YEAR_MENTION.finditer(text):
        words = text[: match.start()].split()
        year = match.group(0)
        for size in range(min(len(words), 10), 0, -1):
            candidate = clean_title(" ".join(words[-size:]))
            item = items.find_by_title(f"{candidate} {year}", fuzzy=False)
            if item is not None:
                found.append(item.title)
                break
    return found


def resolve_titles(titles: list[str], items: ItemCollection | None) -> list[ItemRef]:
    """Item references for parsed titles, resolved to collection IDs where a title names one item.

    A title several items share (no year, remakes) stays unresolved with its candidate IDs.
    """
    if items is None or not len(items):
        return [ItemRef(title=title, raw=title) for title in titles]
    return [items.resolve_title(title) for title in titles]


def items_from_text(text: str, items: ItemCollection | None, *, mentions: bool = True) -> list[ItemRef]:
    """Recommended items found in a reply text: a list, MovieBot offers, else ``Title (Year)`` mentions."""
    titles = parse_recommendation_list(text) or parse_moviebot_offers(text)
    if not titles and mentions and items is not None and len(items):
        titles = find_year_mentions(text, items)
    return resolve_titles(titles, items)


def _scalar_text(value: object) -> str | None:
    """An ID or title as text: strings as they are, finite numbers written out; anything else (a list,
    an object, a boolean, NaN) is not a title or an ID and gives None, never a Python repr."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return str(value)


def ref_from_value(
    value: object, items: ItemCollection | None, *, id_field: str | None, title_field: str | None
) -> ItemRef | None:
    """An item reference from a JSON value: a scalar (an ID if the collection knows it, else a title)
    or an object with ID / title fields."""
    item_id: str | None = None
    title: str | None = None
    if isinstance(value, dict):
        raw_id = first_value(value, id_field) if id_field else None
        raw_title = first_value(value, title_field) if title_field else None
        item_id = _scalar_text(raw_id)
        title = _scalar_text(raw_title)
    elif _scalar_text(value) is not None:
        text = str(_scalar_text(value))
        if items is not None and text in items:
            item_id = text
        else:
            title = text
    if item_id is None and not title:
        return None
    ref = ItemRef(id=item_id, title=title, raw=title or item_id)
    if items is None:
        return ref
    if item_id is not None and item_id in items:
        known = items.get(item_id)
        return ref.model_copy(update={"title": known.title if known else title})
    if title:
        return items.resolve(ItemRef(title=title, raw=title))
    return ref
