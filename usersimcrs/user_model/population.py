"""Where each conversation's user profile comes from: generated from ratings/items, or read from a file.

`build_profile_source(config.profiles, context)` returns an object whose
`profile(index, rng)` gives the profile of conversation `index`. Generation is deterministic in
`index` and `rng` (the conversation's seeded generator). What does not depend on `rng` (a ratings
user's scan of their ratings, held-out targets, seen items, preferences, persona) is built once
per user and run as that user's `UserBasis`, and every conversation of the user shares its seen
items and preferences, read-only: their lists and mappings refuse changes (`ReadOnlyList`,
`ReadOnlyDict`), so no conversation can alter another's user, and the seen items' serialised
forms are computed once per user (`usersimcrs.core.profile.profile_id`, `compact_profile`).
Copying a 166-item rating history per conversation was a fifth of the engine's CPU on the
MovieLens sample (issue #22).
"""

from __future__ import annotations

import copy
import random
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Protocol

from pydantic import ValidationError

from usersimcrs.core.dialogue import ItemRef
from usersimcrs.core.items import ItemCollection
from usersimcrs.core.jsonl import iter_jsonl
from usersimcrs.core.profile import (
    InformationNeed,
    Preferences,
    Ratings,
    ReadOnlyDict,
    ReadOnlyList,
    SeenItem,
    UserProfile,
)
from usersimcrs.core.validation import describe_validation_error
from usersimcrs.errors import ConfigError, DataError
from usersimcrs.user_model.information_need import need_for_targets
from usersimcrs.user_model.persona import persona_from_fields
from usersimcrs.user_model.preferences import preferences_from_ratings, split_by_preference

if TYPE_CHECKING:  # pragma: no cover
    from usersimcrs.config import ProfilesConfig
    from usersimcrs.runtime.context import RunContext

PROFILE_FILES = ("profiles.jsonl", "information_needs.jsonl")


class ProfileSource(Protocol):
    """Hands out the profile of conversation `index`."""

    def profile(self, index: int, rng: random.Random) -> UserProfile:  # pragma: no cover - interface
        ...


def read_only_preferences(prefs: Preferences) -> Preferences:
    """The preferences with read-only containers (leaves are floats and strings), for sharing."""
    shared = prefs.model_copy()
    shared.__dict__.update(
        items=ReadOnlyDict(prefs.items),
        slots=ReadOnlyDict({slot: ReadOnlyDict(values) for slot, values in prefs.slots.items()}),
        likes=ReadOnlyList(prefs.likes),
        dislikes=ReadOnlyList(prefs.dislikes),
    )
    return shared


def read_only_history(profile: UserProfile) -> UserProfile:
    """The profile with its seen items, preferences and persona made read-only, to be shared."""
    persona = profile.persona
    if persona is not None:
        persona = persona.model_copy(update={"fields": ReadOnlyDict(persona.fields)})
    profile.__dict__.update(
        preferences=read_only_preferences(profile.preferences),
        persona=persona,
        seen_items=ReadOnlyList(profile.seen_items),
    )
    return profile


@dataclass(frozen=True)
class UserBasis:
    """A ratings user's profile without a need: what no random draw touches, built once per run.

    Every conversation of the user gets `profile` with its own need and metadata (a shallow copy):
    the seen items and preferences are this one object's, read-only.
    """

    held_out: tuple[str, ...]  # liked items held out as targets, best first (empty: no rated item)
    profile: UserProfile


