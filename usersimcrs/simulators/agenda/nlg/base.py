"""The NLG seam of the agenda-based simulator and its registry."""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from usersimcrs.core.dialogue import Dialogue, DialogueAct
from usersimcrs.registry import Registry

if TYPE_CHECKING:  # pragma: no cover
    from usersimcrs.llm.base import LLM
    from usersimcrs.simulators.agenda.nlg.seeker_acts import SeekerPool


class NLGResult(BaseModel):
    """The generated text and how it was made (template key, llm, corpus, or a fallback note)."""

    model_config = ConfigDict(extra="forbid")

    text: str
    source: str
    origin: list[str] = Field(default_factory=list, description="IDs of the corpus messages used (corpus NLG)")


@dataclass
class NLGSettings:
    """Templates (defaults and mined), few-shot examples, the model for the LLM NLG, the corpus NLG's pool."""

    defaults: dict[str, tuple[str, ...]]
    mined: dict[str, tuple[str, ...]] = field(default_factory=dict)
    examples: list[tuple[str, str]] = field(default_factory=list)
    llm: Callable[[], LLM] | None = None
    few_shot: int = 4
    max_tokens: int = 60
    history_turns: int = 4
    corpus: Callable[[], SeekerPool] | None = None


class NLG(ABC):
    """Realises the user's dialogue acts as text."""

    uses_llm: ClassVar[bool] = False  # calls the `nlg` LLM component (checked before a run)

    def __init__(self, settings: NLGSettings) -> None:
        self.settings = settings

    @abstractmethod
    async def generate(
        self, acts: list[DialogueAct], dialogue: Dialogue, *, rng: random.Random, seed: int, ending: str | None = None
    ) -> NLGResult:
        """The user's utterance expressing `acts` in order. `ending`: why the user ends the conversation with
        this turn (the policy's stop reason, e.g. `user_gave_up`), None while it goes on: a user who leaves
        without finding anything does not close as one who found something does."""


nlg_components: Registry[type[NLG]] = Registry(
    "agenda_nlg",
    {
        "template": "usersimcrs.simulators.agenda.nlg.template:TemplateNLG",
        "llm": "usersimcrs.simulators.agenda.nlg.llm:LLMNLG",
        "corpus": "usersimcrs.simulators.agenda.nlg.corpus:CorpusNLG",
    },
)
