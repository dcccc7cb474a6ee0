"""The `ray` executor: a run's conversations fanned out as Ray tasks, one chunk of indices each.

Each task rebuilds the run's context from the config (items, ratings, LLMs, HTTP pool) and runs
its chunk with the local executor (`iter_conversations`), so conversation i gets the same ID,
seed and record as it would locally. Tasks return plain dicts (Dialogue JSON plus the task's LLM
usage); the driver yields dialogues as chunks finish and writes them, so resume works as usual.
Install with the `[ray]` extra; `ray_address` in the run config joins an existing cluster
(`ray://` addresses need the `[ray-client]` extra), otherwise a local Ray instance is started for
the run and stopped after it.

Every node must read the data the driver read: each task checks the files it would load against
the manifest's record (path and SHA-256 of items, ratings, profiles, `data:` files) before it runs
anything, and a node that lacks a file, would read a fallback instead, or holds other content fails
its chunk with one line naming the node and the file, which stops the run. A chunk whose task
failed for good (its worker or node died on every attempt) stops the run with one line too.
"""

from __future__ import annotations

import asyncio
import importlib.util
import math
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any, AsyncGenerator, Iterable

from usersimcrs.config import RunConfig
from usersimcrs.core.dialogue import Dialogue
from usersimcrs.core.usage import UsageSummary, add_summaries
from usersimcrs.engine.local import _usage, build_context, close_context, data_files, iter_conversations, with_hashes
from usersimcrs.engine.loop import run_coroutine
from usersimcrs.errors import UserError
from usersimcrs.llm.cache import default_cache_dir

CHUNKS_PER_CPU = 4
CANCEL_GRACE_S = 5.0  # wait for tasks about to finish before cancelling the rest
TASK_RETRIES = 2  # a chunk is run again after a worker or node crash (its records come back at once)
RAY_CLIENT_EXTRA = "pip install 'usersimcrs[ray-client]'"


class DataMismatch(UserError):
    """A Ray node's data files are not those the driver recorded (missing, a fallback, other content)."""


class ChunkLost(UserError):
    """A chunk's Ray task failed for good (worker or node crashes on every attempt): one line, exit 1."""

    exit_code = 1


@dataclass(frozen=True)
class ChunkResult:
    """What one Ray task sends back: its dialogues as JSON dicts and its LLM usage summary."""

    dialogues: list[dict[str, Any]]
    usage: UsageSummary


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
    data = config.model_dump(mode="json")
    data["llm"]["cache_dir"] = str(default_cache_dir(config.llm.cache_dir))
    data["executor"] = "local"
    return data


def mismatch(recorded: dict[str, str], here: dict[str, str]) -> str | None:
    """Why the file a node would read differs from the one the driver recorded (None: the same)."""
    if recorded.get("used") == "none":  # the driver read no file there (data given as Python objects)
        return None
    if here.get("used") == "none":
        return "not found on this node"
    if (here.get("path"), here.get("used")) != (recorded.get("path"), recorded.get("used")):
        return f"this node would read {here.get('path')} ({here.get('used')}) instead"
    if here.get("sha256") != recorded.get("sha256"):
        return f"other content on this node (sha256 {str(here.get('sha256'))[:12]}, the driver's {str(recorded.get('sha256'))[:12]})"
    return None


def check_node_data(config: RunConfig, recorded: dict[str, dict[str, str]], node: str) -> None:
    """Raise DataMismatch naming `node` and the file when the data files this process would load for
    `config` are not the ones the driver recorded in the manifest (`recorded`: its `data_files`)."""
    here = with_hashes(data_files(config))
    for key, want in recorded.items():
        problem = mismatch(want, here.get(key, {"used": "none"}))
        if problem is not None:
            raise DataMismatch(
                f"Ray node {node}: {key} file {want.get('path')}: {problem}; every node needs the run's data files, "
                "the same content at the same paths"
            )


def run_chunk(
    config_data: dict[str, Any],
    indices: list[int],
    source: str,
    run_dir: str | None,
    recorded: dict[str, dict[str, str]] | None = None,
) -> ChunkResult:
    """Run one chunk in this (worker) process with the local executor; the body of a Ray task. The data
    files are checked against the driver's record (`recorded`) before anything runs."""
    config = RunConfig.model_validate(config_data)
    if recorded:
        check_node_data(config, recorded, socket.gethostname())
    return run_coroutine(_run_chunk_async(config, indices, source, run_dir), config.event_loop)


