"""How the engine makes the simulator and the CRS connector of each conversation.

A run config names its plug-ins (`simulator.type`, `crs.type`) and the registries resolve them;
the public API may instead hand over Python objects (a CRS instance, a class, an async function).
Both end up as the same two factories, so the turn loop never asks where a plug-in came from.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Callable

from crs_connectors.base import CRSConnector, connector_spec
from usersimcrs.config import RunConfig, validate_section
from usersimcrs.core.json_types import ConfigSection
from usersimcrs.core.profile import UserProfile
from usersimcrs.core.validation import require_key
from usersimcrs.errors import UserError
from usersimcrs.registry import Registry
from usersimcrs.runtime.context import RunContext
from usersimcrs.simulators.base import SimulatorConfig, UserSimulator, simulators

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
    """Factories for the plug-ins the config names; options are validated here, before any conversation
    (a mistake in an option set with `--set` is blamed on the flag)."""
    return RunPlugins(
        simulator=simulator_factory(config.simulator, source, config.overrides),
        crs=connector_factory(config.crs, source, config.overrides),
    )


def llm_components(config: RunConfig, source: str = "config") -> list[str]:
    """The LLM components the run's simulator and CRS call, as their option models declare
    (`llm_components()`; a plug-in model without it calls none)."""
    _, simulator_config = _resolve(simulators, config.simulator, "simulator", source, config.overrides)
    crs_config = connector_spec(config.crs, source, config.overrides).config
    declared: list[list[str]] = [getattr(o, "llm_components", list)() for o in (simulator_config, crs_config)]
    return list(dict.fromkeys(component for components in declared for component in components))


def simulator_factory(
    section: ConfigSection, source: str = "config", overrides: Mapping[str, str] | None = None
) -> SimulatorFactory:
    """The factory of the simulator a `simulator:` section names (options validated now)."""
    sim_cls, sim_config = _resolve(simulators, section, "simulator", source, overrides)

    def build(context: RunContext, profile: UserProfile, seed: int) -> UserSimulator:
        simulator: UserSimulator = sim_cls(sim_config, context, profile, seed)
        return simulator

    return build


def simulator_options(section: ConfigSection) -> dict[str, Any] | None:
    """The simulator's options as validated, defaults filled in, for the manifest (some defaults, such as the
    LLM users' style, come from data files); None when the section does not name a registered simulator."""
    try:
        _, options = _resolve(simulators, section, "simulator", "config", None)
    except (UserError, ImportError, AttributeError):
        return None
    return options.model_dump(mode="json") if hasattr(options, "model_dump") else None


def connector_factory(
    section: ConfigSection, source: str = "config", overrides: Mapping[str, str] | None = None
) -> ConnectorFactory:
    """The factory of the connector a `crs:` section names (options validated now; recorder applied)."""
    spec = connector_spec(section, source, overrides)

    def build(context: RunContext) -> CRSConnector:
        return spec.build(context)

    return build


def _resolve(
    registry: Registry[type[UserSimulator]],
    section: ConfigSection,
    name: str,
    source: str,
    overrides: Mapping[str, str] | None,
) -> tuple[type[UserSimulator], SimulatorConfig]:
    require_key(section, "type", source=source, prefix=name, overrides=overrides)
    cls = registry.get(str(section["type"]))
    return cls, validate_section(cls.Config, section, source=source, prefix=name, overrides=overrides)
