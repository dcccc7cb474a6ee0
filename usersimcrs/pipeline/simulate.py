"""Simulate: preflight the CRS, run (or resume) the conversations, summarise what failed and why.

`simulate_async` / `simulate` are what `usersimcrs run` calls; the CLI only parses and prints.
A CRS or an LLM server that cannot be reached raises `UserError` before any conversation is written; a run whose
failed share exceeds `max_failed_share` is fully written and flagged (`exceeds_failed_share`).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from usersimcrs.analysis.failures import FailureSummary, summarize_failures_file
from usersimcrs.config import RunConfig
from usersimcrs.core.run_folder import RunFolder, load_run
from usersimcrs.core.shared_resources import SharedResources
from usersimcrs.engine import preflight
from usersimcrs.engine.loop import run_blocking
from usersimcrs.engine.plugins import RunPlugins, plugins_from_config
from usersimcrs.engine.runner import data_files, fallback_warnings, run_async
from usersimcrs.runtime.context import RunContext

log = logging.getLogger("usersimcrs.data")


class SimulationResult(BaseModel):
    """What `simulate` did: counts of this session, the whole folder's failures, LLM usage."""

    output_dir: Path
    completed: int = 0
    failed: int = 0
    skipped: int = Field(0, description="conversations already done and kept")
    retried: int = Field(0, description="failed conversations of an earlier session run again")
    ambiguous_items: int = Field(0, description="recommended titles left ambiguous, over the whole folder")
    user_turns: dict[str, int] = Field(
        default_factory=dict,
        description="user turns of the whole folder by the source of their words: labelled (by an LLM user), "
        "model, repaired, fallback (canned, not the model's), template",
    )
    wall_s: float = 0.0
    llm: dict[str, Any] = Field(default_factory=dict)
    failures: FailureSummary = Field(default_factory=FailureSummary)
    report_path: Path | None = Field(None, description="report.html, when the run was asked to write one")
    max_failed_share: float = 0.2
    exceeds_failed_share: bool = False


async def simulate_async(
    config: RunConfig,
    output: Path,
    *,
    resume: bool = False,
    overwrite: bool = False,
    keep_failed: bool = False,
    check_crs: bool = True,
    check_llms: bool = True,
    source: str = "config",
    plugins: RunPlugins | None = None,
    context: RunContext | None = None,
    report: bool = False,
) -> SimulationResult:
    """Preflight the CRS and the LLM servers the run calls (unless `check_crs` / `check_llms` is False),
    run into `output`, summarise failures.

    `plugins` and `context` let the public API pass Python objects (a CRS instance, an item
    collection) instead of registry names and file paths (the caller turns `check_crs` off for a CRS object).
    """
    output = Path(output)
    if plugins is None:  # every plug-in option is checked before anything is written
        plugins = plugins_from_config(config, source)
    if context is None:  # the data files the config names (a context given by the API brings its own)
        for line in fallback_warnings(data_files(config)):
            log.warning(line)
    if check_crs:
        await preflight.check_crs(config.crs, source=source, run_seed=config.seed, overrides=config.overrides)
    if check_llms:
        await preflight.check_llms(config, source=source)
    # the run, its scoring and its report read the item file once
    resources = context.resources if context is not None else SharedResources()
    summary = await run_async(
        config,
        output,
        resume=resume,
        overwrite=overwrite,
        keep_failed=keep_failed,
        source=source,
        plugins=plugins,
        context=context,
        resources=resources,
    )
    failures = summarize_failures_file(RunFolder(output).dialogues_path)
    report_path = None
    if report:  # metrics first, so the report shows them as `usersimcrs metrics` computes them
        # lazy: pandas & co only when the run's metrics and report are asked for
        from usersimcrs.pipeline.report import report as write_report
        from usersimcrs.pipeline.score import score

        score(output, resources=resources)
        report_path = write_report(load_run(output, resources=resources))
    return SimulationResult(
        output_dir=output,
        completed=summary.completed,
        failed=summary.failed,
        skipped=summary.skipped,
        retried=summary.retried,
        ambiguous_items=summary.ambiguous_items,
        user_turns=summary.user_turns,
        wall_s=summary.wall_s,
        llm=summary.llm,
        failures=failures,
        max_failed_share=config.max_failed_share,
        exceeds_failed_share=(failures.share or 0.0) > config.max_failed_share,
        report_path=report_path,
    )


def simulate(config: RunConfig, output: Path, **options: Any) -> SimulationResult:
    """`simulate_async` on a fresh event loop of `config.event_loop` (inside a running loop: in a worker thread)."""
    return run_blocking(simulate_async(config, output, **options), config.event_loop)