async def _run_chunk_async(config: RunConfig, indices: list[int], source: str, run_dir: str | None) -> ChunkResult:
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
    address = config.ray_address or ""
    if address.startswith("ray://") and importlib.util.find_spec("grpc") is None:
        raise UserError(
            f"ray_address {address}: a ray:// address joins through Ray Client, which needs {RAY_CLIENT_EXTRA}"
        )
    try:
        if config.ray_address:
            ray.init(address=config.ray_address, log_to_driver=False)
        else:
            ray.init(include_dashboard=False, log_to_driver=False)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        where = config.ray_address or "a local instance"
        raise UserError(f"ray_address: cannot start or reach Ray at {where} ({_first_line(exc)})") from None
    return True


def _first_line(exc: BaseException, limit: int = 200) -> str:
    """The first line of an exception's text (Ray's run to many lines), cut to `limit`."""
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:limit]


async def _chunk_result(ray: Any, future: Any, chunk: list[int]) -> ChunkResult:
    """A finished task's result; a user error raised in the task (bad plug-in config, a node's data)
    surfaces as itself, a task that failed for good (worker or node crashes, retries spent) as one line."""
    try:
        return await future
    except ray.exceptions.RayTaskError as exc:
        cause = getattr(exc, "cause", None)
        if isinstance(cause, UserError):
            raise cause from None
        raise _lost(chunk, cause if isinstance(cause, BaseException) else exc) from None
    except ray.exceptions.RayError as exc:  # WorkerCrashedError, NodeDiedError, ObjectLostError, ...
        raise _lost(chunk, exc) from None


def _lost(chunk: list[int], exc: BaseException) -> ChunkLost:
    """The one line of a chunk that failed for good: which conversations, why, and what to do."""
    return ChunkLost(
        f"Ray: the chunk of conversations {chunk[0]}-{chunk[-1]} failed after {TASK_RETRIES + 1} attempts "
        f"({type(exc).__name__}: {_first_line(exc)}); the conversations written so far stay, `run --resume` "
        "runs the rest"
    )


def _retrieve_quietly(future: asyncio.Future[Any]) -> None:
    """Mark a future's exception as retrieved (now, or when it ends): a chunk nobody waits for any more
    must not print "Future exception was never retrieved" after the run's own one line."""

    def retrieve(done: asyncio.Future[Any]) -> None:
        if not done.cancelled():
            done.exception()

    if future.done():
        retrieve(future)
    else:
        future.add_done_callback(retrieve)


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
    usage: UsageSummary | None = None,
    recorded: dict[str, dict[str, str]] | None = None,
) -> AsyncGenerator[Dialogue, None]:
    """Run `indices` as Ray tasks and yield each Dialogue; task LLM usage is summed into `usage`.
    `recorded`: the manifest's record of the data files the driver read (made here when not given),
    which each task checks its own against."""
    indices = list(indices)
    if not indices:
        return
    if recorded is None:
        recorded = with_hashes(data_files(config))
    ray = _import_ray()
    started_here = _ensure_ray(ray, config)
    # a chunk returns all its records at once, so re-running it after a worker crash is safe
    remote_chunk = ray.remote(num_cpus=1, max_retries=TASK_RETRIES)(run_chunk)
    cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
    size = chunk_size(len(indices), cpus, config.concurrency)
    data = worker_config(config)
    chunks = chunked(indices, size)
    refs = [remote_chunk.remote(data, chunk, source, str(run_dir) if run_dir else None, recorded) for chunk in chunks]
    futures = {asyncio.wrap_future(ref.future()): (ref, chunk) for ref, chunk in zip(refs, chunks, strict=True)}
    pending = set(futures)
    try:
        while pending:  # chunks in the order they finish, each known by its future
            finished, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for future in finished:
                result = await _chunk_result(ray, future, futures[future][1])
                if usage is not None:
                    merged = add_summaries(usage, result.usage)
                    usage.clear()
                    usage.update(merged)
                for record in result.dialogues:
                    yield Dialogue.model_validate(record)
    finally:
        for future in futures:
            _retrieve_quietly(future)
        _cancel_unfinished(ray, [ref for future, (ref, _) in futures.items() if not future.done()])
        if started_here:
            ray.shutdown()
