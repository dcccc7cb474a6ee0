"""The annotation-task seam: which records need a label, the prompt for one, and how a reply is applied."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict

from data_converters.augment.folder import ConvertedFolder
from data_converters.augment.prompt_spec import PromptSpec
from usersimcrs.core.dialogue import Dialogue
from usersimcrs.core.items import ItemCollection
from usersimcrs.core.json_types import JSON, JSONSchema
from usersimcrs.llm.base import Message
from usersimcrs.registry import Registry


class Unit(BaseModel):
    """One thing to annotate: a whole dialogue, or one utterance of it."""

    model_config = ConfigDict(frozen=True)

    key: str
    conversation_id: str
    utterance_index: int | None = None


class Provenance(BaseModel):
    """Who made an annotation: stored next to it so LLM labels are never mistaken for gold ones."""

    task: str
    model: str
    backend: str
    prompt: str
    prompt_version: int | str


class AnnotationTask(ABC):
    """One kind of LLM annotation over a converted dataset."""

    name: ClassVar[str] = "abstract"
    default_prompt: ClassVar[str] = ""

    def __init__(self, prompt: PromptSpec, items: ItemCollection | None = None) -> None:
        self.prompt = prompt
        self.items = items

    @abstractmethod
    def units(self, dialogue: Dialogue, overwrite: bool) -> list[Unit]:
        """The units of `dialogue` still to annotate (already-annotated ones are skipped unless overwrite)."""

    @abstractmethod
    def messages(self, dialogue: Dialogue, unit: Unit) -> list[Message]:
        """The chat messages asking for one unit's annotation."""

    @abstractmethod
    def schema(self, dialogue: Dialogue, unit: Unit) -> JSONSchema:
        """The JSON schema the reply must follow."""

    @abstractmethod
    def parse(self, parsed: JSON, dialogue: Dialogue, unit: Unit) -> dict[str, Any]:
        """The reply's JSON -> a JSON-able result; raises ValueError when it is unusable."""

    @abstractmethod
    def apply(self, dialogue: Dialogue, unit: Unit, result: dict[str, Any], provenance: Provenance) -> None:
        """Store a result (and its provenance) on the dialogue."""

    def finish(self, folder: ConvertedFolder, dialogues: list[Dialogue]) -> list[str]:
        """Write task-specific side files after the run; returns their names."""
        return []


annotators: Registry[type[AnnotationTask]] = Registry(
    "annotators",
    {
        "dialogue-acts": "data_converters.augment.dialogue_acts:DialogueActTask",
        "information-need": "data_converters.augment.information_need:InformationNeedTask",
    },
)
