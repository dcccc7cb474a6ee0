"""What a simulated user wants and likes: information need, preferences, persona, seen items."""

from __future__ import annotations

import csv
import hashlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from usersimcrs.core.item_ref import ItemRef
from usersimcrs.errors import DataError

if TYPE_CHECKING:  # pragma: no cover
    from usersimcrs.core.items import ItemCollection


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class InformationNeed(_Model):
    """Constraints (slot -> value), requests (slots to learn) and target items (003 §4.1)."""

    constraints: dict[str, str] = Field(default_factory=dict)
    requests: list[str] = Field(default_factory=list)
    targets: list[ItemRef] = Field(default_factory=list)


class Preferences(_Model):
    """Item- and slot-level preferences in [-1, 1], plus PEPPER-style text preferences."""

    items: dict[str, float] = Field(default_factory=dict)
    slots: dict[str, dict[str, float]] = Field(default_factory=dict)
    likes: list[str] = Field(default_factory=list)
    dislikes: list[str] = Field(default_factory=list)
    narrative: str | None = None

    def item_preference(self, item_id: str | None) -> float | None:
        return None if item_id is None else self.items.get(item_id)

    def slot_preference(self, slot: str, value: str) -> float | None:
        return self.slots.get(slot, {}).get(value)


class Persona(_Model):
    """Structured persona fields rendered into prompts (e.g. age, occupation, style)."""

    fields: dict[str, str] = Field(default_factory=dict)

    def render(self) -> str:
        return "\n".join(f"- {key}: {value}" for key, value in self.fields.items())


class SeenItem(_Model):
    """An item the user has consumed, with their rating and review when known."""

    item: ItemRef
    rating: float | None = None
    review: str | None = None


class UserProfile(_Model):
    """Everything a simulator knows about the user it plays."""

    user_id: str
    need: InformationNeed = Field(default_factory=InformationNeed)
    preferences: Preferences = Field(default_factory=Preferences)
    persona: Persona | None = None
    seen_items: list[SeenItem] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)

    def seen_ids(self) -> set[str]:
        return {s.item.id for s in self.seen_items if s.item.id is not None}


class ReadOnlyList(list[Any]):
    """A list shared by several profiles (a user's seen items, across that user's conversations):
    reading works as for a list, changing raises. Pydantic serialises it as a list; a copy
    (`copy.deepcopy`, pickle, `model_copy(deep=True)`) is a plain, changeable list.

    Since it cannot change, it also keeps its serialised forms once computed (`forms`): the JSON of
    a profile's seen items and their compact form, which `profile_id` and `compact_profile` would
    otherwise redo for every conversation (a Python serialiser call per item).
    """

    def __init__(self, values: Any = ()) -> None:
        super().__init__(values)
        self.forms: dict[Any, Any] = {}

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("this list is shared by several conversations' profiles and read-only; copy it to change it")

    append = extend = insert = pop = remove = clear = sort = reverse = _refuse
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse

    def __reduce__(self) -> Any:
        return (list, (list(self),))


class ReadOnlyDict(dict[Any, Any]):
    """A mapping shared by several profiles: reading works as for a dict, changing raises."""

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("this dict is shared by several conversations' profiles and read-only; copy it to change it")

    __setitem__ = __delitem__ = __ior__ = clear = pop = popitem = setdefault = update = _refuse

    def __reduce__(self) -> Any:
        return (dict, (dict(self),))


def profile_json(profile: UserProfile) -> bytes:
    """`profile.model_dump_json()` as bytes. With read-only seen items (one user's, shared by their
    conversations) the user's part (preferences, persona, seen items) is serialised once and
    reused while the profile holds the same objects; only user ID, need and metadata are per call.
    Every piece is cut out of pydantic's own serialisation of the model, so the bytes are the same."""
    seen = profile.seen_items
    if not isinstance(seen, ReadOnlyList):
        return profile.__pydantic_serializer__.to_json(profile)
    serializer = UserProfile.__pydantic_serializer__
    blank = UserProfile(
        user_id=""
    )  # copies of it with fields set (`model_construct` costs more: it inspects factories)
    empty = serializer.to_json(blank)  # '{"user_id":"","need":{...}' ... '}'
    need_end = empty.index(b',"preferences":')  # the fixed pieces of an empty profile, by position
    metadata_start = empty.rindex(b',"metadata":')
    cached = seen.forms.get("middle")
    if cached is None or cached[0] is not profile.preferences or cached[1] is not profile.persona:
        whole = serializer.to_json(
            blank.model_copy(
                update={"preferences": profile.preferences, "persona": profile.persona, "seen_items": seen}
            )
        )
        cached = seen.forms["middle"] = (
            profile.preferences,
            profile.persona,
            whole[need_end : -(len(empty) - metadata_start)],
        )
    head = serializer.to_json(blank.model_copy(update={"user_id": profile.user_id, "need": profile.need}))
    tail = serializer.to_json(blank.model_copy(update={"metadata": profile.metadata}))
    return head[: len(head) - (len(empty) - need_end)] + cached[2] + tail[metadata_start:]


