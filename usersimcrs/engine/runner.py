"""Runs the conversations of a run with at most C at once, streaming each into the run folder.

Conversation i always gets the same ID and seed, so a killed run resumes by skipping the IDs
already completed on disk, and a rerun with the same cache reproduces the same conversations.
On resume, failed conversations are run again (unless `keep_failed`): their lines are first
removed from the dialogues file by an atomic rewrite, so no reader ever sees one ID twice.

Each distinct user profile is stored once (before the first conversation line that names it by
`profile_id`), so a line is sized by its conversation, not by the user's history; a resumed run
reads the IDs already there and never writes one twice. The run holds its folder's writer lock
from the first check to the last write (`RunFolder.lock`), so a second `run` or `--resume` on the
same folder stops at once instead of writing every conversation twice.
"""

from __future__ import annotations

import json
import time
from contextlib import aclosing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crs_connectors.transport import POOL_KEY, CRSPool
from usersimcrs.config import RunConfig
from usersimcrs.core.dialogue import Dialogue
from usersimcrs.core.manifest import environment
from usersimcrs.core.run_folder import RunFolder
from usersimcrs.core.secrets import Secrets, scrubbing_logs
from usersimcrs.core.shared_resources import SharedResources
from usersimcrs.core.storage import StorageError
from usersimcrs.core.usage import UsageSummary, add_summaries
from usersimcrs.engine.conversation import plan
from usersimcrs.engine.local import (
    _usage,
    build_context,
    close_context,
    data_files,
    iter_conversations,
    with_hashes,
)

# re-exported: their home was this module
from usersimcrs.engine.local import data_file as data_file
from usersimcrs.engine.local import fallback_warnings as fallback_warnings
from usersimcrs.engine.local import load_items as load_items
from usersimcrs.engine.local import load_ratings as load_ratings
from usersimcrs.engine.loop import (
    current_loop_kind,
    run_coroutine,
    run_heap,
)
from usersimcrs.engine.plugins import RunPlugins, simulator_options
from usersimcrs.engine.progress import RunProgress
from usersimcrs.engine.ray_executor import iter_conversations_ray
from usersimcrs.errors import UserError
from usersimcrs.runtime.context import RunContext


@dataclass
class RunSummary:
    """What a run did: counts, where it wrote, LLM usage."""

    output_dir: Path
    completed: int = 0
    failed: int = 0
    skipped: int = 0  # conversations already on disk and kept (completed ones; failed ones with keep_failed)
    retried: int = 0  # failed conversations of an earlier session run again
    ambiguous_items: int = 0  # recommended titles that several items share, over the whole file
    user_turns: dict[str, int] = field(default_factory=dict)  # user turns by the source of their words, whole file
    wall_s: float = 0.0
    llm: UsageSummary = field(default_factory=dict)


def _prepare_output(
    folder: RunFolder, resume: bool, overwrite: bool, keep_failed: bool = False
) -> tuple[set[str], set[str]]:
    """(IDs to skip, failed IDs removed to be run again) for the run folder, after any clean-up."""
    if folder.has_run():
        if overwrite:
            folder.clear()
            return set(), set()
        if not resume:
            raise UserError(f"{folder.path} already holds a run; use --resume to continue it or --overwrite")
        failed = set() if keep_failed else folder.failed_ids()
        if not failed and not folder.repeated_ids():
            return folder.stored_ids(), set()
        # failed ones are run again; a conversation ID on several lines (two writers before the lock) once
        retried = folder.compact(drop_failed=not keep_failed)
        return folder.stored_ids(), retried
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
    resources: SharedResources | None = None,
    progress_label: str | None = None,
    plain_progress: bool = False,
) -> RunSummary:
    """Run (or resume) `config` into `output_dir`; see module docstring.

    `keep_failed`: on resume, leave failed conversations as they are instead of running them again.
    `resources`: the command's read-only resources, for the context built here (none when `context` is given).
    `progress_label` names the progress lines (a matrix cell's name); `plain_progress`: plain lines on a
    terminal too (cells side by side). A second writer on the same folder gets `FolderBusy`; a full disk stops the run with one
    `StorageError` after the conversations in flight are cancelled (within `SHUTDOWN_GRACE_S`).
    """
    folder = RunFolder(output_dir)
    secrets = context.secrets if context is not None else Secrets.from_config(config)
    with folder.lock("run"), scrubbing_logs(secrets):
        return await _run_locked(
            config,
            folder,
            resume,
            overwrite,
            keep_failed,
            context,
            source,
            plugins,
            resources,
            progress_label=progress_label,
            plain_progress=plain_progress,
        )


