"""Run configuration: YAML validated by pydantic, errors as one line naming the file and key."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from usersimcrs.core.json_types import ConfigSection
from usersimcrs.core.validation import validate
from usersimcrs.core.yaml_io import parse_yaml, read_yaml
from usersimcrs.errors import ConfigError
from usersimcrs.llm.config import LLMConfig

validate_section = validate  # plug-in sections (crs.*, simulator.*) validate with the one error formatter


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


FALLBACK_HELP = (
    "read `fallback_path` when `path` does not exist (a warning names both); without it a missing `path` "
    "stops the command. A `--set <section>.path=...` turns it off unless `--set <section>.use_fallback=true` too"
)


class ItemsConfig(_Section):
    """Where the item collection comes from: `path`, or `fallback_path` when `path` is missing and
    `use_fallback` allows it."""

    path: str
    fallback_path: str | None = None
    use_fallback: bool = Field(False, description=FALLBACK_HELP)
    id_column: str = "movieId"
    title_column: str = "title"
    mapping: dict[str, str] | None = None
    delimiters: dict[str, str] = Field(default_factory=dict)
    max_items: int | None = None


class RatingsConfig(_Section):
    """Where the ratings come from (`path`, or `fallback_path` as for items)."""

    path: str
    fallback_path: str | None = None
    use_fallback: bool = Field(False, description=FALLBACK_HELP)
    user_column: str = "userId"
    item_column: str = "movieId"
    rating_column: str = "rating"
    scale: tuple[float, float] = (0.5, 5.0)


class ProfilesConfig(_Section):
    """How each conversation's user profile is made: generated from ratings/items, or read from a file."""

    source: Literal["generate", "file"] = "generate"
    path: str | None = None
    requestable_slots: list[str] = Field(default_factory=list)
    constraint_slots: list[str] = Field(default_factory=lambda: ["genres"])
    like_threshold: float = 0.5
    dislike_threshold: float = -0.3
    holdout: float = 0.2
    persona: dict[str, str] | None = None


class RunConfig(_Section):
    """One simulator against one CRS for N conversations."""

    name: str = "run"
    seed: int = 42
    conversations: int = Field(10, ge=0)
    concurrency: int = Field(4, ge=1)
    max_turns: int = Field(10, ge=1)
    opening: Literal["user", "crs"] = "user"
    conversation_timeout_s: float = 600.0
    output: str | None = None
    executor: Literal["local", "ray"] = "local"
    ray_address: str | None = None
    event_loop: Literal["auto", "asyncio", "uvloop"] = Field(
        "auto", description="event loop of the run: uvloop (auto: when installed) or the standard asyncio loop"
    )
    items: ItemsConfig | None = None
    ratings: RatingsConfig | None = None
    profiles: ProfilesConfig = Field(default_factory=ProfilesConfig)
    llm: LLMConfig = Field(default_factory=LLMConfig)
    llm_components: dict[str, dict[str, Any]] = Field(default_factory=dict)
    simulator: ConfigSection
    crs: ConfigSection
    data: dict[str, Any] = Field(
        default_factory=dict, description="extra resources (annotated dialogues, domain files)"
    )
    progress: bool = True
    max_failed_share: float = Field(
        0.2, ge=0.0, le=1.0, description="`run` exits 3 when a larger share of the conversations failed"
    )
    _overrides: dict[str, str] = PrivateAttr(default_factory=dict)

    @property
    def overrides(self) -> dict[str, str]:
        """The keys set on the command line (dotted key -> `--set key=value`): a mistake in one of them
        (a plug-in option checked later included) is blamed on the flag, not on the file."""
        return self._overrides

    def decisive(self) -> dict[str, Any]:
        """The settings that decide the conversations (output folder, display and scheduling left out)."""
        return _without_unhashed(self.model_dump(mode="json", exclude=set(NOT_HASHED)))

    def config_hash(self) -> str:
        """A hash of what decides the conversations (output folder and progress display excluded)."""
        return hashlib.sha256(json.dumps(self.decisive(), sort_keys=True).encode()).hexdigest()[:16]

    def changes_from(self, previous: dict[str, Any]) -> list[str]:
        """`key: old -> new` for every decisive setting that differs from `previous` (a config as the
        manifest stores it), in dotted keys; what a refused `--resume` names."""
        before = _without_unhashed({key: value for key, value in previous.items() if key not in NOT_HASHED})
        return describe_changes(before, self.decisive())


NOT_HASHED = ("output", "progress", "concurrency", "executor", "ray_address", "event_loop", "max_failed_share")
"""Run settings that do not change any conversation: left out of the config hash."""
NOT_HASHED_IN_SECTIONS = {"items": ("use_fallback",), "ratings": ("use_fallback",)}
"""Section settings left out of the hash: whether a fallback may be read (the file read is recorded in
the manifest's `data_files`); runs made before the setting existed keep their hash."""
HASHED_AS = {("llm", "client"): {"auto": "lean"}}
"""Section settings hashed as the value that meant the same before: `llm.client: auto` (the default since
issue #35; the HTTP client decides no conversation) as `lean` (the default before), so runs made before
keep their hash and resume."""


