"""A run folder read into one typed handle: `Run` (dialogues, profiles, manifest, judgments).

Every command and the public API read run folders through `load_run`, so there is one reader:
`dialogues.jsonl` (a torn last line from a crash is ignored), `profiles.jsonl` (each distinct user
profile once; dialogue lines name theirs by `profile_id` and get it attached here; older lines that
embed the profile read as they are), `manifest.json` (typed sections, unknown sections kept) and
`judgments.jsonl`. Dialogues, profiles and judgments are read on first access.
"""

from __future__ import annotations

import json
import logging
import re
from functools import cached_property
from pathlib import Path
from typing import Any, Iterator

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from usersimcrs.core.dialogue import Dialogue
from usersimcrs.core.items import ItemCollection
from usersimcrs.core.jsonl import JsonlWriter, iter_jsonl, read_models
from usersimcrs.core.profile import ProfileRecord, UserProfile, expand_profile, has_item_ids, profile_id, profile_record
from usersimcrs.core.validation import describe_validation_error, validate
from usersimcrs.errors import DataError

logger = logging.getLogger(__name__)

DIALOGUES = "dialogues.jsonl"
JUDGMENTS = "judgments.jsonl"
MANIFEST = "manifest.json"
PROFILES = "profiles.jsonl"
PROFILE_CACHE = 64  # profiles kept while streaming dialogues (`Run.iter_dialogues`)
_ID_PREFIX = re.compile(rb'^\{"profile_id":"([^"\\]+)"')


class _Section(BaseModel):
    """A manifest section: known fields typed, sections other tools add are kept as they are."""

    model_config = ConfigDict(extra="allow")


class DialogueCounts(_Section):
    """How many conversations of the run ended ok or failed (as written to dialogues.jsonl)."""

    completed: int = 0
    failed: int = 0


class Timings(_Section):
    """Wall time summed over the sessions (invocations) that wrote the run."""

    wall_s: float = 0.0
    sessions: int = 0


class Manifest(_Section):
    """`manifest.json`: what ran, with which config (secrets removed), versions, seeds, usage, timings.

    `config` is the validated run config as written (a plain mapping, so the reader does not depend
    on the config classes of the layers above); `llm` and `judges` hold token and call accounting.
    """

    name: str | None = None
    status: str | None = None
    config: dict[str, Any] = Field(default_factory=dict)
    config_hash: str | None = None
    seeds: dict[str, Any] = Field(default_factory=dict)
    models: dict[str, Any] = Field(default_factory=dict)
    environment: dict[str, Any] = Field(default_factory=dict)
    created: str | None = None
    dialogues: DialogueCounts = Field(default_factory=DialogueCounts)
    llm: dict[str, Any] = Field(default_factory=dict)
    timings: Timings = Field(default_factory=Timings)
    judges: dict[str, Any] = Field(default_factory=dict)
    metrics: dict[str, Any] = Field(default_factory=dict)

    @property
    def simulator(self) -> str | None:
        """The simulator type that produced the conversations (None when unknown)."""
        return _plugin_type(self.config.get("simulator"))

    @property
    def crs(self) -> str | None:
        """The CRS (connector type) the conversations were held with (None when unknown)."""
        return _plugin_type(self.config.get("crs"))

    @property
    def seed(self) -> int:
        """The run seed (0 when the manifest does not say)."""
        value = self.seeds.get("run", self.config.get("seed", 0))
        try:
            return int(value or 0)
        except (TypeError, ValueError):
            return 0


def _plugin_type(section: Any) -> str | None:
    if isinstance(section, dict) and section.get("type") is not None:
        return str(section["type"])
    return None


def read_manifest_file(run_dir: str | Path) -> Manifest:
    """The run's manifest (an empty one when the folder has none); bad JSON is a DataError naming the file."""
    path = Path(run_dir) / MANIFEST
    if not path.exists():
        return Manifest()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DataError(f"{path}: not a readable JSON manifest ({exc})") from None
    if not isinstance(data, dict):
        raise DataError(f"{path}: expected a JSON object")
    return validate(Manifest, data, source=str(path), error=DataError)