async def _run_locked(
    config: RunConfig,
    folder: RunFolder,
    resume: bool,
    overwrite: bool,
    keep_failed: bool,
    context: RunContext | None,
    source: str,
    plugins: RunPlugins | None,
    resources: SharedResources | None = None,
    *,
    progress_label: str | None = None,
    plain_progress: bool = False,
) -> RunSummary:
    output_dir = folder.path
    previous = folder.read_manifest() if resume and not overwrite else {}
    if previous and previous.get("config_hash") not in (None, config.config_hash()):
        changes = config.changes_from(previous.get("config") or {})
        shown = "; ".join(changes[:5]) + (f"; and {len(changes) - 5} more" if len(changes) > 5 else "")
        raise UserError(
            f"{output_dir}: the config changed since this run started ({shown or 'settings differ'}); "
            "resume needs the same config (repeat the same --set options, or run into a new folder)"
        )
    done, retried = _prepare_output(folder, resume, overwrite, keep_failed)
    wanted = {plan(config, i).conversation_id for i in range(config.conversations)}
    summary = RunSummary(output_dir=output_dir, skipped=len(done & wanted), retried=len(retried & wanted))
    indices = [i for i in range(config.conversations) if plan(config, i).conversation_id not in done]
    files = with_hashes(data_files(config))  # hashed once per session: the start and the end record the same
    manifest = _manifest(config, previous, status="running", files=files)
    # counted at the start, so that a session killed before its final write still counts
    sessions = int(previous.get("timings", {}).get("sessions", 0)) + 1
    manifest["timings"] = {"wall_s": float(previous.get("timings", {}).get("wall_s", 0.0)), "sessions": sessions}
    own_context = context is None
    context = context or build_context(config, output_dir, resources)
    try:
        folder.write_manifest(manifest)
    except BaseException:
        if own_context:
            await close_context(context)
        raise
    started = time.perf_counter()
    progress = RunProgress(
        total=config.conversations,
        done=len(done),
        enabled=config.progress,
        llms=context.llms,
        label=progress_label or "conversations",
        plain=plain_progress,
    )
    remote_usage: UsageSummary = {}  # LLM usage of conversations run in other processes (ray executor)
    failed = True
    try:
        if config.executor == "ray":
            stream = iter_conversations_ray(
                config, indices, source=source, run_dir=output_dir, usage=remote_usage, recorded=files
            )
        else:
            stream = iter_conversations(config, context, indices, source=source, plugins=plugins)
        # aclosing: on any error the stream is closed here, so the conversations in flight are cancelled
        # (bounded) while the run's HTTP pools and LLMs are still open, not later by the event loop's shutdown
        async with aclosing(stream) as conversations:
            with (
                folder.dialogue_writer() as writer,
                folder.profile_writer(context.items) as profiles,
                progress,
                run_heap(),
            ):
                async for dialogue in conversations:
                    record = profiles.detach(dialogue)
                    try:
                        writer.write(record)
                    except ValueError as exc:  # PydanticSerializationError: not JSON-writable (nothing written)
                        dialogue = unstorable(dialogue, exc)
                        writer.write(profiles.detach(dialogue))
                    if dialogue.status == "ok":
                        summary.completed += 1
                    else:
                        summary.failed += 1
                    progress.advance(failed=dialogue.status != "ok")
        failed = False
    finally:
        summary.wall_s = time.perf_counter() - started
        try:
            _finish_manifest(config, folder, previous, summary, context, remote_usage, sessions, files)
        except StorageError:
            if not failed:
                raise  # the run itself went well: the manifest's failure is the error to report
            # the run is already failing (e.g. the disk filled up): its first error is the one to report;
            # the manifest of the session start is still whole
        finally:
            if own_context:
                await close_context(context)
    return summary