def _without_unhashed(data: dict[str, Any]) -> dict[str, Any]:
    """`data` (a config as JSON) without the section settings of NOT_HASHED_IN_SECTIONS, HASHED_AS applied."""
    out = dict(data)
    for section, keys in NOT_HASHED_IN_SECTIONS.items():
        if isinstance(out.get(section), dict):
            out[section] = {k: v for k, v in out[section].items() if k not in keys}
    for (section, key), values in HASHED_AS.items():
        part = out.get(section)
        if isinstance(part, dict) and isinstance(part.get(key), str) and part[key] in values:
            out[section] = {**part, key: values[part[key]]}
    return out


_ABSENT = object()


def describe_changes(before: Any, after: Any, prefix: str = "") -> list[str]:
    """Dotted keys whose values differ between two JSON-like values, each as `key: old -> new`."""
    if isinstance(before, dict) and isinstance(after, dict):
        out = []
        for key in sorted({*before, *after}, key=str):
            name = f"{prefix}.{key}" if prefix else str(key)
            out += describe_changes(before.get(key, _ABSENT), after.get(key, _ABSENT), name)
        return out
    if before == after:
        return []
    return [f"{prefix}: {_shown(before)} -> {_shown(after)}"]


def _shown(value: Any, limit: int = 60) -> str:
    text = "(absent)" if value is _ABSENT else json.dumps(value, default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def set_dotted(data: dict[str, Any], assignment: str) -> str:
    """Apply one `--set a.b=value` override (the value parsed as YAML: numbers, lists, ...); returns the key."""
    if "=" not in assignment:
        raise ConfigError(f"--set {assignment!r}: expected key=value")
    key, raw = assignment.split("=", 1)
    parts = key.strip().split(".")
    node = data
    for part in parts[:-1]:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise ConfigError(f"--set {assignment!r}: '{part}' is not a section")
    node[parts[-1]] = parse_yaml(raw, source=f"--set {key.strip()}")
    return ".".join(parts)


def resolve_path(base_dir: Path, value: str | None) -> str | None:
    """Resolve a path from the config relative to the config file's folder."""
    if value is None:
        return None
    p = Path(value).expanduser()
    return str(p if p.is_absolute() else (base_dir / p).resolve())


def load_run_config(path: str | Path, overrides: list[str] | None = None) -> RunConfig:
    """Load, override and validate a run config; relative data paths are made absolute."""
    path = Path(path)
    data = read_yaml(path)
    flags = {set_dotted(data, assignment): f"--set {assignment.strip()}" for assignment in overrides or []}
    named_on_command_line(data, flags)
    config = validate(RunConfig, data, source=str(path), overrides=flags)
    config._overrides = flags
    return absolutize(config, path.parent, typed=frozenset(flags))


DATA_SECTIONS = ("items", "ratings")


def named_on_command_line(data: dict[str, Any], flags: dict[str, str]) -> None:
    """A data file named with `--set items.path=...` is the file meant: the config's fallback does not
    stand in for it (a typo there would silently read other data) unless `--set items.use_fallback=true`."""
    for section in DATA_SECTIONS:
        node = data.get(section)
        if f"{section}.path" in flags and f"{section}.use_fallback" not in flags and isinstance(node, dict):
            node["use_fallback"] = False


JSON_PATH_KEYS = frozenset({"text_path", "items_path", "custom_items_path"})


def absolutize(config: RunConfig, base_dir: Path, typed: frozenset[str] = frozenset()) -> RunConfig:
    """Make file paths in the config absolute: relative to `base_dir` (the config file's folder), except those
    `typed` on the command line (`--set` keys, dotted), which are relative to where the command runs."""

    def base(key: str) -> Path:
        parts = key.split(".")
        from_command_line = any(".".join(parts[:i]) in typed for i in range(1, len(parts) + 1))
        return Path.cwd() if from_command_line else base_dir

    for name, data_file in (("items", config.items), ("ratings", config.ratings)):
        if data_file is not None:
            data_file.path = resolve_path(base(f"{name}.path"), data_file.path) or data_file.path
            data_file.fallback_path = resolve_path(base(f"{name}.fallback_path"), data_file.fallback_path)
    if config.profiles.path:
        config.profiles.path = resolve_path(base("profiles.path"), config.profiles.path)
    for key, value in list(config.data.items()):
        if isinstance(value, str) and (value.endswith((".json", ".jsonl", ".yaml", ".yml", ".csv")) or "/" in value):
            config.data[key] = resolve_path(base(f"data.{key}"), value)
    for name, section in (("simulator", config.simulator), ("crs", config.crs)):
        for key, value in list(section.items()):
            if key in JSON_PATH_KEYS:  # JSON paths inside a CRS reply ("reply.text"), not files
                continue
            if (key.endswith(("_path", "_file")) or key in ("path", "record_to")) and isinstance(value, str):
                section[key] = resolve_path(base(f"{name}.{key}"), value)
    return config
