"""The notebook-facing API: simulate with Python objects, then score, judge and report the run.

`simulate(crs=..., simulator=..., items=..., conversations=N)` accepts, for the CRS, a registry
name (``"retrieval"``), a config mapping (``{"type": "crs_arena", "url": ...}``), a connector
class, a CRS class or object with ``reply(history, user_utterance)``, or a function; for the
simulator, a registry name, a mapping, a simulator class or a user function. It writes the run
folder exactly as ``usersimcrs run`` does and returns its `Run` handle. Every function here also
works when an event loop is already running (Jupyter): the work runs on its own loop in a worker
thread; `simulate_async` is the awaitable form.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

from crs_connectors.base import ConnectorConfig, CRSConnector
from crs_connectors.inprocess import ObjectConfig, ObjectConnector
from usersimcrs.config import RunConfig, validate_section
from usersimcrs.core.items import ItemCollection
from usersimcrs.core.json_types import ConfigSection
from usersimcrs.core.profile import UserProfile
from usersimcrs.core.run_folder import Run, RunFolder, load_run
from usersimcrs.engine.loop import run_blocking
from usersimcrs.engine.plugins import ConnectorFactory, RunPlugins, SimulatorFactory, connector_factory
from usersimcrs.engine.plugins import simulator_factory as engine_simulator_factory
from usersimcrs.engine.runner import build_context
from usersimcrs.errors import ConfigError
from usersimcrs.llm.config import LLMConfig
from usersimcrs.pipeline.judge import JudgeRequest
from usersimcrs.pipeline.judge import judge as judge_run
from usersimcrs.pipeline.simulate import simulate_async as run_simulation
from usersimcrs.runtime.context import RunContext
from usersimcrs.simulators.base import SimulatorConfig, UserSimulator
from usersimcrs.simulators.function import FunctionSimulator

if TYPE_CHECKING:  # pragma: no cover
    from usersimcrs.pipeline.judge import JudgeResult

DEFAULT_DELIMITERS = {"genres": "|", "keywords": "|"}

CRSArgument: TypeAlias = Any
"""The `crs` of `simulate`: any of the forms the module docstring lists, told apart at run time (`crs_plugin`)."""

SimulatorArgument: TypeAlias = Any
"""The `simulator` of `simulate`: a registry name, a mapping, a simulator class or a user function
(`simulator_plugin`)."""


def LLM(backend: str = "auto", model: str | None = None, **options: Any) -> LLMConfig:  # noqa: N802 - reads as a type
    """LLM settings: ``LLM("openai", model="gpt-4o-mini")``, ``LLM("ollama", model="llama3.1:8b")``.

    Keyword options are the `llm:` keys of a run config (base_url, api_key_env, timeout_s, ...).
    """
    return LLMConfig.model_validate({"backend": backend, "model": model, **options})


def _label(obj: Any) -> str:
    """A readable type name for an object given as a plug-in (recorded in the manifest)."""
    target = obj if inspect.isclass(obj) or inspect.isfunction(obj) or inspect.ismethod(obj) else type(obj)
    return f"python:{getattr(target, '__module__', '?')}.{getattr(target, '__qualname__', type(target).__name__)}"


def crs_plugin(crs: CRSArgument) -> tuple[ConfigSection, ConnectorFactory | None]:
    """The `crs:` section to record and, for Python objects, the factory that builds each connector."""
    if isinstance(crs, str):
        return {"type": crs}, None
    if isinstance(crs, dict):
        return dict(crs), None
    if isinstance(crs, ConnectorConfig):
        return crs.model_dump(mode="json", exclude_none=True), None
    label = _label(crs)
    if inspect.isclass(crs) and issubclass(crs, CRSConnector):
        config = crs.Config.model_validate({"type": label})
        return {"type": label}, lambda context: crs(config, context)
    if inspect.isclass(crs) or callable(getattr(crs, "reply", None)) or callable(crs):
        object_config = ObjectConfig(type=label)
        return {"type": label}, lambda context: ObjectConnector(object_config, context, crs)
    raise ConfigError(
        f"crs: expected a registry name, a mapping, a class, an object with reply() or a function; "
        f"got {type(crs).__name__}"
    )


def simulator_plugin(simulator: SimulatorArgument) -> tuple[ConfigSection, SimulatorFactory | None]:
    """The `simulator:` section to record and, for Python objects, the factory of each simulator."""
    if isinstance(simulator, str):
        return {"type": simulator}, None
    if isinstance(simulator, dict):
        return dict(simulator), None
    if isinstance(simulator, SimulatorConfig):
        return simulator.model_dump(mode="json", exclude_none=True), None
    label = _label(simulator)
    if inspect.isclass(simulator) and issubclass(simulator, UserSimulator):
        config = simulator.Config.model_validate({"type": label})

        def build_class(context: RunContext, profile: UserProfile, seed: int) -> UserSimulator:
            return simulator(config, context, profile, seed)

        return {"type": label}, build_class
    if callable(simulator):
        function_config = SimulatorConfig(type=label)

        def build_function(context: RunContext, profile: UserProfile, seed: int) -> UserSimulator:
            return FunctionSimulator(function_config, context, profile, seed, simulator)

        return {"type": label}, build_function
    raise ConfigError(
        f"simulator: expected a registry name, a mapping, a simulator class or a function; "
        f"got {type(simulator).__name__}"
    )


def _data_section(value: str | Path | dict[str, Any] | None, extra: dict[str, Any]) -> dict[str, Any] | None:
    if value is None:
        return None
    if isinstance(value, dict):
        return dict(value)
    return {"path": str(Path(value).expanduser().resolve()), **extra}


def build_config(
    *,
    crs_section: ConfigSection,
    simulator_section: ConfigSection,
    items: str | Path | dict[str, Any] | None,
    ratings: str | Path | dict[str, Any] | None,
    llm: LLMConfig | dict[str, Any] | None,
    options: dict[str, Any],
) -> RunConfig:
    """A validated run config from the API's arguments (any other RunConfig key may be passed in `options`)."""
    data: dict[str, Any] = {"simulator": simulator_section, "crs": crs_section, "progress": False, **options}
    items_section = _data_section(items, {"delimiters": dict(DEFAULT_DELIMITERS)})
    if items_section is not None:
        data["items"] = items_section
    ratings_section = _data_section(ratings, {})
    if ratings_section is not None:
        data["ratings"] = ratings_section
    if llm is not None:
        data["llm"] = llm.model_dump(exclude_unset=True) if isinstance(llm, LLMConfig) else dict(llm)

    config: RunConfig = validate_section(RunConfig, data, source="usersimcrs.simulate", prefix="simulate")
    return config