def _finish_manifest(
    config: RunConfig,
    folder: RunFolder,
    previous: dict[str, Any],
    summary: RunSummary,
    context: RunContext,
    remote_usage: UsageSummary,
    sessions: int,
    files: dict[str, dict[str, str]],
) -> None:
    """The manifest at the end of a session: counts from the file, LLM usage, timings, status."""
    usage = add_summaries(_usage(context), remote_usage)
    summary.llm = add_summaries(previous.get("llm"), usage)  # ratios recomputed, not summed
    counts = folder.dialogue_counts()
    summary.ambiguous_items = counts["ambiguous_items"]
    summary.user_turns = counts["user_turns"]
    complete = counts["completed"] + counts["failed"] >= config.conversations
    manifest = _manifest(config, previous, status="completed" if complete else "interrupted", files=files)
    manifest["dialogues"] = counts
    manifest["llm"] = summary.llm
    if context.llms is not None and hasattr(context.llms, "models"):
        manifest["models"]["used"] = {**previous.get("models", {}).get("used", {}), **context.llms.models()}
    manifest["http_clients"] = http_clients(context, previous.get("http_clients") or {})
    manifest["timings"] = {
        "wall_s": round(summary.wall_s + float(previous.get("timings", {}).get("wall_s", 0.0)), 3),
        "sessions": sessions,
    }
    folder.write_manifest(manifest)


def http_clients(context: RunContext, previous: dict[str, Any]) -> dict[str, dict[str, dict[str, str]]]:
    """Which HTTP client spoke to each LLM (by component) and CRS endpoint (by origin) of the run, and why
    (`core/http_route.py`), over this session and the ones before it."""
    llms = context.llms.http_routes() if context.llms is not None and hasattr(context.llms, "http_routes") else {}
    pool = context.cache.get(POOL_KEY)
    crs = pool.routes() if isinstance(pool, CRSPool) else {}
    return {"llm": {**previous.get("llm", {}), **llms}, "crs": {**previous.get("crs", {}), **crs}}


def run(
    config: RunConfig, output_dir: str | Path, resume: bool = False, overwrite: bool = False, **kw: Any
) -> RunSummary:
    """Synchronous entry point around `run_async` (`kw`: keep_failed, context, source)."""
    return run_coroutine(run_async(config, output_dir, resume=resume, overwrite=overwrite, **kw), config.event_loop)


def unstorable(dialogue: Dialogue, exc: Exception) -> Dialogue:
    """A failed copy of a dialogue that could not be written as JSON (a plug-in's value that escaped the
    engine's repairs), without per-utterance metadata, saying why: the run goes on and counts it."""
    reason = " ".join(str(exc).split())[:300]
    utterances = [u.model_copy(update={"metadata": {}}) for u in dialogue.utterances]
    return dialogue.model_copy(
        update={
            "utterances": utterances,
            "metadata": {},
            "status": "failed",
            "error": f"not storable as JSON: {reason}",
            "end_reason": "error",
        }
    )


def _manifest(
    config: RunConfig, previous: dict[str, Any], *, status: str, files: dict[str, dict[str, str]]
) -> dict[str, Any]:
    llm = config.llm.model_dump(mode="json")
    return {
        **previous,  # sections added by other commands (judges, metrics) survive a resume
        "name": config.name,
        "status": status,
        "config": config.model_dump(mode="json"),
        "simulator_options": simulator_options(config.simulator),
        "config_hash": config.config_hash(),
        "seeds": {"run": config.seed, "scheme": "sha256(run_seed:index)"},
        "models": {"default": {"backend": llm.get("backend"), "model": llm.get("model")}, **config.llm_components},
        "environment": {**environment(), "event_loop": _loop_kind()},
        "created": previous.get("created") or time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "data_files": files,  # the file each data input read (path or fallback_path) and its SHA-256
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
