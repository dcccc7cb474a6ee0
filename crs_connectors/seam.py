"""The CRS seam: open a conversation, get a reply (text + separate ranked items), close it.

The engine creates one connector instance per conversation from the shared `RunContext`
(HTTP connection pool, item collection, LLM), so per-conversation state lives on the instance.
Its own module, below the registry and the recorder (`base.py`, `record_replay.py`) that both build
on it; `crs_connectors.base` re-exports every name, the path connectors import it by.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, ClassVar, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from usersimcrs.core.dialogue import Dialogue, ItemRef, Utterance
from usersimcrs.core.json_types import JSON

if TYPE_CHECKING:  # pragma: no cover
    from usersimcrs.core.profile import UserProfile
    from usersimcrs.runtime.context import RunContext


class CRSReply(BaseModel):
    """A CRS turn: the text shown to the user, the ranked items recommended, the raw payload."""

    model_config = ConfigDict(extra="forbid")

    text: str
    items: list[ItemRef] = Field(default_factory=list)
    raw: JSON = None  # the CRS's answer as it came, stored as JSON (an in-process CRS may hand any value)
    items_from_text: bool = False


@runtime_checkable
class HealthChecked(Protocol):
    """A connector that can tell whether its CRS is up (HTTP connectors): a GET on `health_url()`."""

    def health_url(self) -> str: ...

    async def health(self) -> str: ...


@runtime_checkable
class ProfileOracle(Protocol):
    """A CRS-side oracle (the ladder's reference CRSs): the engine hands it the conversation's user profile and
    seed before `open`, once per conversation. It is given what a study would give any oracle (the profile the
    simulated user plays), never the simulator's own state; its random choices come from `seed`."""

    def meet_user(self, profile: UserProfile, seed: int) -> None: ...


class ConnectorConfig(BaseModel):
    """Base of every connector's options; unknown keys are errors."""

    model_config = ConfigDict(extra="forbid")

    type: str
    record_to: str | None = Field(None, description="append every exchange to this JSONL file (see `replay`)")

    def llm_components(self) -> list[str]:
        """The LLM components this connector calls (`context.llm(name)`), whose servers a command checks
        before its first conversation; a connector to a CRS elsewhere calls none."""
        return []


class CRSConnector(ABC):
    """A black-box CRS as the simulator sees it."""

    Config: ClassVar[type[ConnectorConfig]] = ConnectorConfig

    def __init__(self, config: ConnectorConfig, context: RunContext) -> None:
        self.config = config
        self.context = context

    async def open(self, conversation_id: str) -> None:  # noqa: B027 - optional hook
        """Start a conversation (a new session on the CRS side)."""

    @abstractmethod
    async def reply(self, history: Dialogue, user_utterance: Utterance | None) -> CRSReply:
        """The CRS's answer to `user_utterance` given the dialogue so far.

        `history` holds the turns *before* `user_utterance` (the engine appends both afterwards);
        `user_utterance` is None when the CRS speaks first.
        """

    async def close(self) -> None:  # noqa: B027 - optional hook
        """End the conversation and release its session."""
