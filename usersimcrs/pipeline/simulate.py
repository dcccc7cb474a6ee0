"""Simulate: preflight the CRS, run (or resume) the conversations, summarise what failed and why.

`simulate_async` / `simulate` are what `usersimcrs run` calls; the CLI only parses and prints.
A CRS that cannot be reached raises `UserError` before any conversation is written; a run whose
failed share exceeds `max_failed_share` is fully written and flagged (`exceeds_failed_share`).
"""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from usersimcrs.config import RunConfig
from usersimcrs.core.jsonl import iter_jsonl
from usersimcrs.engine import preflight
from usersimcrs.engine.loop import run_coroutine
from usersimcrs.engine.runner import DIALOGUES, run_async

_URL = re.compile(r"\b[a-z][a-z0-9+.\-]*://\S+?(?=[\s)\]'\",]|$)", re.I)
_NUMBER = re.compile(r"(?<!HTTP )(?<![A-Za-z0-9.])\d+(?:\.\d+)?")  # HTTP status codes and names like utf8 stay
_SPACES = re.compile(r"\s+")


def failure_reason(error: str | None) -> str:
    """The reason an error string belongs to: URLs and numbers (ports, counts, seconds) blanked out.

    ``"cannot connect to http://127.0.0.1:5005/ (... ) (after 3 attempts)"`` and the same with
    another port or count give one reason; ``HTTP 500`` and ``HTTP 404`` stay apart.
    """
    text = _URL.sub("<url>", error or "unknown error")
    text = _NUMBER.sub("N", text)
    text = _SPACES.sub(" ", text).strip()
    return text[:200]


class FailureReason(BaseModel):
    """One group of failed conversations: the reason, how many, and one full error as an example."""

    reason: str
    count: int
    example: str


class FailureSummary(BaseModel):
    """The failed conversations of a run folder, grouped by reason (most frequent first)."""

    total: int = 0
    failed: int = 0
    reasons: list[FailureReason] = Field(default_factory=list)

    @property
    def share(self) -> float:
        """Failed conversations over all written ones (0 when none were written)."""
        return self.failed / self.total if self.total else 0.0

    def top(self, n: int = 5) -> list[FailureReason]:
        return self.reasons[:n]


def summarize_failures(path: str | Path) -> FailureSummary:
    """Group the failed records of `dialogues.jsonl` by `failure_reason`; ties are ordered by reason."""
    counts: Counter[str] = Counter()
    examples: dict[str, str] = {}
    total = 0
    for record in iter_jsonl(path):
        total += 1
        if record.get("status") == "ok":
            continue
        error = str(record.get("error") or "unknown error")
        reason = failure_reason(error)
        counts[reason] += 1
        examples.setdefault(reason, error[:500])
    reasons = [FailureReason(reason=r, count=c, example=examples[r]) for r, c in sorted(counts.items(), key=lambda rc: (-rc[1], rc[0]))]
    return FailureSummary(total=total, failed=sum(counts.values()), reasons=reasons)


class SimulationResult(BaseModel):
    """What `simulate` did: counts of this session, the whole folder's failures, LLM usage."""

    output_dir: Path
    completed: int = 0
    failed: int = 0
    skipped: int = Field(0, description="conversations already done and kept")
    retried: int = Field(0, description="failed conversations of an earlier session run again")
    ambiguous_items: int = Field(0, description="recommended titles left ambiguous, over the whole folder")
    wall_s: float = 0.0
    llm: dict[str, Any] = Field(default_factory=dict)
    failures: FailureSummary = Field(default_factory=FailureSummary)
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
    source: str = "config",
) -> SimulationResult:
    """Preflight the CRS (unless `check_crs` is False), run into `output`, summarise failures."""
    output = Path(output)
    if check_crs:
        await preflight.check_crs(config.crs, source=source, run_seed=config.seed)
    summary = await run_async(config, output, resume=resume, overwrite=overwrite, keep_failed=keep_failed, source=source)
    failures = summarize_failures(output / DIALOGUES)
    return SimulationResult(
        output_dir=output,
        completed=summary.completed,
        failed=summary.failed,
        skipped=summary.skipped,
        retried=summary.retried,
        ambiguous_items=summary.ambiguous_items,
        wall_s=summary.wall_s,
        llm=summary.llm,
        failures=failures,
        max_failed_share=config.max_failed_share,
        exceeds_failed_share=failures.share > config.max_failed_share,
    )


def simulate(config: RunConfig, output: Path, **options: Any) -> SimulationResult:
    """`simulate_async` on a fresh event loop (`config.event_loop`); inside a running loop (a
    notebook) it runs on a worker thread with its own loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return run_coroutine(simulate_async(config, output, **options), config.event_loop)
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(lambda: run_coroutine(simulate_async(config, output, **options), config.event_loop)).result()
