"""The `ray` executor: a run's conversations fanned out as Ray tasks, one chunk of indices each.

Each task rebuilds the run's context from the config (items, ratings, LLMs, HTTP pool) and runs
its chunk with the local executor (`iter_conversations`), so conversation i gets the same ID,
seed and record as it would locally. Tasks return plain dicts (Dialogue JSON plus the task's LLM
usage); the driver yields dialogues as chunks finish and writes them, so resume works as usual.
Install with the `[ray]` extra; `ray_address` in the run config joins an existing cluster,
otherwise a local Ray instance is started for the run and stopped after it.
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, AsyncGenerator, Iterable

from usersimcrs.config import RunConfig
from usersimcrs.core.dialogue import Dialogue
from usersimcrs.core.usage import add_summaries
from usersimcrs.errors import UserError

CHUNKS_PER_CPU = 4
CANCEL_GRACE_S = 5.0  # wait for tasks about to finish before cancelling the rest


@dataclass(frozen=True)
class ChunkResult:
    """What one Ray task sends back: its dialogues as JSON dicts and its LLM usage summary."""

    dialogues: list[dict[str, Any]]
    usage: dict[str, Any]


def chunk_size(n: int, cpus: int, concurrency: int) -> int:
    """Indices per task: about CHUNKS_PER_CPU tasks per CPU, never fewer than one task's concurrency."""
    if n <= 0:
        return 1
    return max(1, concurrency, math.ceil(n / max(1, cpus * CHUNKS_PER_CPU)))


def chunked(indices: Iterable[int], size: int) -> list[list[int]]:
    """Split `indices` into consecutive lists of at most `size`."""
    items = list(indices)
    return [items[i : i + size] for i in range(0, len(items), size)]


def worker_config(config: RunConfig) -> dict[str, Any]:
    """The config as JSON for the workers, with the LLM cache folder pinned to the driver's choice.

    Workers may not share the driver's environment (a remote cluster, or a Ray instance started
    before `USERSIMCRS_CACHE_DIR` was set), so the folder is resolved here, once.
    """
    from usersimcrs.llm.cache import default_cache_dir

    data = config.model_dump(mode="json")
    data["llm"]["cache_dir"] = str(default_cache_dir(config.llm.cache_dir))
    data["executor"] = "local"
    return data


def run_chunk(config_data: dict[str, Any], indices: list[int], source: str, run_dir: str | None) -> ChunkResult:
    """Run one chunk in this (worker) process with the local executor; the body of a Ray task."""
    from usersimcrs.engine.loop import run_coroutine

    config = RunConfig.model_validate(config_data)
    return run_coroutine(_run_chunk_async(config, indices, source, run_dir), config.event_loop)


async def _run_chunk_async(config: RunConfig, indices: list[int], source: str, run_dir: str | None) -> ChunkResult:
    from usersimcrs.engine.runner import _usage, build_context, close_context, iter_conversations

    context = build_context(config, Path(run_dir) if run_dir else None)
    try:
        dialogues = [
            d.model_dump(mode="json") async for d in iter_conversations(config, context, indices, source=source)
        ]
        usage = _usage(context)
    finally:
        await close_context(context)
    return ChunkResult(dialogues=dialogues, usage=usage)


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise UserError("executor 'ray' needs Ray: pip install 'usersimcrs[ray]'") from None
    return ray


def _ensure_ray(ray: Any, config: RunConfig) -> bool:
    """Connect to `config.ray_address`, reuse an initialised Ray, or start a local one; True if started here."""
    if ray.is_initialized():
        return False
    try:
        if config.ray_address:
            ray.init(address=config.ray_address, log_to_driver=False)
        else:
            ray.init(include_dashboard=False, log_to_driver=False)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        where = config.ray_address or "a local instance"
        raise UserError(f"ray_address: cannot start or reach Ray at {where} ({exc})") from None
    return True


async def _chunk_result(ray: Any, future: Any) -> ChunkResult:
    """A finished task's result; a user error raised in the task (bad plug-in config) surfaces as itself."""
    try:
        return await future
    except ray.exceptions.RayTaskError as exc:
        cause = getattr(exc, "cause", None)
        if isinstance(cause, UserError):
            raise cause from None
        raise


def _cancel_unfinished(ray: Any, refs: list[Any]) -> None:
    """Cancel the tasks a stopped run leaves behind, after a short wait for those about to finish.

    Cancelling a task at the moment it completes trips a check in Ray's task manager that ends the
    driver process (seen after a plug-in config error, when every task fails at once); tasks that
    finish within the wait are not cancelled at all. A plain cancel: a forced one kills workers
    mid-call, which can take the local Ray node (and the driver) down.
    """
    if not refs:
        return
    _, unfinished = ray.wait(refs, num_returns=len(refs), timeout=CANCEL_GRACE_S)
    for ref in unfinished:
        ray.cancel(ref)


async def iter_conversations_ray(
    config: RunConfig,
    indices: Iterable[int],
    *,
    source: str = "config",
    run_dir: str | Path | None = None,
    usage: dict[str, Any] | None = None,
) -> AsyncGenerator[Dialogue, None]:
    """Run `indices` as Ray tasks and yield each Dialogue; task LLM usage is summed into `usage`."""
    indices = list(indices)
    if not indices:
        return
    ray = _import_ray()
    started_here = _ensure_ray(ray, config)
    # a chunk returns all its records at once, so re-running it after a worker crash is safe
    remote_chunk = ray.remote(num_cpus=1, max_retries=2)(run_chunk)
    cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
    size = chunk_size(len(indices), cpus, config.concurrency)
    data = worker_config(config)
    refs = [
        remote_chunk.remote(data, chunk, source, str(run_dir) if run_dir else None) for chunk in chunked(indices, size)
    ]
    futures = {asyncio.wrap_future(ref.future()): ref for ref in refs}
    try:
        for next_done in asyncio.as_completed(list(futures)):
            result = await _chunk_result(ray, next_done)
            if usage is not None:
                merged = add_summaries(usage, result.usage)
                usage.clear()
                usage.update(merged)
            for record in result.dialogues:
                yield Dialogue.model_validate(record)
    finally:
        _cancel_unfinished(ray, [ref for future, ref in futures.items() if not future.done()])
        if started_here:
            ray.shutdown()