class GeneratedProfiles:
    """Profiles generated from a ratings user (held-out liked items as targets), else from items alone."""

    def __init__(self, config: ProfilesConfig, items: ItemCollection | None, ratings: Ratings | None) -> None:
        users = ratings.users() if ratings is not None else []
        if items is None and not users:
            raise ConfigError("profiles.source 'generate' needs an 'items' or a 'ratings' section")
        self.config = config
        self.items = items
        self.ratings = ratings if users else None
        self._users = users
        self._bases: dict[str, UserBasis] = {}  # per user, filled on first use (a run may use few of many users)

    def profile(self, index: int, rng: random.Random) -> UserProfile:
        """The profile of conversation `index` (user chosen by index, target drawn with `rng`)."""
        if self.ratings is not None:
            return self._from_ratings(self._users[index % len(self._users)], rng)
        return self._from_items(index, rng)

    def _ref(self, item_id: str) -> ItemRef:
        item = self.items.get(item_id) if self.items is not None else None
        return item.ref() if item is not None else ItemRef(id=item_id)

    def basis(self, user_id: str) -> UserBasis:
        """The user's rng-free profile parts, computed on first use and kept for the run."""
        basis = self._bases.get(user_id)
        if basis is None:
            basis = self._bases[user_id] = self._prepare(user_id)
        return basis

    def _prepare(self, user_id: str) -> UserBasis:
        assert self.ratings is not None
        cfg = self.config
        raw = self.ratings.of(user_id)
        if self.items is not None:
            raw = {i: r for i, r in raw.items() if i in self.items} or raw
        scores = {i: self.ratings.normalized(r) for i, r in raw.items()}
        groups = split_by_preference(scores, cfg.like_threshold, cfg.dislike_threshold)
        held_out = _held_out(groups["liked"], cfg.holdout) or sorted(scores, key=lambda i: (-scores[i], i))[:1]
        held = set(held_out)
        seen_ratings = {i: r for i, r in raw.items() if i not in held}
        prefs = preferences_from_ratings(
            seen_ratings,
            self.ratings.normalized,
            self.items,
            like_threshold=cfg.like_threshold,
            dislike_threshold=cfg.dislike_threshold,
        )
        seen = [
            SeenItem(item=self._ref(i), rating=r)
            for i, r in sorted(seen_ratings.items(), key=lambda kv: (-kv[1], kv[0]))
        ]
        profile = UserProfile.model_construct(  # the objects as they are (validated when built above)
            user_id=str(user_id),
            need=InformationNeed(),
            preferences=prefs,
            persona=persona_from_fields(cfg.persona),
            seen_items=seen,
            metadata={},
        )
        read_only_history(profile)
        return UserBasis(held_out=tuple(held_out), profile=profile)

    def _from_ratings(self, user_id: str, rng: random.Random) -> UserProfile:
        assert self.ratings is not None
        cfg = self.config
        basis = self.basis(user_id)
        held_out = basis.held_out
        if not held_out:
            return self._from_items(0, rng, user_id=user_id)
        primary_id = held_out[rng.randrange(len(held_out))]
        primary = self.items.get(primary_id) if self.items is not None else None
        need = need_for_targets(
            primary if primary is not None else self._ref(primary_id),
            [self._ref(i) for i in held_out],
            constraint_slots=cfg.constraint_slots,
            requestable_slots=cfg.requestable_slots,
            rng=rng,
        )
        metadata = {
            "source": "ratings",
            "primary_target": primary_id,
            "held_out": list(held_out),
            "rating_scale": list(self.ratings.scale),
        }
        # a shallow copy: the need and metadata are this conversation's, the user's history is shared
        return basis.profile.model_copy(update={"need": need, "metadata": metadata})

    def _from_items(self, index: int, rng: random.Random, *, user_id: str | None = None) -> UserProfile:
        if self.items is None or len(self.items) == 0:
            raise DataError("profiles: cannot generate a need: the item collection is empty")
        cfg = self.config
        ids = self.items.ids()
        item = self.items.require(ids[rng.randrange(len(ids))])
        need = need_for_targets(
            item, [], constraint_slots=cfg.constraint_slots, requestable_slots=cfg.requestable_slots, rng=rng
        )
        prefs = Preferences(slots={slot: {value: 1.0} for slot, value in need.constraints.items()})
        return UserProfile(
            user_id=user_id or f"user-{index}",
            need=need,
            preferences=prefs,
            persona=persona_from_fields(cfg.persona),
            metadata={"source": "items", "primary_target": item.id},
        )


