"""Runs the conversations of a run with at most C at once, streaming each to `dialogues.jsonl`.

Conversation i always gets the same ID and seed, so a killed run resumes by skipping the IDs
already completed on disk, and a rerun with the same cache reproduces the same conversations.
On resume, failed conversations are run again (unless `keep_failed`): their lines are first
removed from `dialogues.jsonl` by an atomic rewrite, so no reader ever sees one ID twice.

Each distinct user profile is appended once to `profiles.jsonl` (before the first conversation
line that names it by `profile_id`), so a line is sized by its conversation, not by the user's
history; a resumed run reads the IDs already there and never writes one twice.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator, Iterable

from usersimcrs.config import RunConfig
from usersimcrs.core.dialogue import Dialogue
from usersimcrs.core.items import ItemCollection
from usersimcrs.core.jsonl import JsonlWriter, iter_jsonl
from usersimcrs.core.manifest import environment, read_manifest, write_manifest
from usersimcrs.core.profile import Ratings
from usersimcrs.core.run_folder import PROFILES, ProfileWriter
from usersimcrs.core.usage import add_summaries
from usersimcrs.engine.conversation import ConversationRunner, plan
from usersimcrs.engine.loop import current_loop_kind, run_coroutine, run_heap
from usersimcrs.engine.plugins import RunPlugins
from usersimcrs.engine.progress import RunProgress
from usersimcrs.errors import ConfigError, DataError, UserError
from usersimcrs.runtime.context import RunContext

DIALOGUES = "dialogues.jsonl"


@dataclass
class RunSummary:
    """What a run did: counts, where it wrote, LLM usage."""

    output_dir: Path
    completed: int = 0
    failed: int = 0
    skipped: int = 0  # conversations already on disk and kept (completed ones; failed ones with keep_failed)
    retried: int = 0  # failed conversations of an earlier session run again
    ambiguous_items: int = 0  # recommended titles that several items share, over the whole file
    wall_s: float = 0.0
    llm: dict[str, Any] = field(default_factory=dict)


def load_items(config: RunConfig) -> ItemCollection | None:
    """The run's item collection, from `items.path` or, when that is missing, `items.fallback_path`."""
    section = config.items
    if section is None:
        return None
    path = _existing(section.path, section.fallback_path, "items")
    items = ItemCollection.from_csv(
        path,
        id_column=section.id_column,
        title_column=section.title_column,
        mapping=section.mapping,
        delimiters=section.delimiters,
    )
    if section.max_items is not None:
        items = ItemCollection(list(items)[: section.max_items])
    return items


def load_ratings(config: RunConfig) -> Ratings | None:
    section = config.ratings
    if section is None:
        return None
    path = _existing(section.path, section.fallback_path, "ratings")
    return Ratings.from_csv(
        path,
        user_column=section.user_column,
        item_column=section.item_column,
        rating_column=section.rating_column,
        scale=section.scale,
    )


def _existing(path: str, fallback: str | None, key: str) -> str:
    if Path(path).exists():
        return path
    if fallback and Path(fallback).exists():
        return fallback
    raise ConfigError(f"{key}.path: file not found: {path}" + (f" (nor fallback {fallback})" if fallback else ""))


def build_context(config: RunConfig, run_dir: Path | None = None) -> RunContext:
    """Load the run's shared resources; LLMs are created lazily on first use. `close_context` releases them."""
    from crs_connectors.transport import POOL_KEY, CRSPool
    from usersimcrs.llm.provider import LLMProvider

    llms = LLMProvider(config.llm, config.llm_components)
    context = RunContext(
        items=load_items(config),
        ratings=load_ratings(config),
        llms=llms,
        run_dir=run_dir,
        run_seed=config.seed,
        data=dict(config.data),
    )
    pool = context.shared(POOL_KEY, CRSPool)  # one keep-alive pool for every HTTP CRS request of the run
    context.on_close(llms.aclose)
    context.on_close(pool.aclose)
    return context


async def close_context(context: RunContext) -> None:
    """Release the run's resources (HTTP pool, LLM backends and caches, recorder files)."""
    await context.aclose()


def completed_ids(path: Path) -> set[str]:
    """IDs already written (a torn last line from a crash is ignored)."""
    return {str(rec["conversation_id"]) for rec in iter_jsonl(path) if "conversation_id" in rec}


def failed_ids(path: Path) -> set[str]:
    """IDs of the failed conversations written to `path`."""
    return {
        str(rec["conversation_id"])
        for rec in iter_jsonl(path)
        if rec.get("status") != "ok" and "conversation_id" in rec
    }


