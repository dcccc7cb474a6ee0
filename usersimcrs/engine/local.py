"""The local executor: a run's context built from its config, and its conversations run in this process.

`build_context` loads what a run shares (items, ratings, LLMs, the HTTP pool) and `iter_conversations`
runs conversations with at most C at once. `runner.py` (the run command: folder, manifest, resume) and
the Ray executor's tasks both run conversations through them, so this module sits below both.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import AsyncGenerator, Iterable, Iterator

from crs_connectors.transport import POOL_KEY, CRSPool
from usersimcrs.config import DATA_SECTIONS, ItemsConfig, RatingsConfig, RunConfig
from usersimcrs.core.dialogue import Dialogue
from usersimcrs.core.items import ItemCollection
from usersimcrs.core.manifest import file_sha256
from usersimcrs.core.profile import Ratings
from usersimcrs.core.secrets import Secrets
from usersimcrs.core.shared_resources import SharedResources
from usersimcrs.core.usage import UsageSummary
from usersimcrs.engine.conversation import ConversationRunner, plan
from usersimcrs.engine.loop import cancel_bounded, collector_paused, thaw
from usersimcrs.engine.plugins import RunPlugins
from usersimcrs.errors import ConfigError, UserError
from usersimcrs.llm.provider import LLMProvider
from usersimcrs.runtime.context import RunContext
from usersimcrs.user_model.population import build_profile_source


def load_items(config: RunConfig, resources: SharedResources | None = None) -> ItemCollection | None:
    """The run's item collection, from `items.path` or, when that is missing and `items.use_fallback`
    allows it, `items.fallback_path`; read once per command when `resources` (the command's) is given."""
    section = config.items
    if section is None:
        return None
    path = data_file(section, "items")["path"]
    return (resources if resources is not None else SharedResources()).items(
        path,
        id_column=section.id_column,
        title_column=section.title_column,
        mapping=section.mapping,
        delimiters=section.delimiters,
        max_items=section.max_items,
    )


def load_ratings(config: RunConfig) -> Ratings | None:
    section = config.ratings
    if section is None:
        return None
    path = data_file(section, "ratings")["path"]
    return Ratings.from_csv(
        path,
        user_column=section.user_column,
        item_column=section.item_column,
        rating_column=section.rating_column,
        scale=section.scale,
    )


def data_file(section: ItemsConfig | RatingsConfig, key: str) -> dict[str, str]:
    """The file a data section uses: `{path, used: "path" | "fallback_path"}` (`path` when it exists, else
    `fallback_path` when `use_fallback` allows it, with the `missing` primary named); otherwise a
    `ConfigError` naming the key and the path (and the fallback, and how to allow it)."""
    if Path(section.path).exists():
        return {"path": section.path, "used": "path"}
    fallback = section.fallback_path
    if fallback and section.use_fallback and Path(fallback).exists():
        return {"path": fallback, "used": "fallback_path", "missing": section.path}
    hint = ""
    if fallback and not section.use_fallback:
        hint = f" ({key}.fallback_path {fallback} is read instead only with {key}.use_fallback: true)"
    elif fallback:
        hint = f" (nor fallback {fallback})"
    raise ConfigError(f"{key}.path: file not found: {section.path}{hint}")


def data_files(config: RunConfig) -> dict[str, dict[str, str]]:
    """Which file each data input of `config` uses, for the manifest and the console: items, ratings,
    the profiles file (`profiles.source: file`) and each existing file under `data:` (`data.<name>`);
    `used: "none"` when no file can be used (the run was given its data as Python objects)."""
    sections = {"items": config.items, "ratings": config.ratings}
    out = {}
    for key, section in sections.items():
        if section is None:
            continue
        try:
            out[key] = data_file(section, key)
        except ConfigError:
            out[key] = {"path": section.path, "used": "none"}
    if config.profiles.source == "file" and config.profiles.path:
        out["profiles"] = {
            "path": config.profiles.path,
            "used": "path" if Path(config.profiles.path).is_file() else "none",
        }
    for name, value in config.data.items():
        if isinstance(value, str) and Path(value).is_file():
            out[f"data.{name}"] = {"path": value, "used": "path"}
    return out


def with_hashes(files: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
    """`files` (from `data_files`) with the SHA-256 of each file read (`sha256`): the manifest's record of
    the data a run used, against which each Ray task checks the data it loaded."""
    return {
        key: {**found, "sha256": file_sha256(found["path"])} if found.get("used") != "none" else dict(found)
        for key, found in files.items()
    }


def fallback_warnings(files: dict[str, dict[str, str]]) -> list[str]:
    """One line per data section that reads another file than the one named (its fallback), and one more
    when only some sections fell back (the fallback items beside the named ratings may not match)."""
    fell_back = [key for key, found in files.items() if found.get("used") == "fallback_path"]
    lines = [
        f"{key}: {files[key].get('missing')} does not exist; reading {key}.fallback_path {files[key]['path']} "
        f"instead ({key}.use_fallback: true)"
        for key in fell_back
    ]
    named = [key for key in DATA_SECTIONS if files.get(key, {}).get("used") == "path"]
    if fell_back and named:
        lines.append(f"{' and '.join(fell_back)} from the fallback but {' and '.join(named)} from the named file")
    return lines


def build_context(
    config: RunConfig, run_dir: Path | None = None, resources: SharedResources | None = None
) -> RunContext:
    """Load the run's shared resources; LLMs are created lazily on first use. `close_context` releases them.

    `resources`: the command's read-only resources (a matrix passes one to all its cells: items read once)."""
    resources = resources if resources is not None else SharedResources()
    llms = LLMProvider(config.llm, config.llm_components)
    with collector_paused():
        items, ratings = load_items(config, resources), load_ratings(config)
    context = RunContext(
        items=items,
        ratings=ratings,
        llms=llms,
        run_dir=run_dir,
        run_seed=config.seed,
        data=dict(config.data),
        secrets=Secrets.from_config(config),
        resources=resources,
    )
    context.on_close(thaw)  # registered first, so called last
    pool = context.shared(POOL_KEY, CRSPool)  # one keep-alive pool for every HTTP CRS request of the run
    context.on_close(llms.aclose)
    context.on_close(pool.aclose)
    return context


async def close_context(context: RunContext) -> None:
    """Release the run's resources (HTTP pool, LLM backends and caches, recorder files)."""
    await context.aclose()


async def iter_conversations(
    config: RunConfig,
    context: RunContext,
    indices: Iterable[int],
    *,
    source: str = "config",
    plugins: RunPlugins | None = None,
) -> AsyncGenerator[Dialogue, None]:
    """Run the conversations of `indices` with at most `config.concurrency` at once, yielding each as it ends."""
    runner = ConversationRunner(config, context, build_profile_source(config.profiles, context), source, plugins)
    queue: asyncio.Queue[Dialogue | UserError | None] = asyncio.Queue(maxsize=config.concurrency * 2)
    pending = iter(list(indices))

    async def worker() -> None:
        try:
            for index in pending:  # a shared iterator: each index is taken by exactly one worker
                await queue.put(await runner.run(plan(config, index)))
        except UserError as exc:  # the same mistake would fail every conversation: stop the run
            await queue.put(exc)
        await queue.put(None)

    workers = [asyncio.create_task(worker()) for _ in range(config.concurrency)]
    # after the workers: their first requests go out first, the indexes are built while the replies are awaited
    helpers = [asyncio.create_task(_between_others(context.items.index_in_steps()))] if context.items else []
    finished = 0
    try:
        while finished < len(workers):
            item = await queue.get()
            if item is None:
                finished += 1
            elif isinstance(item, UserError):
                raise item
            else:
                yield item
    finally:
        await cancel_bounded(workers + helpers)


async def _between_others(steps: Iterator[None]) -> None:
    """Run `steps` one per pass of the event loop, between the conversations' own work."""
    for _ in steps:
        await asyncio.sleep(0)


def _usage(context: RunContext) -> UsageSummary:
    llms = context.llms
    if llms is not None and hasattr(llms, "usage_summary"):
        return llms.usage_summary()
    return {}
