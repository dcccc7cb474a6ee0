"""The run folder's one owner: `RunFolder` knows its file names and does every read and write of them.

A run folder holds `dialogues.jsonl` (one conversation per line, appended as each ends),
`profiles.jsonl` (each distinct user profile once; dialogue lines name theirs by `profile_id`),
`judgments.jsonl`, `manifest.json`, the metric tables, `import_report.json` and the HTML report.
The engine, judges, scoring, import, converters, export and report go through `RunFolder`; no other
module names these files or writes into the folder. Writers take the folder's OS-level lock
(`RunFolder.lock`, one writer at a time); every write is whole or not at all (`core/storage.py`).

`Run` is the typed read handle over a folder (what `load_run` and the public API return): the
manifest (typed sections, unknown sections kept), the dialogues with their profiles attached (a
torn last line from a crash is ignored), the judgment records; each read on first access. A file
in which a conversation ID repeats is refused with the count (`DuplicateConversations`) unless the
reader asks to keep the first line of each ID (`duplicates="first"`).
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any, Iterator, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from usersimcrs.core.dialogue import Dialogue
from usersimcrs.core.dialogue_text import DialogueText, decode_line
from usersimcrs.core.generation import user_turn_kinds
from usersimcrs.core.items import ItemCollection
from usersimcrs.core.jsonl import JsonlWriter, iter_jsonl, write_jsonl
from usersimcrs.core.manifest import scrub_secrets
from usersimcrs.core.owned_folder import FolderFile, OwnedFolder, read_json_object
from usersimcrs.core.profile import ProfileRecord, UserProfile, expand_profile, has_item_ids, profile_id, profile_record
from usersimcrs.core.shared_resources import SharedResources
from usersimcrs.core.storage import is_storage_failure, remove_files, storage_error, write_atomic
from usersimcrs.core.validation import describe_validation_error, validate
from usersimcrs.errors import DataError

logger = logging.getLogger(__name__)

DIALOGUES = "dialogues.jsonl"
JUDGMENTS = "judgments.jsonl"
MANIFEST = "manifest.json"
PROFILES = "profiles.jsonl"
METRICS = "metrics.csv"
METRICS_SUMMARY = "metrics_summary.csv"
METRICS_BY_TURN = "metrics_by_turn.csv"
IMPORT_REPORT = "import_report.json"
PROFILE_CACHE = 64  # profiles kept while streaming dialogues (`Run.iter_dialogues`)
_ID_PREFIX = re.compile(rb'^\{"profile_id":"([^"\\]+)"')
_CONVERSATION_ID = re.compile(rb'^\{"conversation_id":"((?:[^"\\]|\\.)*)"')
Duplicates = Literal["refuse", "first"]
"""What a reader does with a conversation ID on more than one line: refuse the file, or keep the first."""


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


class DuplicateConversations(DataError):
    """A dialogues file in which conversation IDs repeat: refused, since every figure would count them twice."""

    def __init__(self, path: Path, repeated: Counter[str]) -> None:
        self.path = path
        self.repeated_ids = len(repeated)
        self.extra_lines = sum(n - 1 for n in repeated.values())
        example = next(iter(repeated))
        super().__init__(
            f"{path}: {self.repeated_ids} conversation ID(s) occur on more than one line "
            f"({self.extra_lines} repeated line(s), e.g. {example!r} x{repeated[example]}); no figure may count "
            "a conversation twice: keep the first line of each ID with --dedupe"
        )


class RunFolder(OwnedFolder):
    """A run folder on disk: where its files are, and every read and write of them (writers hold `lock()`)."""

    # ------------------------------------------------------------ where things are

    dialogues_path = FolderFile(DIALOGUES)
    profiles_path = FolderFile(PROFILES)
    judgments_path = FolderFile(JUDGMENTS)
    manifest_path = FolderFile(MANIFEST)
    import_report_path = FolderFile(IMPORT_REPORT)

    @property
    def metrics_paths(self) -> tuple[Path, Path, Path]:
        """(per conversation, summary, per turn) metric tables."""
        return (self.path / METRICS, self.path / METRICS_SUMMARY, self.path / METRICS_BY_TURN)

    def has_dialogues(self) -> bool:
        """True when the folder holds a dialogues file (it is a run folder)."""
        return self.dialogues_path.exists()

    def has_run(self) -> bool:
        """True when the folder holds at least one written conversation."""
        return self.dialogues_path.exists() and self.dialogues_path.stat().st_size > 0

    # ------------------------------------------------------------ manifest

    def read_manifest(self) -> dict[str, Any]:
        """The manifest as a plain mapping (empty when the folder has none)."""
        return read_json_object(self.manifest_path, "not a readable JSON manifest") or {}

    def manifest(self) -> Manifest:
        """The manifest, typed (an empty one when the folder has none); bad JSON is a DataError naming the file."""
        return validate(Manifest, self.read_manifest(), source=str(self.manifest_path), error=DataError)

    def write_manifest(self, manifest: dict[str, Any]) -> None:
        """Replace the manifest atomically (values under secret-looking keys removed)."""
        text = json.dumps(scrub_secrets(manifest), indent=2, sort_keys=False, default=str)
        write_atomic(self.manifest_path, text)

    def update_manifest(self, patch: dict[str, Any]) -> dict[str, Any]:
        """Deep-merge `patch` into the manifest and write it back; returns the merged manifest."""
        merged = _deep_merge(self.read_manifest(), patch)
        self.write_manifest(merged)
        return merged

    # ------------------------------------------------------------ dialogues

    def dialogue_writer(self) -> JsonlWriter:
        """An appender of whole dialogue lines (a torn last line of a crash is cut first)."""
        return JsonlWriter(self.dialogues_path)

    def profile_writer(self, items: ItemCollection | None = None) -> ProfileWriter:
        """An appender of each distinct profile, once (see `ProfileWriter`)."""
        return ProfileWriter(self.profiles_path, items)

    def dialogue_records(self) -> Iterator[dict[str, Any]]:
        """The dialogue lines as plain mappings, streamed (a torn last line is ignored)."""
        return iter_jsonl(self.dialogues_path)

    def dialogue_spans(self, parts: int) -> list[tuple[int, int]]:
        """The dialogue file cut into at most `parts` byte ranges of whole lines, about equal in size, so
        that several processes can each read one (`dialogue_texts(span)`); empty without dialogues."""
        path = self.dialogues_path
        size = path.stat().st_size if path.exists() else 0
        cuts = [0]
        with path.open("rb") if size else open(os.devnull, "rb") as handle:
            for k in range(1, max(1, parts)):
                handle.seek(max(size * k // parts, cuts[-1]))
                handle.readline()  # to the start of the next line
                if cuts[-1] < handle.tell() < size:
                    cuts.append(handle.tell())
        return list(zip(cuts, [*cuts[1:], size])) if size else []

    def dialogue_texts(self, span: tuple[int, int] | None = None) -> Iterator[DialogueText]:
        """The dialogue lines (of one byte range from `dialogue_spans`, or all) as `DialogueText`: IDs,
        status, speakers, texts, items, acts and turn indices only, decoded without the rest (the fast
        path for scoring large runs). A torn last line is ignored; a line that is not a dialogue is a
        DataError naming the file."""
        path = self.dialogues_path
        if not path.exists():
            return
        start, end = span if span is not None else (0, path.stat().st_size)
        with path.open("rb") as handle:
            handle.seek(start)
            position = start
            for raw in handle:
                position += len(raw)
                if raw.strip():
                    try:
                        yield decode_line(raw, str(path))
                    except ValueError as exc:  # not JSON (DataError, a bad dialogue, is not caught here)
                        if not raw.endswith(b"\n"):
                            return  # a torn last line (only the last line can lack its newline)
                        raise DataError(f"{path}: byte {position - len(raw)}: not a dialogue line ({exc})") from None
                if position >= end:
                    return

    def conversation_ids(self) -> list[str]:
        """The conversation ID of every dialogue line, in file order (repeats included)."""
        path = self.dialogues_path
        ids: list[str] = []
        if not path.exists():
            return ids
        with path.open("rb") as handle:
            for raw in handle:
                match = _CONVERSATION_ID.match(raw) if raw.endswith(b"\n") else None
                if match is not None:
                    ids.append(json.loads(b'"' + match.group(1) + b'"'))
                    continue
                record = _parse_line(raw)
                if record is not None and record.get("conversation_id") is not None:
                    ids.append(str(record["conversation_id"]))
        return ids

    def repeated_ids(self) -> Counter[str]:
        """Conversation IDs on more than one line, with their line counts (empty: every ID once)."""
        counts = Counter(self.conversation_ids())
        return Counter({cid: n for cid, n in counts.items() if n > 1})

    def check_unique(self) -> None:
        """Raise `DuplicateConversations` (with the count) when a conversation ID repeats."""
        repeated = self.repeated_ids()
        if repeated:
            raise DuplicateConversations(self.dialogues_path, repeated)

    def stored_ids(self) -> set[str]:
        """IDs already written (a torn last line from a crash is ignored)."""
        return set(self.conversation_ids())

    def failed_ids(self) -> set[str]:
        """IDs of the failed conversations written."""
        return {
            str(rec["conversation_id"])
            for rec in self.dialogue_records()
            if rec.get("status") != "ok" and "conversation_id" in rec
        }

    def dialogue_counts(self) -> dict[str, Any]:
        """Completed and failed conversations (each ID once), the recommended titles left ambiguous, and
        the user turns by where their words came from (`user_turns`: the model's, repaired, fallback,
        template; usersimcrs.core.generation) with the conversations that hold a fallback turn."""
        counts: dict[str, Any] = {"completed": 0, "failed": 0, "ambiguous_items": 0, "conversations_with_fallback": 0}
        turns = dict.fromkeys(("labelled", "model", "repaired", "fallback", "template"), 0)
        seen: set[str] = set()
        for rec in self.dialogue_records():
            cid = str(rec.get("conversation_id"))
            if cid in seen:
                continue
            seen.add(cid)
            counts["completed" if rec.get("status") == "ok" else "failed"] += 1
            kinds = user_turn_kinds(rec.get("utterances", []))
            turns = {kind: turns[kind] + kinds[kind] for kind in turns}
            counts["conversations_with_fallback"] += int(kinds["fallback"] > 0)
            counts["ambiguous_items"] += sum(
                1
                for utt in rec.get("utterances", [])
                for item in utt.get("items", [])
                if item.get("resolution") == "ambiguous"
            )
        counts["user_turns"] = turns
        return counts

    def drop_failed(self) -> set[str]:
        """Rewrite the dialogues without failed records (see `compact`); returns their IDs."""
        return self.compact(drop_failed=True)

    def compact(self, *, drop_failed: bool) -> set[str]:
        """Rewrite the dialogues without a torn last line and with each ID once (its first line), and
        without the failed records when `drop_failed`.

        Kept lines are copied byte for byte into a temp file that replaces the file atomically
        (`os.replace`), so a reader sees either the old file or the new one, never a mix, and a crash
        or a full disk mid-rewrite leaves the old file whole. Returns the IDs of the dropped failed records.
        """
        path = self.dialogues_path
        dropped: set[str] = set()
        seen: set[str] = set()
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            with path.open("rb") as source, tmp.open("wb") as target:
                for number, raw in enumerate(source, start=1):
                    if not raw.strip():
                        continue
                    try:
                        record = json.loads(raw)
                    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                        if not raw.endswith(b"\n"):  # a torn last line: never a complete record
                            break
                        raise DataError(f"{path}:{number}: not valid JSON ({exc})") from exc
                    cid = str(record.get("conversation_id")) if isinstance(record, dict) else None
                    if drop_failed and cid is not None and record.get("status") != "ok":
                        dropped.add(cid)
                        continue
                    if cid is not None and cid in seen:
                        continue
                    if cid is not None:
                        seen.add(cid)
                    target.write(raw if raw.endswith(b"\n") else raw + b"\n")
                target.flush()
                os.fsync(target.fileno())
            os.replace(tmp, path)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            if is_storage_failure(exc):
                raise storage_error(exc, path, None) from None
            raise
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        return dropped

    # ------------------------------------------------------------ judgments

    def judgment_records(self) -> list[dict[str, Any]]:
        """The judgment records (empty when the run was not judged)."""
        return list(iter_jsonl(self.judgments_path))

    def judgment_writer(self) -> JsonlWriter:
        """An appender of whole judgment lines."""
        return JsonlWriter(self.judgments_path)

    def mark_judged(self) -> None:
        """Leave a judgments file after a finished judging, even when it wrote no row."""
        try:
            self.judgments_path.touch(exist_ok=True)
        except OSError as exc:
            if is_storage_failure(exc):
                raise storage_error(exc, self.judgments_path, None) from None
            raise

    # ------------------------------------------------------------ metrics, reports, imports

    def has_metrics(self) -> bool:
        """True when all three metric tables are written."""
        return all(path.exists() for path in self.metrics_paths)

    def write_metrics(self, conversations_csv: str, summary_csv: str, by_turn_csv: str) -> list[Path]:
        """Replace the three metric tables together: all three are written whole before any replaces
        the old one, so a full disk leaves the old set (or none), never a mix; returns their paths."""
        paths = list(self.metrics_paths)
        with Staging() as staging:
            for path, text in zip(paths, (conversations_csv, summary_csv, by_turn_csv)):
                staging.write(path, text)
        return paths

    def write_import_report(self, text: str) -> Path:
        return write_atomic(self.import_report_path, text)

    def run_outputs(self) -> list[Path]:
        """Every file a run, an import or a later command writes (what `--overwrite` removes)."""
        return [
            self.dialogues_path,
            self.profiles_path,
            self.judgments_path,
            self.manifest_path,
            *self.metrics_paths,
            self.import_report_path,
        ]

    def clear(self) -> None:
        """Remove the run's files (for `--overwrite`); the folder and unrelated files stay."""
        remove_files(self.run_outputs())

    def write_dialogues(self, dialogues: Iterable[Dialogue]) -> Path:
        """Replace the dialogues file by `dialogues` as they are (a converted corpus), whole or not at all."""
        self.path.mkdir(parents=True, exist_ok=True)
        return write_jsonl(self.dialogues_path, dialogues)

    def replace_run(
        self,
        dialogues: Sequence[Dialogue],
        *,
        manifest: dict[str, Any],
        judgments: Sequence[BaseModel | dict[str, Any]] = (),
        import_report: str | None = None,
        items: ItemCollection | None = None,
    ) -> None:
        """Replace the run's files by these dialogues (profiles stored once), judgments, report and manifest.

        Every file is first written whole beside its target; only when all are written do they replace
        the old ones (and the old run's other outputs, such as its metrics, are removed). A failure on
        the way (a full disk) removes the staged files and leaves the folder as it was.
        """
        with Staging() as staging:
            with (
                JsonlWriter(staging.path_for(self.dialogues_path)) as writer,
                ProfileWriter(staging.path_for(self.profiles_path), items) as profiles,
            ):
                for dialogue in dialogues:
                    writer.write(profiles.detach(dialogue))
            if judgments:
                with JsonlWriter(staging.path_for(self.judgments_path)) as writer:
                    for record in judgments:
                        writer.write(record)
            if import_report is not None:
                staging.write(self.import_report_path, import_report)
            staging.write(self.manifest_path, json.dumps(scrub_secrets(manifest), indent=2, default=str))
            staging.skip_if_empty(self.profiles_path)  # no profile carried by the dialogues: no empty file
            remove_files([path for path in self.run_outputs() if path not in staging.targets])

    def write_json(self, path: Path, data: Any) -> Path:
        """Write a JSON document (e.g. a converter's side file) atomically."""
        return write_atomic(path, json.dumps(data, ensure_ascii=False, indent=1))


