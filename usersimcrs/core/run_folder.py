"""A run folder read into one typed handle: `Run` (dialogues, manifest, judgments).

Every command and the public API read run folders through `load_run`, so there is one reader:
`dialogues.jsonl` (a torn last line from a crash is ignored), `manifest.json` (typed sections,
unknown sections kept) and `judgments.jsonl`. Dialogues and judgments are read on first access.
"""

from __future__ import annotations

import json
from functools import cached_property
from pathlib import Path
from typing import Any, Iterator

from pydantic import BaseModel, ConfigDict, Field

from usersimcrs.core.dialogue import Dialogue
from usersimcrs.core.jsonl import iter_jsonl, read_models
from usersimcrs.core.validation import validate
from usersimcrs.errors import DataError

DIALOGUES = "dialogues.jsonl"
JUDGMENTS = "judgments.jsonl"
MANIFEST = "manifest.json"


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
        """Every conversation of the run, in file order."""
        return read_models(self.path / DIALOGUES, Dialogue)

    @cached_property
    def judgments(self) -> list[dict[str, Any]]:
        """The judgment records of `judgments.jsonl` (empty when the run was not judged)."""
        return list(iter_jsonl(self.path / JUDGMENTS))

    def iter_dialogues(self) -> Iterator[Dialogue]:
        """Stream the conversations without keeping them all in memory."""
        for record in iter_jsonl(self.path / DIALOGUES):
            yield Dialogue.model_validate(record)

    def refresh(self) -> "Run":
        """Forget what was read, so the next access sees the files as they are now."""
        for name in ("manifest", "dialogues", "judgments"):
            self.__dict__.pop(name, None)
        return self

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


def load_run(path: str | Path) -> Run:
    """Open a run folder; a folder without `dialogues.jsonl` is a DataError naming it."""
    run = Run(path)
    if not (run.path / DIALOGUES).exists():
        raise DataError(f"{run.path}: no {DIALOGUES} here (not a run folder?)")
    return run


__all__ = ["DIALOGUES", "JUDGMENTS", "MANIFEST", "DialogueCounts", "Manifest", "Run", "Timings", "load_run",
           "read_manifest_file"]
