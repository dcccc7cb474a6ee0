"""The CRS seam: open a conversation, get a reply (text + separate ranked items), close it.

The engine creates one connector instance per conversation from the shared `RunContext`
(HTTP connection pool, item collection, LLM), so per-conversation state lives on the instance.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from usersimcrs.core.dialogue import Dialogue, ItemRef, Utterance
from usersimcrs.registry import Registry

if TYPE_CHECKING:  # pragma: no cover
    from usersimcrs.core.profile import UserProfile
    from usersimcrs.runtime.context import RunContext


class CRSReply(BaseModel):
    """A CRS turn: the text shown to the user, the ranked items recommended, the raw payload."""

    model_config = ConfigDict(extra="forbid")

    text: str
    items: list[ItemRef] = Field(default_factory=list)
    raw: Any = None
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


connectors: Registry[type[CRSConnector]] = Registry(
    "connectors",
    {
        "http": "crs_connectors.http:HTTPConnector",
        "crs_arena": "crs_connectors.crs_arena:CRSArenaConnector",
        "moviebot": "crs_connectors.moviebot:MovieBotConnector",
        "rasa": "crs_connectors.rasa:RasaConnector",
        "python": "crs_connectors.inprocess:PythonConnector",
        "dialoguekit_agent": "crs_connectors.inprocess:DialogueKitAgentConnector",
        "popularity": "crs_connectors.baselines.popularity:PopularityCRS",
        "retrieval": "crs_connectors.baselines.retrieval:RetrievalCRS",
        "llm_crs": "crs_connectors.baselines.llm_crs:LLMCRS",
        "replay": "crs_connectors.record_replay:ReplayConnector",
        "oracle": "crs_connectors.baselines.ladder:OracleCRS",
        "oracle_mix30": "crs_connectors.baselines.ladder:OracleMix30CRS",
        "oracle_mix70": "crs_connectors.baselines.ladder:OracleMix70CRS",
        "random": "crs_connectors.baselines.ladder:RandomCRS",
        "broken": "crs_connectors.baselines.ladder:BrokenCRS",
    },
)


@dataclass(frozen=True)
class ConnectorSpec:
    """A `crs:` section resolved: the connector class and its validated options."""

    cls: type[CRSConnector]
    config: ConnectorConfig

    def build(self, context: RunContext, *, record: bool = True) -> CRSConnector:
        """One connector for one conversation, wrapped by the recorder when its config sets `record_to`
        (`record=False`: the bare connector, e.g. for a health check)."""
        connector = self.cls(self.config, context)
        if record and self.config.record_to:
            from crs_connectors.record_replay import RecordingConnector

            return RecordingConnector(connector, self.config.record_to)
        return connector


def connector_spec(
    section: dict[str, Any], source: str = "config", overrides: Mapping[str, str] | None = None
) -> ConnectorSpec:
    """The one place a `crs:` section becomes a connector: class from the registry, options validated
    (errors name `source` and the key, or the `--set` flag in `overrides` that set it). The engine, the
    preflight check and the probe all use it."""
    from usersimcrs.config import validate_section
    from usersimcrs.core.validation import require_key

    require_key(section, "type", source=source, prefix="crs", overrides=overrides)
    cls = connectors.get(str(section["type"]))
    return ConnectorSpec(cls, validate_section(cls.Config, section, source=source, prefix="crs", overrides=overrides))


def build_connector(section: dict[str, Any], context: RunContext, *, source: str = "config") -> CRSConnector:
    """The connector a `crs:` section describes (validated; wrapped by the recorder when `record_to` is set)."""
    return connector_spec(section, source).build(context)