class Run:
    """A run folder: its path, typed manifest, dialogues and judgment records (read lazily)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"Run({str(self.path)!r})"

    @cached_property
    def manifest(self) -> Manifest:
        """The run's manifest (read once; call `refresh()` after another command changed it)."""
        return read_manifest_file(self.path)

    @cached_property
    def dialogues(self) -> list[Dialogue]:
        """Every conversation of the run, in file order, each with its profile attached."""
        dialogues = read_models(self.path / DIALOGUES, Dialogue)
        if any(d.profile is None and d.profile_id is not None for d in dialogues):
            profiles = self.profiles
            for dialogue in dialogues:
                self._attach(dialogue, profiles.get)
        return dialogues

    @cached_property
    def profiles(self) -> dict[str, UserProfile]:
        """The run's distinct user profiles by `profile_id` (empty for a run whose lines embed them)."""
        out: dict[str, UserProfile] = {}
        for number, record in enumerate(iter_jsonl(self.path / PROFILES), start=1):
            stored = self._record(record, number)
            if stored.profile_id not in out:  # a repeated ID holds the same profile: the first one is kept
                out[stored.profile_id] = self._expand(stored, number)
        return out

    @cached_property
    def items(self) -> ItemCollection | None:
        """The item collection the run used, as its manifest names it (None when absent or unreadable).

        Stored profiles refer to collection items by ID; this restores their titles on read.
        """
        return items_from_section(self.manifest.config.get("items"))

    @cached_property
    def judgments(self) -> list[dict[str, Any]]:
        """The judgment records of `judgments.jsonl` (empty when the run was not judged)."""
        return list(iter_jsonl(self.path / JUDGMENTS))

    def iter_dialogues(self) -> Iterator[Dialogue]:
        """Stream the conversations (profiles attached) without keeping them all in memory.

        Profiles are read from `profiles.jsonl` by offset when first needed; the last
        `PROFILE_CACHE` of them are kept, so memory stays bounded by that, not by the run.
        """
        cache: dict[str, UserProfile | None] = {}

        def lookup(pid: str) -> UserProfile | None:
            if pid not in cache:
                if len(cache) >= PROFILE_CACHE:
                    cache.pop(next(iter(cache)))
                cache[pid] = self._profile_at(pid)
            return cache[pid]

        for record in iter_jsonl(self.path / DIALOGUES):
            yield self._attach(Dialogue.model_validate(record), lookup)

    def profile(self, profile_id: str) -> UserProfile | None:
        """One stored profile by ID, read on its own (None when `profiles.jsonl` lacks it)."""
        if "profiles" in self.__dict__:
            return self.profiles.get(profile_id)
        return self._profile_at(profile_id)

    def refresh(self) -> Run:
        """Forget what was read, so the next access sees the files as they are now."""
        for name in ("manifest", "dialogues", "judgments", "profiles", "items", "_profile_offsets"):
            self.__dict__.pop(name, None)
        return self

    def _attach(self, dialogue: Dialogue, lookup: Any) -> Dialogue:
        if dialogue.profile is None and dialogue.profile_id is not None:
            dialogue.profile = lookup(dialogue.profile_id)
            if dialogue.profile is None:
                logger.warning(
                    "%s: conversation %s names profile %s, which %s lacks",
                    self.path,
                    dialogue.conversation_id,
                    dialogue.profile_id,
                    PROFILES,
                )
        return dialogue

    @cached_property
    def _profile_offsets(self) -> dict[str, int]:
        """profile_id -> byte offset of its line (the first one), read without parsing the profiles."""
        path = self.path / PROFILES
        offsets: dict[str, int] = {}
        if not path.exists():
            return offsets
        with path.open("rb") as handle:
            offset = 0
            for raw in handle:
                match = _ID_PREFIX.match(raw) if raw.endswith(b"\n") else None  # a torn tail must parse
                pid = match.group(1).decode() if match else _record_id(raw)
                if pid is not None:
                    offsets.setdefault(pid, offset)
                offset += len(raw)
        return offsets

    def _profile_at(self, profile_id: str) -> UserProfile | None:
        offset = self._profile_offsets.get(profile_id)
        if offset is None:
            return None
        with (self.path / PROFILES).open("rb") as handle:
            handle.seek(offset)
            raw = handle.readline()
        return self._expand(self._record(json.loads(raw), None), None)

    def _record(self, record: dict[str, Any], number: int | None) -> ProfileRecord:
        source = f"{self.path / PROFILES}" + (f": record {number}" if number is not None else "")
        return validate(ProfileRecord, record, source=source, error=DataError)

    def _expand(self, stored: ProfileRecord, number: int | None) -> UserProfile:
        try:
            return expand_profile(stored.profile, self.items if has_item_ids(stored.profile) else None)
        except ValidationError as exc:
            where = f"{self.path / PROFILES}: " + (
                f"record {number}" if number is not None else f"profile {stored.profile_id}"
            )
            raise DataError(describe_validation_error(exc, source=where)) from exc

    @property
    def name(self) -> str:
        return self.manifest.name or self.path.name

    @property
    def simulator(self) -> str | None:
        return self.manifest.simulator

    @property
    def crs(self) -> str | None:
        return self.manifest.crs

    @property
    def seed(self) -> int:
        return self.manifest.seed


