"""How the engine makes the simulator and the CRS connector of each conversation.

A run config names its plug-ins (`simulator.type`, `crs.type`) and the registries resolve them;
the public API may instead hand over Python objects (a CRS instance, a class, an async function).
Both end up as the same two factories, so the turn loop never asks where a plug-in came from.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from crs_connectors.base import CRSConnector, connectors, instantiate
from usersimcrs.config import RunConfig, validate_section
from usersimcrs.core.profile import UserProfile
from usersimcrs.engine.context import RunContext
from usersimcrs.errors import ConfigError
from usersimcrs.registry import Registry
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
    sim_cls, sim_config = _resolve(simulators, config.simulator, "simulator", source)
    crs_cls, crs_config = _resolve(connectors, config.crs, "crs", source)

    def simulator(context: RunContext, profile: UserProfile, seed: int) -> UserSimulator:
        return sim_cls(sim_config, context, profile, seed)

    def crs(context: RunContext) -> CRSConnector:
        return instantiate(crs_cls, crs_config, context)

    return RunPlugins(simulator=simulator, crs=crs)


def _resolve(registry: Registry[Any], section: dict[str, Any], name: str, source: str) -> tuple[Any, Any]:
    if "type" not in section:
        raise ConfigError(f"{source}: missing key '{name}.type'")
    cls = registry.get(str(section["type"]))
    return cls, validate_section(cls.Config, section, source=source, prefix=name)