def profile_id(profile: UserProfile) -> str:
    """The profile's stable ID: the first 16 hex digits of the SHA-256 of its JSON.

    The JSON is the model's own (`model_dump_json`: field order fixed by the model, mapping keys in
    the order they were built), so the same profile gets the same ID in any run and any process,
    and a run stores each distinct profile once. Hashing it costs about as much as dumping it once
    (~1 ms for a 100 KB profile); sorting keys for a key-order-free form cost ~4x that per
    conversation. Two equal profiles whose mappings were built in another order get two IDs: a
    duplicate line, never a wrong profile.
    """
    return hashlib.sha256(profile_json(profile)).hexdigest()[:16]


class ProfileRecord(_Model):
    """One line of a run's `profiles.jsonl`: a profile under its `profile_id`, stored compactly.

    `profile` is the profile's JSON without default values, where an item reference that the run's
    item collection restores exactly (same ID and title, nothing else) is written as its bare ID
    string; `expand_profile` turns it back into the `UserProfile`. Other references keep their fields.
    """

    profile_id: str
    profile: dict[str, Any]


def _is_collection_ref(ref: ItemRef, items: ItemCollection | None) -> bool:
    """Whether `ref` is exactly the collection's `Item.ref()` (ID and title, nothing else set)."""
    item = items.get(ref.id) if items is not None and ref.id is not None else None
    return (
        item is not None
        and ref.title == item.title
        and ref.score is None
        and ref.raw is None
        and ref.resolution is None
        and not ref.candidates
    )


def compact_profile(profile: UserProfile, items: ItemCollection | None) -> dict[str, Any]:
    """The profile's JSON for `profiles.jsonl`: defaults left out, collection items by ID (see ProfileRecord)."""
    shared = profile.seen_items if isinstance(profile.seen_items, ReadOnlyList) else None
    if shared is not None:  # the user's part (seen items, preferences, persona): compacted once, then reused
        own = profile.model_copy(update={"seen_items": [], "preferences": Preferences(), "persona": None})
        data = own.model_dump(mode="json", exclude_defaults=True)  # user ID, need, metadata
        forms = shared.forms.get("compact")
        if forms is None or forms[0] is not items:
            forms = shared.forms["compact"] = (items, _compact_seen(shared, items))
        user = shared.forms.get("compact_user")
        if user is None or user[0] is not profile.preferences or user[1] is not profile.persona:
            user = shared.forms["compact_user"] = (
                profile.preferences,
                profile.persona,
                _user_fields(profile.preferences, profile.persona),
            )
        # each field in its place: preferences and persona after the need, then seen items, before metadata
        data = _insert_before(data, "metadata", [*user[2], *([("seen_items", forms[1])] if forms[1] else [])])
    else:
        data = profile.model_dump(mode="json", exclude_defaults=True)
        if items is not None and data.get("seen_items"):
            data["seen_items"] = _compact_seen(profile.seen_items, items, data["seen_items"])
    if items is None:
        return data
    targets = data.get("need", {}).get("targets")
    if targets:
        data["need"]["targets"] = [
            ref.id if _is_collection_ref(ref, items) else raw for ref, raw in zip(profile.need.targets, targets)
        ]
    return data


def _user_fields(preferences: Preferences, persona: Persona | None) -> tuple[tuple[str, Any], ...]:
    """The JSON of a profile's preferences and persona as `compact_profile` stores them (a field equal to
    its default left out, as `exclude_defaults` leaves it out)."""
    dumped = UserProfile.model_construct(user_id="", preferences=preferences, persona=persona).model_dump(
        mode="json", exclude_defaults=True, include={"preferences", "persona"}
    )
    return tuple((key, dumped[key]) for key in ("preferences", "persona") if key in dumped)