def _held_out(liked: list[str], share: float) -> list[str]:
    """The top `share` of the liked items (best first), at least one when any is liked."""
    if not liked:
        return []
    count = max(1, round(share * len(liked)))
    return liked[: min(count, len(liked))]


class FileProfiles:
    """Profiles read from `profiles.jsonl` / `information_needs.jsonl` written by the converters."""

    def __init__(self, config: ProfilesConfig, items: ItemCollection | None) -> None:
        if not config.path:
            raise ConfigError("profiles.source 'file' needs 'profiles.path'")
        self.path = _profile_file(Path(config.path))
        self.persona = persona_from_fields(config.persona)
        self.items = items
        self.profiles = [self._parse(record, number) for number, record in enumerate(iter_jsonl(self.path), 1)]
        if not self.profiles:
            raise DataError(f"{self.path}: no profile records")

    def profile(self, index: int, rng: random.Random) -> UserProfile:
        """Record `index` (cycling when there are fewer records than conversations): its own need and
        metadata, the record's seen items, preferences and persona shared read-only."""
        shared = self.profiles[index % len(self.profiles)]
        return shared.model_copy(
            update={"need": shared.need.model_copy(deep=True), "metadata": copy.deepcopy(shared.metadata)}
        )

    def _parse(self, record: dict[str, Any], number: int) -> UserProfile:
        try:
            if "need" in record and "conversation_id" in record:  # an information_needs.jsonl record
                extra = {k: v for k, v in record.items() if k != "need"}
                profile = UserProfile(
                    user_id=str(record.get("user_id") or record.get("conversation_id") or f"user-{number}"),
                    need=InformationNeed.model_validate(record["need"]),
                    metadata={"source": "file", **extra},
                )
            elif "user_id" in record:
                profile = UserProfile.model_validate(record)
            elif "need" in record:
                extra = {k: v for k, v in record.items() if k != "need"}
                profile = UserProfile(
                    user_id=str(record.get("conversation_id") or f"user-{number}"),
                    need=InformationNeed.model_validate(record["need"]),
                    metadata={"source": "file", **extra},
                )
            else:
                raise DataError(f"{self.path}: record {number}: expected 'user_id' (a profile) or 'need'")
        except ValidationError as exc:
            raise DataError(describe_validation_error(exc, source=f"{self.path}: record {number}")) from None
        if profile.persona is None and self.persona is not None:
            profile.persona = self.persona
        return read_only_history(self._resolved(profile))

    def _resolved(self, profile: UserProfile) -> UserProfile:
        """Fill in collection IDs of title-only targets and seen items."""
        if self.items is None:
            return profile
        profile.need.targets = [self.items.resolve(t) for t in profile.need.targets]
        for seen in profile.seen_items:
            seen.item = self.items.resolve(seen.item)
        return profile


def _profile_file(path: Path) -> Path:
    if path.is_dir():
        for name in PROFILE_FILES:
            if (path / name).is_file():
                return path / name
        raise ConfigError(f"profiles.path {path}: no {' or '.join(PROFILE_FILES)} in this folder")
    if not path.is_file():
        raise ConfigError(f"profiles.path {path}: file not found")
    return path


_SOURCES: dict[str, Callable[[ProfilesConfig, RunContext], ProfileSource]] = {
    "generate": lambda config, context: GeneratedProfiles(config, context.items, context.ratings),
    "file": lambda config, context: FileProfiles(config, context.items),
}


def build_profile_source(config: ProfilesConfig, context: RunContext) -> ProfileSource:
    """The profile source named by `config.source`."""
    try:
        factory = _SOURCES[config.source]
    except KeyError:
        raise ConfigError(f"profiles.source: unknown source {config.source!r}; known: {', '.join(_SOURCES)}") from None
    return factory(config, context)