def _deep_merge(base: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in patch.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = value
    return out


class Staging:
    """Files written whole beside their targets, renamed over them together once all are written.

    Used as a context manager: leaving it normally renames every staged file over its target;
    leaving it with an error (a full disk) removes the staged files and leaves the targets as they were.
    """

    def __init__(self) -> None:
        self._pairs: list[tuple[Path, Path]] = []
        self._skip: set[Path] = set()

    @property
    def targets(self) -> set[Path]:
        return {target for _, target in self._pairs}

    def path_for(self, target: Path) -> Path:
        """Where the replacement of `target` is written (registered for the rename)."""
        staged = target.with_name(f".{target.name}.{os.getpid()}.staged")
        staged.unlink(missing_ok=True)
        self._pairs.append((staged, target))
        return staged

    def write(self, target: Path, data: str | bytes) -> None:
        write_atomic(self.path_for(target), data)

    def skip_if_empty(self, target: Path) -> None:
        """Do not create `target` when its staged file is empty (an existing one is removed)."""
        for staged, wanted in self._pairs:
            if wanted == target and staged.exists() and staged.stat().st_size == 0:
                self._skip.add(target)

    def __enter__(self) -> Staging:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is not None:
            remove_files([staged for staged, _ in self._pairs])
            return
        for staged, target in self._pairs:
            if target in self._skip:
                remove_files([staged, target])
            else:
                os.replace(staged, target)


def _parse_line(raw: bytes) -> dict[str, Any] | None:
    try:
        record = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    return record if isinstance(record, dict) else None


def read_manifest_file(run_dir: str | Path) -> Manifest:
    """The run's manifest (an empty one when the folder has none); bad JSON is a DataError naming the file."""
    return RunFolder(run_dir).manifest()


class Run:
    """A run folder: its path, typed manifest, dialogues and judgment records (read lazily).

    `duplicates`: a conversation ID on more than one line is refused (`DuplicateConversations`,
    the default) or only its first line is read (`"first"`; `dropped_duplicates` counts the others).
    `resources`: what the command reading several runs shares between them (the item collection, the
    metrics' models); a run read on its own gets its own.
    """

    def __init__(
        self, path: str | Path, *, duplicates: Duplicates = "refuse", resources: SharedResources | None = None
    ) -> None:
        self.path = Path(path)
        self.folder = RunFolder(self.path)
        self.duplicates: Duplicates = duplicates
        self.dropped_duplicates = 0
        self.resources = resources if resources is not None else SharedResources()

    def __repr__(self) -> str:
        return f"Run({str(self.path)!r})"

    @cached_property
    def manifest(self) -> Manifest:
        """The run's manifest (read once; call `refresh()` after another command changed it)."""
        return self.folder.manifest()

    @cached_property
    def dialogues(self) -> list[Dialogue]:
        """Every conversation of the run, in file order, each with its profile attached."""
        dialogues = list(self._validated(self.folder.dialogue_records()))
        if any(d.profile is None and d.profile_id is not None for d in dialogues):
            profiles = self.profiles
            for dialogue in dialogues:
                self._attach(dialogue, profiles.get)
        return dialogues

    @cached_property
    def profiles(self) -> dict[str, UserProfile]:
        """The run's distinct user profiles by `profile_id` (empty for a run whose lines embed them)."""
        out: dict[str, UserProfile] = {}
        for number, record in enumerate(iter_jsonl(self.folder.profiles_path), start=1):
            stored = self._record(record, number)
            if stored.profile_id not in out:  # a repeated ID holds the same profile: the first one is kept
                out[stored.profile_id] = self._expand(stored, number)
        return out

    @cached_property
    def items(self) -> ItemCollection | None:
        """The item collection the run used, as its manifest names it (None when absent or unreadable).

        Stored profiles refer to collection items by ID; this restores their titles on read.
        """
        return items_from_section(self.manifest.config.get("items"), self.resources)

    @cached_property
    def judgments(self) -> list[dict[str, Any]]:
        """The judgment records of `judgments.jsonl` (empty when the run was not judged)."""
        return self.folder.judgment_records()

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

        for dialogue in self._validated(self.folder.dialogue_records()):
            yield self._attach(dialogue, lookup)

    def _validated(self, records: Iterator[dict[str, Any]]) -> Iterator[Dialogue]:
        """Dialogues of the file, each ID once (the file is checked for repeated IDs before the first one)."""
        repeated = self.folder.repeated_ids()
        if repeated and self.duplicates == "refuse":
            raise DuplicateConversations(self.folder.dialogues_path, repeated)
        self.dropped_duplicates = sum(n - 1 for n in repeated.values())
        if repeated:
            logger.warning(
                "%s: %d conversation ID(s) on more than one line; kept the first line of each, left out %d",
                self.folder.dialogues_path,
                len(repeated),
                self.dropped_duplicates,
            )
        seen: set[str] = set()
        path = self.folder.dialogues_path
        for number, record in enumerate(records, start=1):
            try:
                dialogue = Dialogue.model_validate(record)
            except ValidationError as exc:
                raise DataError(describe_validation_error(exc, source=f"{path}: record {number}")) from exc
            if repeated and dialogue.conversation_id in seen:
                continue
            seen.add(dialogue.conversation_id)
            yield dialogue

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
                    self.folder.profiles_path.name,
                )
        return dialogue

    @cached_property
    def _profile_offsets(self) -> dict[str, int]:
        """profile_id -> byte offset of its line (the first one), read without parsing the profiles."""
        path = self.folder.profiles_path
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
        with self.folder.profiles_path.open("rb") as handle:
            handle.seek(offset)
            raw = handle.readline()
        return self._expand(self._record(json.loads(raw), None), None)

    def _record(self, record: dict[str, Any], number: int | None) -> ProfileRecord:
        source = f"{self.folder.profiles_path}" + (f": record {number}" if number is not None else "")
        return validate(ProfileRecord, record, source=source, error=DataError)

    def _expand(self, stored: ProfileRecord, number: int | None) -> UserProfile:
        try:
            return expand_profile(stored.profile, self.items if has_item_ids(stored.profile) else None)
        except ValidationError as exc:
            where = f"{self.folder.profiles_path}: " + (
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

    def __init__(self, path: str | Path, items: ItemCollection | None = None) -> None:
        self.items = items
        self._writer = JsonlWriter(path)  # cuts a torn last line first
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


def items_from_section(section: Any, resources: SharedResources | None = None) -> ItemCollection | None:
    """The item collection a manifest's `config.items` names (path, else fallback_path); None when unreadable.

    The tolerant twin of the engine's `load_items`: a reader must open a run whose data moved.
    `resources`: the command's shared resources, so runs naming the same file read it once.
    """
    if not isinstance(section, dict):
        return None
    resources = resources if resources is not None else SharedResources()
    for key in ("path", "fallback_path"):
        path = section.get(key)
        if not path or not Path(path).exists():
            continue
        max_items = section.get("max_items")
        try:
            return resources.items(
                path,
                id_column=section.get("id_column") or "movieId",
                title_column=section.get("title_column") or "title",
                mapping=section.get("mapping"),
                delimiters=section.get("delimiters") or {},
                max_items=int(max_items) if max_items is not None else None,
            )
        except DataError as exc:
            logger.warning("cannot read the run's items (%s): stored profiles keep item IDs only", exc)
            return None
    logger.warning("the run's item file is not found (%s): stored profiles keep item IDs only", section.get("path"))
    return None


def load_run(path: str | Path, *, duplicates: Duplicates = "refuse", resources: SharedResources | None = None) -> Run:
    """Open a run folder; a folder without dialogues is a DataError naming it.

    `duplicates="first"` reads a file whose conversation IDs repeat by keeping the first line of each;
    `resources`: what the command shares between the runs it reads (see `Run`).
    """
    run = Run(path, duplicates=duplicates, resources=resources)
    if not run.folder.has_dialogues():
        raise DataError(f"{run.path}: no {DIALOGUES} here (not a run folder?)")
    return run


__all__ = [
    "DIALOGUES",
    "JUDGMENTS",
    "MANIFEST",
    "PROFILES",
    "DialogueCounts",
    "DuplicateConversations",
    "Duplicates",
    "Manifest",
    "ProfileWriter",
    "Run",
    "RunFolder",
    "Timings",
    "items_from_section",
    "load_run",
    "read_manifest_file",
]