def drop_failed(path: Path) -> set[str]:
    """Rewrite `path` without its failed records (and without a torn last line or a repeated ID).

    Kept lines are copied byte for byte into a temp file that replaces `path` atomically
    (`os.replace`), so a reader sees either the old file or the new one, never a mix, and a crash
    mid-rewrite leaves the old file whole. Returns the IDs of the dropped failed records.
    """
    dropped: set[str] = set()
    seen: set[str] = set()
    tmp = path.with_name(path.name + ".tmp")
    with path.open("rb") as source, tmp.open("wb") as target:
        for number, raw in enumerate(source, start=1):
            if not raw.strip():
                continue
            try:
                record = json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                if not raw.endswith(b"\n"):  # a torn last line: never a complete record
                    break
                target.close()
                tmp.unlink(missing_ok=True)
                raise DataError(f"{path}:{number}: not valid JSON ({exc})") from exc
            cid = str(record.get("conversation_id")) if isinstance(record, dict) else None
            if cid is not None and record.get("status") != "ok":
                dropped.add(cid)
                continue
            if cid is not None and cid in seen:
                continue
            if cid is not None:
                seen.add(cid)
            target.write(raw if raw.endswith(b"\n") else raw + b"\n")
        target.flush()
        os.fsync(target.fileno())
    os.replace(tmp, path)
    return dropped


async def iter_conversations(
    config: RunConfig,
    context: RunContext,
    indices: Iterable[int],
    *,
    source: str = "config",
    plugins: RunPlugins | None = None,
) -> AsyncIterator[Dialogue]:
    """Run the conversations of `indices` with at most `config.concurrency` at once, yielding each as it ends."""
    from usersimcrs.user_model.population import build_profile_source

    runner = ConversationRunner(config, context, build_profile_source(config.profiles, context), source, plugins)
    queue: asyncio.Queue[Dialogue | None] = asyncio.Queue(maxsize=config.concurrency * 2)
    pending = iter(list(indices))

    async def worker() -> None:
        for index in pending:  # a shared iterator: each index is taken by exactly one worker
            await queue.put(await runner.run(plan(config, index)))
        await queue.put(None)

    workers = [asyncio.create_task(worker()) for _ in range(config.concurrency)]
    finished = 0
    try:
        while finished < len(workers):
            item = await queue.get()
            if item is None:
                finished += 1
            else:
                yield item
    finally:
        for task in workers:
            task.cancel()
        await asyncio.gather(*workers, return_exceptions=True)


def _prepare_output(
    output_dir: Path, resume: bool, overwrite: bool, keep_failed: bool = False
) -> tuple[set[str], set[str]]:
    """(IDs to skip, failed IDs removed to be run again) for the run folder, after any clean-up."""
    output_dir.mkdir(parents=True, exist_ok=True)
    dialogues = output_dir / DIALOGUES
    if dialogues.exists() and dialogues.stat().st_size > 0:
        if overwrite:
            dialogues.unlink()
            for name in ("manifest.json", "judgments.jsonl", "metrics.csv", "metrics_summary.csv", PROFILES):
                (output_dir / name).unlink(missing_ok=True)
            return set(), set()
        if not resume:
            raise UserError(f"{output_dir} already holds a run; use --resume to continue it or --overwrite")
        if keep_failed or not failed_ids(dialogues):
            return completed_ids(dialogues), set()
        retried = drop_failed(dialogues)
        return completed_ids(dialogues), retried
    return set(), set()


