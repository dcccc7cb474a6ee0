"""How the engine makes the simulator and the CRS connector of each conversation.

A run config names its plug-ins (`simulator.type`, `crs.type`) and the registries resolve them;
the public API may instead hand over Python objects (a CRS instance, a class, an async function).
Both end up as the same two factories, so the turn loop never asks where a plug-in came from.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from crs_connectors.base import CRSConnector, connector_spec
from usersimcrs.config import RunConfig, validate_section
from usersimcrs.core.profile import UserProfile
from usersimcrs.errors import ConfigError, UserError
from usersimcrs.registry import Registry
from usersimcrs.runtime.context import RunContext
from usersimcrs.simulators.base import UserSimulator, simulators

SimulatorFactory = Callable[[RunContext, UserProfile, int], UserSimulator]
"""(run context, profile, conversation seed) -> a fresh simulator for one conversation."""

ConnectorFactory = Callable[[RunContext], CRSConnector]
"""(run context) -> a fresh connector for one conversation."""


@dataclass(frozen=True)
class RunPlugins:
    """The factories of one run: a simulator and a CRS connector per conversation."""

    simulator: SimulatorFactory
    crs: ConnectorFactory


def plugins_from_config(config: RunConfig, source: str = "config") -> RunPlugins:
    """Factories for the plug-ins the config names; options are validated here, before any conversation."""
    return RunPlugins(simulator=simulator_factory(config.simulator, source), crs=connector_factory(config.crs, source))


def simulator_factory(section: dict[str, Any], source: str = "config") -> SimulatorFactory:
    """The factory of the simulator a `simulator:` section names (options validated now)."""
    sim_cls, sim_config = _resolve(simulators, section, "simulator", source)

    def build(context: RunContext, profile: UserProfile, seed: int) -> UserSimulator:
        simulator: UserSimulator = sim_cls(sim_config, context, profile, seed)
        return simulator

    return build


def simulator_options(section: dict[str, Any]) -> dict[str, Any] | None:
    """The simulator's options as validated, defaults filled in, for the manifest (some defaults, such as the
    LLM users' style, come from data files); None when the section does not name a registered simulator."""
    try:
        _, options = _resolve(simulators, section, "simulator", "config")
    except (UserError, ImportError, AttributeError):
        return None
    return options.model_dump(mode="json") if hasattr(options, "model_dump") else None


def connector_factory(section: dict[str, Any], source: str = "config") -> ConnectorFactory:
    """The factory of the connector a `crs:` section names (options validated now; recorder applied)."""
    spec = connector_spec(section, source)

    def build(context: RunContext) -> CRSConnector:
        return spec.build(context)

    return build


def _resolve(registry: Registry[Any], section: dict[str, Any], name: str, source: str) -> tuple[Any, Any]:
    if "type" not in section:
        raise ConfigError(f"{source}: missing key '{name}.type'")
    cls = registry.get(str(section["type"]))
    return cls, validate_section(cls.Config, section, source=source, prefix=name)