class ProfileWriter:
    """Appends each distinct profile of a run once to its `profiles.jsonl` (whole-line appends).

    `detach(dialogue)` writes the dialogue's profile when its ID is not in the file yet and returns
    the dialogue to write without it. The profile line goes first, so a crash between the two
    leaves an unreferenced profile (reused when the conversation runs again), never a dangling
    reference; a resumed run reads the IDs already there and never writes one twice. `items`: the
    run's collection, whose items are then stored by ID.
    """

    def __init__(self, run_dir: str | Path, items: ItemCollection | None = None) -> None:
        self.items = items
        self._writer = JsonlWriter(Path(run_dir) / PROFILES)  # cuts a torn last line first
        self._stored = {str(r["profile_id"]) for r in iter_jsonl(self._writer.path) if "profile_id" in r}

    def detach(self, dialogue: Dialogue) -> Dialogue:
        """Store the dialogue's profile (once per ID); the returned copy names it by `profile_id` only.

        The ID is computed here from the profile itself, so it always matches the content stored.
        """
        if dialogue.profile is None:
            return dialogue
        pid = profile_id(dialogue.profile)
        if pid not in self._stored:
            self._writer.write(profile_record(dialogue.profile, self.items, pid))
            self._stored.add(pid)
        return dialogue.model_copy(update={"profile": None, "profile_id": pid})

    def close(self) -> None:
        self._writer.close()

    def __enter__(self) -> ProfileWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _record_id(raw: bytes) -> str | None:
    """The `profile_id` of a profiles.jsonl line not in our key order, or without its newline (None if torn)."""
    try:
        record = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    return str(record["profile_id"]) if isinstance(record, dict) and record.get("profile_id") is not None else None


def items_from_section(section: Any) -> ItemCollection | None:
    """The item collection a manifest's `config.items` names (path, else fallback_path); None when unreadable.

    The tolerant twin of the engine's `load_items`: a reader must open a run whose data moved.
    """
    if not isinstance(section, dict):
        return None
    for key in ("path", "fallback_path"):
        path = section.get(key)
        if not path or not Path(path).exists():
            continue
        try:
            items = ItemCollection.from_csv(
                path,
                id_column=section.get("id_column") or "movieId",
                title_column=section.get("title_column") or "title",
                mapping=section.get("mapping"),
                delimiters=section.get("delimiters") or {},
            )
        except DataError as exc:
            logger.warning("cannot read the run's items (%s): stored profiles keep item IDs only", exc)
            return None
        max_items = section.get("max_items")
        return ItemCollection(list(items)[: int(max_items)]) if max_items is not None else items
    logger.warning("the run's item file is not found (%s): stored profiles keep item IDs only", section.get("path"))
    return None


def load_run(path: str | Path) -> Run:
    """Open a run folder; a folder without `dialogues.jsonl` is a DataError naming it."""
    run = Run(path)
    if not (run.path / DIALOGUES).exists():
        raise DataError(f"{run.path}: no {DIALOGUES} here (not a run folder?)")
    return run


__all__ = [
    "DIALOGUES",
    "JUDGMENTS",
    "MANIFEST",
    "PROFILES",
    "DialogueCounts",
    "Manifest",
    "ProfileWriter",
    "Run",
    "Timings",
    "items_from_section",
    "load_run",
    "read_manifest_file",
]