async def run_async(
    config: RunConfig,
    output_dir: str | Path,
    *,
    resume: bool = False,
    overwrite: bool = False,
    keep_failed: bool = False,
    context: RunContext | None = None,
    source: str = "config",
    plugins: RunPlugins | None = None,
) -> RunSummary:
    """Run (or resume) `config` into `output_dir`; see module docstring.

    `keep_failed`: on resume, leave failed conversations as they are instead of running them again.
    """
    output_dir = Path(output_dir)
    previous = read_manifest(output_dir) if resume and not overwrite else {}
    if previous and previous.get("config_hash") not in (None, config.config_hash()):
        raise UserError(f"{output_dir}: the config changed since this run started; resume needs the same config")
    done, retried = _prepare_output(output_dir, resume, overwrite, keep_failed)
    own_context = context is None
    context = context or build_context(config, output_dir)
    wanted = {plan(config, i).conversation_id for i in range(config.conversations)}
    summary = RunSummary(output_dir=output_dir, skipped=len(done & wanted), retried=len(retried & wanted))
    indices = [i for i in range(config.conversations) if plan(config, i).conversation_id not in done]
    manifest = _manifest(config, previous, status="running")
    # counted at the start, so that a session killed before its final write still counts
    sessions = int(previous.get("timings", {}).get("sessions", 0)) + 1
    manifest["timings"] = {"wall_s": float(previous.get("timings", {}).get("wall_s", 0.0)), "sessions": sessions}
    write_manifest(output_dir, manifest)
    started = time.perf_counter()
    progress = RunProgress(total=config.conversations, done=len(done), enabled=config.progress, llms=context.llms)
    remote_usage: dict[str, Any] = {}  # LLM usage of conversations run in other processes (ray executor)
    try:
        if config.executor == "ray":
            from usersimcrs.engine.ray_executor import iter_conversations_ray

            stream = iter_conversations_ray(config, indices, source=source, run_dir=output_dir, usage=remote_usage)
        else:
            stream = iter_conversations(config, context, indices, source=source, plugins=plugins)
        with (
            JsonlWriter(output_dir / DIALOGUES) as writer,
            ProfileWriter(output_dir, context.items) as profiles,
            progress,
            run_heap(),
        ):
            async for dialogue in stream:
                writer.write(profiles.detach(dialogue))
                if dialogue.status == "ok":
                    summary.completed += 1
                else:
                    summary.failed += 1
                progress.advance(failed=dialogue.status != "ok")
    finally:
        summary.wall_s = time.perf_counter() - started
        usage = add_summaries(_usage(context), remote_usage)
        summary.llm = add_summaries(previous.get("llm"), usage)  # ratios recomputed, not summed
        counts = _count(output_dir / DIALOGUES)
        summary.ambiguous_items = counts["ambiguous_items"]
        complete = counts["completed"] + counts["failed"] >= config.conversations
        manifest = _manifest(config, previous, status="completed" if complete else "interrupted")
        manifest["dialogues"] = counts
        manifest["llm"] = summary.llm
        if context.llms is not None and hasattr(context.llms, "models"):
            manifest["models"]["used"] = {**previous.get("models", {}).get("used", {}), **context.llms.models()}
        manifest["timings"] = {
            "wall_s": round(summary.wall_s + float(previous.get("timings", {}).get("wall_s", 0.0)), 3),
            "sessions": sessions,
        }
        write_manifest(output_dir, manifest)
        if own_context:
            await close_context(context)
    return summary


def run(
    config: RunConfig, output_dir: str | Path, resume: bool = False, overwrite: bool = False, **kw: Any
) -> RunSummary:
    """Synchronous entry point around `run_async` (`kw`: keep_failed, context, source)."""
    return run_coroutine(run_async(config, output_dir, resume=resume, overwrite=overwrite, **kw), config.event_loop)


def _usage(context: RunContext) -> dict[str, Any]:
    llms = context.llms
    if llms is not None and hasattr(llms, "usage_summary"):
        return llms.usage_summary()
    return {}


def _count(path: Path) -> dict[str, int]:
    """Completed and failed conversations in `path`, and the recommended titles left ambiguous."""
    counts = {"completed": 0, "failed": 0, "ambiguous_items": 0}
    for rec in iter_jsonl(path):
        counts["completed" if rec.get("status") == "ok" else "failed"] += 1
        counts["ambiguous_items"] += sum(
            1
            for utt in rec.get("utterances", [])
            for item in utt.get("items", [])
            if item.get("resolution") == "ambiguous"
        )
    return counts


def _manifest(config: RunConfig, previous: dict[str, Any], *, status: str) -> dict[str, Any]:
    llm = config.llm.model_dump(mode="json")
    return {
        **previous,  # sections added by other commands (judges, metrics) survive a resume
        "name": config.name,
        "status": status,
        "config": config.model_dump(mode="json"),
        "config_hash": config.config_hash(),
        "seeds": {"run": config.seed, "scheme": "sha256(run_seed:index)"},
        "models": {"default": {"backend": llm.get("backend"), "model": llm.get("model")}, **config.llm_components},
        "environment": {**environment(), "event_loop": _loop_kind()},
        "created": previous.get("created") or time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "dialogues": previous.get("dialogues", {"completed": 0, "failed": 0, "ambiguous_items": 0}),
        "llm": previous.get("llm", {}),
    }


def _loop_kind() -> str | None:
    """The running loop's kind ('uvloop' or 'asyncio'), None outside a loop."""
    try:
        return current_loop_kind()
    except RuntimeError:
        return None


def dump_json(data: Any) -> str:
    return json.dumps(data, indent=2, default=str)