def default_output(name: str) -> Path:
    """runs/<name>, or runs/<name>-2, -3, ... when that folder already holds a run."""
    base = Path("runs") / name
    candidate, n = base, 2
    while RunFolder(candidate).has_dialogues():
        candidate, n = Path(f"{base}-{n}"), n + 1
    return candidate


async def simulate_async(
    crs: CRSArgument,
    simulator: SimulatorArgument = "agenda",
    *,
    items: str | Path | ItemCollection | dict[str, Any] | None = None,
    ratings: str | Path | dict[str, Any] | None = None,
    conversations: int = 10,
    output: str | Path | None = None,
    llm: LLMConfig | dict[str, Any] | None = None,
    resume: bool = False,
    overwrite: bool = False,
    **options: Any,
) -> Run:
    """Run `conversations` simulated conversations with `crs` and return the run (see module docstring).

    Other keyword options are run-config keys (`name`, `seed`, `max_turns`, `concurrency`,
    `profiles`, `llm_components`, `progress`, ...).
    """
    crs_section, crs_factory = crs_plugin(crs)
    simulator_section, simulator_factory = simulator_plugin(simulator)
    collection = items if isinstance(items, ItemCollection) else None
    config = build_config(
        crs_section=crs_section,
        simulator_section=simulator_section,
        items=items if not isinstance(items, ItemCollection) else None,
        ratings=ratings,
        llm=llm,
        options={"conversations": conversations, **options},
    )
    if (crs_factory or simulator_factory) and config.executor != "local":
        raise ConfigError("executor: Python objects as crs/simulator run with the local executor only")
    plugins = RunPlugins(
        simulator=simulator_factory or engine_simulator_factory(simulator_section, "usersimcrs.simulate"),
        crs=crs_factory or connector_factory(crs_section, "usersimcrs.simulate"),
    )
    folder = Path(output) if output is not None else default_output(config.name)

    context = build_context(config, folder)
    if collection is not None:
        context.items = collection
    try:
        await run_simulation(
            config,
            folder,
            resume=resume,
            overwrite=overwrite,
            source="usersimcrs.simulate",
            plugins=plugins,
            context=context,
            check_crs=crs_factory is None,
            check_llms=crs_factory is None and simulator_factory is None,  # a Python object's LLMs are its own
        )
    finally:
        await context.aclose()
    return load_run(folder)


def simulate(crs: CRSArgument, simulator: SimulatorArgument = "agenda", **kwargs: Any) -> Run:
    """`simulate_async` for synchronous code (works inside a running event loop too)."""
    loop_kind = str(kwargs.get("event_loop", "auto"))
    return run_blocking(simulate_async(crs, simulator, **kwargs), loop_kind)


def judge(
    run: Run | str | Path,
    judge: str = "quality",
    *,
    llm: LLMConfig | dict[str, Any] | None = None,
    models: dict[str, dict[str, Any]] | None = None,
    **options: Any,
) -> JudgeResult:
    """Score a run's conversations with the LLM judge `judge` (quality, core12, pepper, persuasiveness).

    Other keyword options are those of `usersimcrs judge` (`debate=True`, `criteria=[...]`,
    `include_invalid`, `concurrency`, `limit`, ...). Judgments are appended to `judgments.jsonl`
    and resume per (conversation, judge, criterion, model).
    """
    path = run.path if isinstance(run, Run) else Path(run)
    settings = LLMConfig.model_validate(llm) if isinstance(llm, dict) else llm
    result = judge_run(path, JudgeRequest(judge=judge, **options), llm=settings, models=models)
    if isinstance(run, Run):
        run.refresh()
    return result


__all__ = [
    "LLM",
    "build_config",
    "judge",
    "crs_plugin",
    "default_output",
    "load_run",
    "simulate",
    "simulate_async",
    "simulator_plugin",
]
