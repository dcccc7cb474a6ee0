"""A reference to an item as a CRS or a dataset names it: the collection ID when resolved, else the raw title.

Its own module, below the dialogue, the profile and the item collection, which all build on it.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=False)


Resolution = Literal["exact", "normalized", "fuzzy", "ambiguous", "unresolved"]


def _is_none(value: object) -> bool:
    return value is None


def _is_empty(value: list[str]) -> bool:
    return not value


class ItemRef(_Model):
    """A reference to an item: its collection ID when resolved, else only the raw title.

    `resolution` says how a title was matched to the collection (None: not matched by title);
    an ``ambiguous`` title (several items share it, e.g. remakes) keeps ``id`` None and lists the
    `candidates`. Both are left out of the JSON when unset, so older files read and write alike.
    """

    id: str | None = None
    title: str | None = None
    score: float | None = None
    raw: str | None = None
    # left out by pydantic-core itself: a Python wrap serializer cost about 5 us per reference, and a
    # conversation of the real workload writes some 80 of them (a profile's seen items among them)
    resolution: Resolution | None = Field(default=None, exclude_if=_is_none)
    candidates: list[str] = Field(default_factory=list, exclude_if=_is_empty)

    def key(self) -> str:
        """A stable identity for set operations: the ID if resolved, else the lower-cased title."""
        if self.id is not None:
            return f"id:{self.id}"
        return f"title:{(self.title or self.raw or '').strip().lower()}"
