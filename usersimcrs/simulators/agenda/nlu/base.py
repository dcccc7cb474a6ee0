"""The NLU seam of the agenda-based simulator, its shared settings and its registry."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, ClassVar, TypeVar

from usersimcrs.core.dialogue import Dialogue, Utterance
from usersimcrs.core.items import ItemCollection
from usersimcrs.registry import Registry
from usersimcrs.simulators.agenda.nlu.act_parser import ParseResult, Vocabulary
from usersimcrs.simulators.agenda.policy.domain import Domain
from usersimcrs.simulators.agenda.policy.interaction_model import InteractionModel

if TYPE_CHECKING:  # pragma: no cover
    from usersimcrs.llm.base import LLM

T = TypeVar("T")

# rule roles -> CIR agent intents; an interaction model may override them with `agent_intent_roles`
DEFAULT_ROLES = {
    "recommend": "REVEAL",
    "no_results": "REVEAL.NONE",
    "elicit": "INQUIRE.ELICIT",
    "next": "INQUIRE.NEXT",
    "more": "INQUIRE.MORE",
    "inform": "DISCLOSE.MORE",
    "end": "END",
    "greet": "DISCLOSE.NON-DISCLOSE",
}


@dataclass
class NLUSettings:
    """What every NLU needs: the agent vocabulary, the domain, items and (for LLM NLU) a model."""

    interaction_model: InteractionModel
    domain: Domain
    items: ItemCollection | None = None
    llm: Callable[[], LLM] | None = None
    structured: bool = False
    max_tokens: int = 96
    roles: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_ROLES))
    cache: Callable[[str, Callable[[], Any]], Any] | None = None

    def shared(self, key: str, factory: Callable[[], T]) -> T:
        """A read-only resource shared by a run (RunContext.shared) or built here when there is no run."""
        return self.cache(key, factory) if self.cache is not None else factory()

    @property
    def agent_intents(self) -> list[str]:
        names = dict.fromkeys(self.interaction_model.agent_intent_names())
        names.update(dict.fromkeys(self.roles.values()))
        return list(names)

    def vocabulary(self) -> Vocabulary:
        return Vocabulary(self.agent_intents, self.domain.slot_names)


class NLU(ABC):
    """Turns the CRS's last utterance into agent dialogue acts."""

    uses_llm: ClassVar[bool] = False  # calls the `nlu` LLM component (checked before a run)

    def __init__(self, settings: NLUSettings) -> None:
        self.settings = settings

    @abstractmethod
    async def understand(self, utterance: Utterance, dialogue: Dialogue, *, seed: int) -> ParseResult:
        """The agent acts of `utterance` (with dropped intents/slots listed)."""


nlu_components: Registry[type[NLU]] = Registry(
    "agenda_nlu",
    {
        "rules": "usersimcrs.simulators.agenda.nlu.rules:RuleNLU",
        "llm": "usersimcrs.simulators.agenda.nlu.llm:LLMNLU",
    },
)