def _compact_seen(seen: list[SeenItem], items: ItemCollection | None, dumped: list[Any] | None = None) -> list[Any]:
    """The seen items as `profiles.jsonl` stores them (collection items by bare ID)."""
    if dumped is None:
        dumped = [s.model_dump(mode="json", exclude_defaults=True) for s in seen]
    if items is None:
        return dumped
    for item, raw in zip(seen, dumped):
        if _is_collection_ref(item.item, items):
            raw["item"] = item.item.id
    return dumped


def _insert_before(data: dict[str, Any], before: str, fields: list[tuple[str, Any]]) -> dict[str, Any]:
    """`data` with `fields` added, in order, just before `before` (at the end when `before` is absent)."""
    if before not in data:
        return {**data, **dict(fields)}
    out: dict[str, Any] = {}
    for name, existing in data.items():
        if name == before:
            out.update(fields)
        out[name] = existing
    return out


def has_item_ids(data: dict[str, Any]) -> bool:
    """Whether a stored profile refers to items by bare ID (so reading it back wants the item collection)."""
    targets = (data.get("need") or {}).get("targets") or []
    return any(isinstance(t, str) for t in targets) or any(
        isinstance(s.get("item"), str) for s in data.get("seen_items") or []
    )


def expand_profile(data: dict[str, Any], items: ItemCollection | None) -> UserProfile:
    """The `UserProfile` of a stored profile: bare item IDs become the collection's references.

    An ID the collection lacks (or no collection at all, e.g. its file was moved) reads as an
    ID-only reference: matching by ID still works, the title is unknown.
    """

    def ref(value: Any) -> Any:
        if not isinstance(value, str):
            return value
        item = items.get(value) if items is not None else None
        return item.ref() if item is not None else ItemRef(id=value)

    data = dict(data)
    if isinstance(data.get("need"), dict) and data["need"].get("targets"):
        data["need"] = {**data["need"], "targets": [ref(t) for t in data["need"]["targets"]]}
    if data.get("seen_items"):
        data["seen_items"] = [
            {**s, "item": ref(s.get("item"))} if isinstance(s, dict) else s for s in data["seen_items"]
        ]
    return UserProfile.model_validate(data)


def profile_record(profile: UserProfile, items: ItemCollection | None, pid: str | None = None) -> ProfileRecord:
    """The `profiles.jsonl` record of `profile` (`pid`: its ID when already computed)."""
    return ProfileRecord(profile_id=pid or profile_id(profile), profile=compact_profile(profile, items))


class Ratings:
    """User -> item -> rating, with the rating scale used to normalise into [-1, 1]."""

    def __init__(self, scale: tuple[float, float] = (0.5, 5.0)) -> None:
        self.scale = scale
        self._by_user: dict[str, dict[str, float]] = {}

    def add(self, user_id: str, item_id: str, rating: float) -> None:
        self._by_user.setdefault(str(user_id), {})[str(item_id)] = float(rating)

    def users(self) -> list[str]:
        return list(self._by_user)

    def of(self, user_id: str) -> dict[str, float]:
        """The ratings of one user (a copy; callers may not mutate the store)."""
        return dict(self._by_user.get(str(user_id), {}))

    def normalized(self, rating: float) -> float:
        """Map a rating from the scale onto [-1, 1]."""
        low, high = self.scale
        if high == low:
            return 0.0
        return max(-1.0, min(1.0, 2.0 * (rating - low) / (high - low) - 1.0))

    def count_by_item(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for items in self._by_user.values():
            for item_id in items:
                counts[item_id] = counts.get(item_id, 0) + 1
        return counts

    def __len__(self) -> int:
        return sum(len(v) for v in self._by_user.values())

    @classmethod
    def from_csv(
        cls,
        path: str | Path,
        *,
        user_column: str = "userId",
        item_column: str = "movieId",
        rating_column: str = "rating",
        scale: tuple[float, float] = (0.5, 5.0),
    ) -> Ratings:
        """Load MovieLens-style ratings (`userId,movieId,rating,timestamp`)."""
        ratings = cls(scale)
        path = Path(path)
        try:
            handle = path.open(newline="", encoding="utf-8")
        except OSError as exc:
            raise DataError(f"{path}: cannot read ratings file ({exc.strerror})") from exc
        with handle:
            reader = csv.DictReader(handle)
            for column in (user_column, item_column, rating_column):
                if column not in (reader.fieldnames or []):
                    raise DataError(f"{path}: missing column {column!r}")
            for line_no, row in enumerate(reader, start=2):
                try:
                    ratings.add(row[user_column], row[item_column], float(row[rating_column]))
                except (TypeError, ValueError) as exc:
                    raise DataError(f"{path}:{line_no}: bad rating {row.get(rating_column)!r}") from exc
        return ratings
