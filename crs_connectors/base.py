"""The CRS connectors' registry, and the one place a `crs:` section becomes a connector.

The seam itself (`CRSConnector`, `CRSReply`, `ConnectorConfig`, the protocols a connector may
follow) lives in `seam.py`, below this module and the recorder; it is re-exported here, the path
every connector imports it by.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from crs_connectors.record_replay import RecordingConnector
from crs_connectors.seam import (
    ConnectorConfig,
    CRSConnector,
    CRSReply,
    HealthChecked,
    ProfileOracle,
)
from usersimcrs.config import validate_section
from usersimcrs.core.json_types import ConfigSection
from usersimcrs.core.validation import require_key
from usersimcrs.registry import Registry

if TYPE_CHECKING:  # pragma: no cover
    from usersimcrs.runtime.context import RunContext

__all__ = [
    "ConnectorConfig",
    "ConnectorSpec",
    "CRSConnector",
    "CRSReply",
    "HealthChecked",
    "ProfileOracle",
    "build_connector",
    "connector_spec",
    "connectors",
]


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
            return RecordingConnector(connector, self.config.record_to)
        return connector


def connector_spec(
    section: ConfigSection, source: str = "config", overrides: Mapping[str, str] | None = None
) -> ConnectorSpec:
    """The one place a `crs:` section becomes a connector: class from the registry, options validated
    (errors name `source` and the key, or the `--set` flag in `overrides` that set it). The engine, the
    preflight check and the probe all use it."""
    require_key(section, "type", source=source, prefix="crs", overrides=overrides)
    cls = connectors.get(str(section["type"]))
    return ConnectorSpec(cls, validate_section(cls.Config, section, source=source, prefix="crs", overrides=overrides))


def build_connector(section: ConfigSection, context: RunContext, *, source: str = "config") -> CRSConnector:
    """The connector a `crs:` section describes (validated; wrapped by the recorder when `record_to` is set)."""
    return connector_spec(section, source).build(context)
