"""Domains (slot names, requestable and informable slots) and slot-name canonicalisation."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator

from usersimcrs.core.items import ItemCollection
from usersimcrs.core.yaml_io import load_yaml_model

# common spellings of item attributes (MovieLens/IMDB columns) -> domain slot names
_SLOT_ALIASES = {
    "GENRES": "GENRE",
    "KEYWORDS": "KEYWORD",
    "DIRECTORS": "DIRECTOR",
    "ACTOR": "ACTORS",
    "STARS": "ACTORS",
    "STAR": "ACTORS",
    "CAST": "ACTORS",
    "YEARS": "YEAR",
    "RELEASE_YEAR": "YEAR",
    "TITLES": "TITLE",
    "NAME": "TITLE",
}


def canonical_slot(name: str) -> str:
    """The domain spelling of a slot: upper case, underscores, common plural/alias folded."""
    key = name.strip().upper().replace(" ", "_").replace("-", "_")
    return _SLOT_ALIASES.get(key, key)


class Domain(BaseModel):
    """The slots the simulated user can talk about."""

    model_config = ConfigDict(extra="allow")

    name: str = "domain"
    slot_names: list[str] = Field(default_factory=list)
    requestable_slots: list[str] = Field(default_factory=list)
    informable_slots: list[str] = Field(default_factory=list)

    @field_validator("slot_names", mode="before")
    @classmethod
    def _slot_mapping(cls, value: object) -> object:
        """The anchor writes `slot_names` as a mapping with empty values; accept both forms."""
        if isinstance(value, dict):
            return list(value)
        return value

    @field_validator("slot_names", "requestable_slots", "informable_slots", mode="after")
    @classmethod
    def _canonical(cls, value: list[str]) -> list[str]:
        return list(dict.fromkeys(canonical_slot(v) for v in value))

    def has(self, slot: str) -> bool:
        return canonical_slot(slot) in self.slot_names


def load_domain(path: str | Path) -> Domain:
    """Read a domain YAML in the anchor's schema."""
    return load_yaml_model(path, Domain)


def domain_from_items(items: ItemCollection | None, extra_slots: Sequence[str] = ()) -> Domain:
    """A domain when none is configured: TITLE plus every item attribute and the need's slots."""
    slots = ["TITLE"]
    if items is not None:
        slots += [canonical_slot(s) for s in items.slots()]
        if any(item.year is not None for item in items):
            slots.append("YEAR")
    slots += [canonical_slot(s) for s in extra_slots]
    slots = list(dict.fromkeys(slots))
    return Domain(name="from_items", slot_names=slots, requestable_slots=slots[1:], informable_slots=slots[1:])
